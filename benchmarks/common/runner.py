"""The runner of the training benchmarks (``fig_*``, ``training_throughput``, ...).

:func:`train` fits a module (``hts_lightning.PPO`` by default) through Lightning's Trainer with
one collector kind (``hts``, or a TorchRL baseline built by
:func:`hts_lightning.collectors.make_collector`: ``sync`` =
``Collector(ParallelEnv)``, ``multi_sync``, ``multi_async``) for a number of batches, and fills
in a :class:`Run`: steady-state frames/s, per-update learning curve, load average. Only the
module's ``collector=`` argument differs between contenders: same env, model, learner, number
of replicas and processes.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import torch
from lightning import Callback, Trainer

from hts_lightning import PPO
from hts_lightning.choices import CollectorKind, InferenceMode

LABELS = {
    "hts": "HTS",
    "sync": "Collector(ParallelEnv)",
    "multi_sync": "MultiSyncCollector",
    "multi_async": "MultiAsyncCollector",
}
GAMES = {"pong": "ALE/Pong-v5", "breakout": "ALE/Breakout-v5", "qbert": "ALE/Qbert-v5"}
FOOTBALL = "academy_3_vs_1_with_keeper"
#: torch's threads in a fresh process, before any collector changed them.
FRESH_THREADS = torch.get_num_threads()


def fresh_threads() -> None:
    """Give this process torch's thread count of a fresh one, before each contender starts.

    Each collector then sets the learner's threads by its own rule, as in a user's program:
    the HTSCollector's default (``HTSCollector._learner_threads``: one core per worker left
    free, every core beside niced workers), TorchRL's (one core per worker left free).
    TorchRL's collectors change the count when they start and restore it on shutdown, the
    HTSCollector sets it for its learner: without the reset the order of runs would change the
    next contender's threads.
    """
    torch.set_num_threads(FRESH_THREADS)


def latency_env(std_ms: float, mean_ms: float = 2.0) -> tuple[str, dict]:
    """``VariableLatencyEnv`` with a log-normal step time (milliseconds in, seconds out)."""
    return "VariableLatency", {
        "distribution": "lognormal",
        "mean": mean_ms / 1000,
        "std": std_ms / 1000,
    }


def require_football() -> None:
    """Stop with the install command when the ``football`` extra is missing."""
    from hts_lightning.envs._shared import MissingDependencyError, check_football_installed

    try:
        check_football_installed()
    except MissingDependencyError as error:
        raise SystemExit(str(error)) from None


@dataclass
class Run:
    """One training run: its settings, steady-state throughput and per-update curve."""

    env: str
    collector: CollectorKind
    num_envs: int
    num_workers: int
    sync_interval: int
    seed: int = 0
    #: the HTSCollector's ``inference`` ("auto": in the workers on a CPU-only machine)
    inference: InferenceMode = "auto"
    fps: float = float("nan")
    lag: str = "not recorded"
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    wall_s: float = 0.0
    #: over the timed batches: seconds in the learner's update, and waiting for the next batch
    update_s: float = 0.0
    wait_s: float = 0.0
    timed_batches: int = 0
    #: (frames, wall seconds since the start of training, mean of the last 20 returns or nan)
    curve: list[tuple[int, float, float]] = field(default_factory=list)

    @property
    def update_per_batch(self) -> float:
        """Mean seconds per timed batch in the learner's update (the module's ``time/update``)."""
        return self.update_s / max(self.timed_batches, 1)

    @property
    def per_batch(self) -> str:
        """Seconds per timed batch in the learner's update / waiting for the batch."""
        wait = self.wait_s / max(self.timed_batches, 1)
        return f"{self.update_per_batch:.2f} / {wait:.2f}"

    @property
    def label(self) -> str:
        if self.collector == "hts" and self.inference != "auto":
            return f"HTS, inference {self.inference}"
        return LABELS[self.collector]


def contenders(collectors: list[str], hts_inference: list[str]) -> list[tuple[str, str]]:
    """(collector kind, HTS inference) pairs: one per HTS inference mode, then the baselines."""
    pairs = [("hts", mode) for mode in hts_inference] if "hts" in collectors else []
    return pairs + [(kind, "auto") for kind in collectors if kind != "hts"]


class Recorder(Callback):
    """Per update: frames, wall seconds and ``return_last_20``; and the steady-state clock.

    Wall time counts from ``on_train_start`` (the collector's processes are started by then
    for the TorchRL collectors and by the first batch for HTS: both inside the curve). The
    throughput clock runs from the end of the first update to the end of the last, so start-up
    is excluded; with ``warmup`` W the clock starts at the end of update W instead (a
    ``MultiAsyncCollector``'s W workers start together and deliver their first W batches at
    once: timing from the first would count the others' head start). With ``stop_after``
    the Trainer stops after that many timed batches, one batch before ``total_frames``
    (TorchRL's ``Collector`` tears its ``ParallelEnv`` down before yielding its last batch,
    which would bill the teardown to that batch).
    """

    def __init__(self, stop_after: int | None = None, warmup: int = 1):
        self.stop_after = stop_after
        self.warmup = warmup
        self.t0 = 0.0
        self.start: float | None = None
        self.frames_at_start = 0
        self.end = 0.0
        self.frames = 0
        self.lags: list[float] = []
        self.timed = 0  # batches after the clock started
        self.update_s = 0.0  # timed batches: learner time, and time waiting for the batch
        self.wait_s = 0.0
        self.curve: list[tuple[int, float, float]] = []

    def on_train_start(self, trainer, module):
        self.t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        now = time.perf_counter()
        returns = module.recent_returns
        mean = sum(returns) / len(returns) if returns else float("nan")
        self.curve.append((module.frames, now - self.t0, mean))
        if batch_idx < self.warmup - 1:
            return
        if self.start is None:
            self.start, self.frames_at_start = now, module.frames
            return
        self.end, self.frames = now, module.frames
        self.timed += 1
        metrics = module.last_metrics
        self.update_s += float(metrics.get("time/update", 0.0))
        self.wait_s += float(metrics.get("time/wait_for_batch", 0.0))
        lag = metrics.get("perf/policy_lag")
        if lag is not None:
            self.lags.append(float(lag))
        if self.stop_after is not None and batch_idx >= self.warmup - 1 + self.stop_after:
            trainer.should_stop = True

    @property
    def fps(self) -> float:
        if self.start is None or self.end <= self.start:
            return float("nan")
        return (self.frames - self.frames_at_start) / (self.end - self.start)


def fit(module, *callbacks: Callback) -> None:
    """Fit ``module`` for its one epoch (``total_frames``, unless a callback stops it) on the
    GPU when there is one, with no logger, checkpoints, progress bar or summary."""
    Trainer(
        max_epochs=1,
        accelerator="auto",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
    ).fit(module)


def train(
    run: Run,
    env_id: str,
    env_kwargs: dict | None = None,
    *,
    batches: int | None = None,
    total_frames: int | None = None,
    module_cls: type = PPO,
    **module_kwargs,
) -> Run:
    """Fit ``module_cls`` (PPO by default) with ``run.collector`` and fill in ``run``'s
    measurements.

    ``batches``: stop after that many batches after the first (after the first W for a
    ``MultiAsyncCollector`` with W workers): a throughput run, or the start of a long learning
    run; ``total_frames``: the module's (default: one batch more than the run needs, so that
    the stop comes before the collector's end). ``module_kwargs`` go to the module (a recipe's
    hyperparameters). With CUDA the learner runs on the GPU and so does the policy inference,
    unless ``run.inference`` is ``"workers"`` (HTS inference on CPU, in the env processes).
    """
    frames_per_batch = run.num_envs * run.sync_interval
    warmup = run.num_workers if run.collector == "multi_async" and batches is not None else 1
    if total_frames is None:
        total_frames = frames_per_batch * (warmup + batches + 1)
    fresh_threads()
    gpu_inference = torch.cuda.is_available() and run.inference != "workers"
    module = module_cls(
        env_id=env_id,
        env_kwargs=env_kwargs or {},
        num_envs=run.num_envs,
        num_workers=run.num_workers,
        sync_interval=run.sync_interval,
        total_frames=total_frames,
        seed=run.seed,
        collector=run.collector,
        inference=run.inference,
        inference_device="cuda" if gpu_inference else None,
        **module_kwargs,
    )
    recorder = Recorder(stop_after=batches, warmup=warmup)
    started = time.perf_counter()
    fit(module, recorder)
    run.wall_s = time.perf_counter() - started
    run.fps = recorder.fps
    run.curve = recorder.curve
    run.update_s, run.wait_s = recorder.update_s, recorder.wait_s
    run.timed_batches = recorder.timed
    if recorder.lags:
        run.lag = f"{min(recorder.lags):.0f}-{max(recorder.lags):.0f}"
    run.load = os.getloadavg()
    return run
