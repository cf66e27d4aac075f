"""End-to-end training throughput: the same module and learner fed by each collector.

Every run trains one algorithm's module (``--algorithms``: ``ppo`` by default, ``a2c``,
``acktr``) through Lightning's Trainer for a few batches; only the module's ``collector``
argument changes: ``hts`` (HTSCollector: collection of batch k+1 overlaps
the update on batch k, lag exactly one), ``sync`` (TorchRL ``Collector`` over a ``ParallelEnv``:
synchronous at every step, the classic A2C/PPO setup the paper compares against),
``multi_sync`` (``MultiSyncCollector``) and ``multi_async`` (``MultiAsyncCollector``). Same
env, model, learner, number of replicas and processes. Throughput is frames per second of wall
time from the end of the first update (start-up excluded) to the end of the last; the runs are
side by side in one invocation, so compare ratios, not absolute numbers across runs.
Each row also gives the learner's mean time per update over the timed batches (the module's
``time/update``: advantages, loss, backward, optimizer step; for ACKTR also the Fisher pass and
K-FAC's eigendecompositions, refreshed every 10 updates, so time at least 10 batches).

    python benchmarks/training_throughput.py [--envs pong latency-low latency-high]
        [--algorithms ppo a2c acktr] [--batches 6] [--output benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import torch
from lightning import Callback, Trainer

from hts_lightning import A2C, ACKTR, PPO

COLLECTORS = ("hts", "sync", "multi_sync", "multi_async")
LABELS = {
    "hts": "HTSCollector",
    "sync": "Collector(ParallelEnv)",
    "multi_sync": "MultiSyncCollector",
    "multi_async": "MultiAsyncCollector",
}
ALGORITHMS = {"ppo": PPO, "a2c": A2C, "acktr": ACKTR}
# (env_id, env_kwargs, sync_interval, PPO's epochs, PPO's minibatches)
ENVS = {
    "pong": ("ALE/Pong-v5", {}, 128, 4, 4),
    "latency-low": (
        "VariableLatency",
        {"distribution": "lognormal", "mean": 0.002, "std": 0.0005},
        32,
        4,
        4,
    ),
    "latency-high": (
        "VariableLatency",
        {"distribution": "lognormal", "mean": 0.002, "std": 0.01},
        32,
        4,
        4,
    ),
}


class _Clock(Callback):
    """Wall time and frames from the end of the first update to the end of the last.

    The clock stops the Trainer after ``batches`` timed batches, one batch before the end of
    ``total_frames``: TorchRL's ``Collector`` tears its ``ParallelEnv`` down before yielding its
    last batch, which would bill the teardown to that batch.
    """

    def __init__(self, batches: int):
        self.batches = batches
        self.start = None
        self.frames_at_start = 0
        self.end = None
        self.frames = 0
        self.lags: list[float] = []
        self.update_times: list[float] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        now = time.perf_counter()
        if self.start is None:
            self.start, self.frames_at_start = now, module.frames
            return
        self.end, self.frames = now, module.frames
        lag = trainer.callback_metrics.get("perf/policy_lag")
        if lag is not None:
            self.lags.append(float(lag))
        self.update_times.append(float(trainer.callback_metrics["time/update"]))
        if batch_idx >= self.batches:
            trainer.should_stop = True

    @property
    def fps(self) -> float:
        return (self.frames - self.frames_at_start) / max(self.end - self.start, 1e-9)

    @property
    def update_time(self) -> float:
        return sum(self.update_times) / max(len(self.update_times), 1)


def run(
    env: str, algorithm: str, collector: str, args: argparse.Namespace
) -> tuple[float, float, str]:
    env_id, env_kwargs, sync_interval, epochs, minibatches = ENVS[env]
    sync_interval = args.sync_interval or sync_interval
    frames_per_batch = args.num_envs * sync_interval
    extra = {"epochs": epochs, "minibatches": minibatches} if algorithm == "ppo" else {}
    module = ALGORITHMS[algorithm](
        env_id=env_id,
        env_kwargs=env_kwargs,
        num_envs=args.num_envs,
        num_workers=args.num_workers,
        sync_interval=sync_interval,
        total_frames=frames_per_batch * (args.batches + 2),
        collector=collector,
        **extra,
        inference_device="cuda"
        if torch.cuda.is_available() and args.inference != "workers"
        else None,
        inference=args.inference,
    )
    clock = _Clock(args.batches)
    Trainer(
        max_epochs=1,
        accelerator="auto",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[clock],
    ).fit(module)
    lag = f"{min(clock.lags):.0f}-{max(clock.lags):.0f}" if clock.lags else "not recorded"
    return clock.fps, clock.update_time, lag


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--collectors", nargs="+", default=list(COLLECTORS), choices=COLLECTORS)
    parser.add_argument(
        "--algorithms",
        nargs="+",
        default=["ppo"],
        choices=list(ALGORITHMS),
        help="modules to train (default ppo); each is run with every collector",
    )
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--sync-interval", type=int, help="default: per env (128 Pong, 32 latency)")
    parser.add_argument("--batches", type=int, default=5, help="timed batches after the first")
    parser.add_argument(
        "--inference",
        default="auto",
        choices=("auto", "workers", "main"),
        help="HTSCollector's: policy in the workers (CPU) or in the main process (GPU)",
    )
    parser.add_argument("--output", type=Path, help="append a dated section to this file")
    args = parser.parse_args(argv)
    rows = []  # (env, algorithm, collector, frames/s, s/update, lag)
    for env in args.envs:
        for algorithm in args.algorithms:
            for collector in args.collectors:
                print(f"{env}: {algorithm} with {LABELS[collector]} ...", flush=True)
                fps, update_time, lag = run(env, algorithm, collector, args)
                rows.append((env, algorithm, collector, fps, update_time, lag))
                print(
                    f"  {fps:.0f} frames/s, {update_time:.3f} s/update, policy lag {lag}",
                    flush=True,
                )
    hts = {(env, alg): fps for env, alg, collector, fps, *_ in rows if collector == "hts"}
    table = [
        "| env | algorithm | collector | frames/s | HTS / this | s/update (learner) | policy lag |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for env, algorithm, collector, fps, update_time, lag in rows:
        ratio = f"{hts[env, algorithm] / fps:.2f}x" if (env, algorithm) in hts else "-"
        table.append(
            f"| {env} | {algorithm} | {LABELS[collector]} | {fps:.0f} | {ratio} "
            f"| {update_time:.3f} | {lag} |"
        )
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    section = "\n".join(
        [
            f"### Training throughput, {datetime.date.today().isoformat()}",
            "",
            f"Machine: {os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}),"
            f" GPU: {gpu}; torch {torch.__version__}.",
            f"Command: `python {shlex.join(['benchmarks/training_throughput.py', *sys.argv[1:]])}`",
            f"{', '.join(a.upper() for a in args.algorithms)}, {args.num_envs} envs, "
            f"{args.num_workers} worker processes, "
            f"{args.batches} timed batches after the first, HTS inference: {args.inference}.",
            "",
            *table,
            "",
        ]
    )
    print(section)
    if args.output:
        with args.output.open("a") as handle:
            handle.write("\n" + section)


if __name__ == "__main__":
    main()
