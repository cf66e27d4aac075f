"""Shared helpers of the training benchmarks (``fig_*.py``, ``training_throughput.py``).

One function does the work of every figure: :func:`train` fits a module (``hts_lightning.PPO``
by default) through Lightning's Trainer with one collector kind (``hts``, or a TorchRL baseline:
``sync`` = ``Collector(ParallelEnv)``, ``multi_sync``, ``multi_async``) for a number of batches,
and returns its steady-state frames/s, its per-update learning curve and the load average of the
moment. Only the module's ``collector=`` argument differs between contenders: same env, model,
learner, number of replicas and processes. The rest is the command line (:func:`parse_figure_args`:
the options every figure has and its sizes, default or ``--full``) and reporting (machine line,
markdown tables, plots, :func:`publish`).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from lightning import Callback, Trainer

from hts_lightning import PPO

LABELS = {
    "hts": "HTS",
    "sync": "Collector(ParallelEnv)",
    "multi_sync": "MultiSyncCollector",
    "multi_async": "MultiAsyncCollector",
}
PLOTS = Path(__file__).parent / "plots"
GAMES = {"pong": "ALE/Pong-v5", "breakout": "ALE/Breakout-v5", "qbert": "ALE/Qbert-v5"}
FOOTBALL = "academy_3_vs_1_with_keeper"


def main_threads(num_workers: int) -> int:
    """The learner process's torch threads, the same for every contender: what TorchRL's
    ``ParallelEnv`` and multi-process collectors set for themselves (one core per worker left
    free), as ``collector_throughput.py`` pins it. The HTSCollector leaves the count alone, and
    on 2 cores a learner with 2 intra-op threads next to busy workers ran its PPO update about
    10x slower (RESULTS.md, 2026-11-30): without the pin the comparison would measure that."""
    return max(1, (os.cpu_count() or 1) - num_workers)


def latency_env(std_ms: float, mean_ms: float = 2.0) -> tuple[str, dict]:
    """``VariableLatencyEnv`` with a log-normal step time (milliseconds in, seconds out)."""
    return "VariableLatency", {
        "distribution": "lognormal",
        "mean": mean_ms / 1000,
        "std": std_ms / 1000,
    }


def require_football() -> None:
    """Stop with the install command when the ``football`` extra is missing."""
    from hts_lightning.envs._registry import MissingDependencyError, check_football_installed

    try:
        check_football_installed()
    except MissingDependencyError as error:
        raise SystemExit(str(error)) from None


@dataclass
class Run:
    """One training run: its settings, steady-state throughput and per-update curve."""

    env: str
    collector: str
    num_envs: int
    num_workers: int
    sync_interval: int
    seed: int = 0
    #: the HTSCollector's ``inference`` ("auto": in the workers on a CPU-only machine)
    inference: str = "auto"
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


def hts_inference_default() -> list[str]:
    """Both HTS inference modes on a CPU-only machine ("auto" is "workers" there); on a GPU
    "auto" is "main"."""
    return ["auto"] if torch.cuda.is_available() else ["auto", "main"]


def ratio_header(runs: list[Run]) -> tuple[list[str], list[str]]:
    """Column titles "<HTS variant> / this", one per HTS variant in ``runs``."""
    labels = list(dict.fromkeys(r.label for r in runs if r.collector == "hts"))
    return labels, [f"{label} / this" for label in labels]


def ratios(runs: list[Run], run: Run, key, labels: list[str]) -> list[str]:
    """``run``'s ratio cells: each HTS variant's frames/s at the same ``key`` over its own."""
    cells = []
    for label in labels:
        same = [r.fps for r in runs if r.label == label and key(r) == key(run)]
        cells.append(f"{same[0] / run.fps:.2f}x" if same else "-")
    return cells


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
        metrics = trainer.callback_metrics
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
    torch.set_num_threads(main_threads(run.num_workers))
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


def announce(run: Run) -> None:
    print(
        f"  {run.env} {run.label:26s} envs={run.num_envs} workers={run.num_workers} "
        f"alpha={run.sync_interval}: {run.fps:7.0f} frames/s, lag {run.lag}, "
        f"update / wait per batch {run.per_batch} s, load {run.load[0]:.2f}, {run.wall_s:.0f} s",
        flush=True,
    )


def load_str(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.1f}" for x in load)


def machine_line() -> str:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    import lightning
    import torchrl

    return (
        f"{os.cpu_count()} CPU cores ({platform.machine()}), {gpu}; python "
        f"{platform.python_version()}, torch {torch.__version__}, torchrl {torchrl.__version__}, "
        f"lightning {lightning.__version__}"
    )


def command_line() -> str:
    return shlex.join(["python", os.path.relpath(sys.argv[0]), *sys.argv[1:]])


def section(title: str, settings: str, table: list[str], plots: list[Path]) -> str:
    """A dated RESULTS.md section: machine, command, settings, table, plot links."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### {title}, {stamp}",
        "",
        f"- machine: {machine_line()}",
        f"- command: `{command_line()}`",
        f"- settings: {settings}",
        "- load: the 1/5/15-minute load average right after each run (2 cores: above 2 means "
        "other work was competing); update / wait: seconds per timed batch in the learner's "
        "update (with the weight hand-over) and waiting for the next batch",
        "",
        *table,
        "",
    ]
    lines += [f"![{p.stem}](plots/{p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def throughput_table(
    runs: list[Run], key: Callable[[Run], Any], columns: dict[str, Callable[[Run], Any]]
) -> list[str]:
    """A throughput figure's table, a row per run: ``columns`` (title: the run's cell), then
    frames/s, "<HTS variant> / this" per HTS variant (against the HTS run with the same
    ``key``), the policy lag, update / wait seconds per batch and the load average."""
    labels, titles = ratio_header(runs)
    header = [*columns, "frames/s", *titles, "policy lag", "update / wait s", "load 1/5/15 min"]
    rows = [
        [
            *(cell(r) for cell in columns.values()),
            f"{r.fps:.0f}",
            *ratios(runs, r, key, labels),
            r.lag,
            r.per_batch,
            load_str(r.load),
        ]
        for r in runs
    ]
    numbers = [t for t, cell in columns.items() if isinstance(cell(runs[0]), (int, float))]
    return markdown_table(header, rows, right=(*numbers, "frames/s", *titles))


def markdown_table(
    header: list[str], rows: list[list[Any]], right: tuple[str, ...] = ()
) -> list[str]:
    """A markdown table's lines; the columns named in ``right`` are right-aligned (numbers)."""
    rules = ["---:" if title in right else "---" for title in header]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(rules) + " |",
        *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows),
    ]


def save_plot(fig, args: argparse.Namespace, stem: str) -> Path:
    """Save ``fig`` as ``plots/<--plot-name or stem>.png``; returns its path."""
    fig.tight_layout()
    path = PLOTS / f"{args.plot_name or stem}.png"
    fig.savefig(path, dpi=110)
    return path


def publish(
    title: str, settings: str, table: list[str], plots: list[Path], args: argparse.Namespace
) -> None:
    """Print the dated section and append it to ``--output`` if given."""
    emit(section(title, settings, table, plots), args.output)


def emit(text: str, output: Path | None) -> None:
    print("\n" + text)
    if output is not None:
        with output.open("a") as handle:
            handle.write("\n" + text)
        print(f"appended to {output}")


def pyplot():
    """matplotlib's pyplot on the Agg backend, and the plots folder created."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    PLOTS.mkdir(exist_ok=True)
    return plt


@dataclass(frozen=True)
class Size:
    """A size option of a figure script: its value by default and with ``--full`` (either may
    be a function of the parsed arguments, for sizes that depend on other options), and what
    it is. The help reads "<what> (default D; F with --full)" unless ``help`` replaces it."""

    default: Any
    full: Any
    what: str = ""
    help: str | None = None

    def help_text(self, name: str) -> str:
        if self.help is not None:
            return self.help
        what = self.what or SIZES.get(name, name)
        return f"{what} (default {self.default}; {self.full} with --full)"


SIZES = {
    "num_envs": "env replicas",
    "num_workers": "worker processes",
    "sync_interval": "steps per replica and batch",
    "batches": "timed batches after the first",
}


def parse_figure_args(
    parser: argparse.ArgumentParser, argv=None, defaults: dict | None = None, **sizes: Size
) -> argparse.Namespace:
    """Add the options every figure script has (:func:`add_common_args`) and one integer option
    per size (``num_envs`` is ``--num-envs``), parse ``argv``, and fill in each size the command
    line left out, in the order given: its ``full`` value with ``--full``, else its default.
    ``defaults`` replace the defaults of options (the common ones included)."""
    for name, size in sizes.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, help=size.help_text(name))
    add_common_args(parser)
    parser.set_defaults(**(defaults or {}))
    args = parser.parse_args(argv)
    for name, size in sizes.items():
        if getattr(args, name) is None:
            value = size.full if args.full else size.default
            setattr(args, name, value(args) if callable(value) else value)
    return args


def figure_parser(doc: str) -> argparse.ArgumentParser:
    """A parser described by the first line of a script's docstring."""
    return argparse.ArgumentParser(description=doc.split("\n")[0])


def add_common_args(parser) -> None:
    parser.add_argument("--full", action="store_true", help="the full size (a real machine)")
    parser.add_argument("--output", type=Path, help="append a dated section to this file")
    parser.add_argument(
        "--hts-inference",
        nargs="+",
        choices=("auto", "workers", "main"),
        default=hts_inference_default(),
        help="HTS runs, one per mode (default: auto and main on CPU, auto on GPU)",
    )
    parser.add_argument(
        "--plot-name", help="file name stem of the plot in benchmarks/plots (default: per script)"
    )
