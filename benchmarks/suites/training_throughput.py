"""End-to-end training throughput: the same module and learner fed by each collector.

Every run trains one algorithm's module (``--algorithms``: ``ppo`` by default, ``a2c``,
``acktr``) through Lightning's Trainer for a few batches; only the module's ``collector``
argument changes: ``hts`` (HTSCollector: collection of batch k+1 overlaps
the update on batch k, lag exactly one), ``sync`` (TorchRL ``Collector`` over a ``ParallelEnv``:
synchronous at every step, the classic A2C/PPO setup the paper compares against),
``multi_sync`` (``MultiSyncCollector``) and ``multi_async`` (``MultiAsyncCollector``). Same
env, model, learner, number of replicas and processes. Throughput is frames per second of wall
time from the end of the first update (start-up excluded; from the end of update W for
``MultiAsyncCollector``, whose W workers deliver their first batches together) to the end of the
last, timed by ``runner.train`` as the paper figures are, with the learner's torch threads
each collector's own, as in a user's program (``runner.fresh_threads``); the runs are side by
side in one invocation, so compare ratios, not absolute numbers across runs.
Each row also gives the learner's mean time per update over the timed batches (the module's
``time/update``: advantages, loss, backward, optimizer step; for ACKTR also the Fisher pass and
K-FAC's eigendecompositions, refreshed every 10 updates, so time at least 10 batches).

    python -m benchmarks training_throughput [--envs pong latency-low latency-high]
        [--algorithms ppo a2c acktr] [--batches 6] [--output benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import get_args

from benchmarks.common import report, runner
from hts_lightning import A2C, ACKTR, PPO
from hts_lightning.choices import CollectorKind, InferenceMode

COLLECTORS = get_args(CollectorKind)
LABELS = {**runner.LABELS, "hts": "HTSCollector"}
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


def run(env: str, algorithm: str, collector: str, args: argparse.Namespace) -> runner.Run:
    """One timed training run with ``runner.train`` (its clock: from the end of the first
    update, or of update W for a ``MultiAsyncCollector`` with W workers, to the end of the
    last; the learner's threads each collector's own)."""
    env_id, env_kwargs, sync_interval, epochs, minibatches = ENVS[env]
    extra = {"epochs": epochs, "minibatches": minibatches} if algorithm == "ppo" else {}
    measured = runner.Run(
        env,
        collector,
        args.num_envs,
        args.num_workers,
        args.sync_interval or sync_interval,
        inference=args.inference,
    )
    return runner.train(
        measured,
        env_id,
        env_kwargs,
        batches=args.batches,
        module_cls=ALGORITHMS[algorithm],
        **extra,
    )


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
        choices=get_args(InferenceMode),
        help="HTSCollector's: policy in the workers (CPU) or in the main process (GPU)",
    )
    parser.add_argument("--output", type=Path, help="append a dated section to this file")
    args = parser.parse_args(argv)
    rows = []  # (algorithm, run)
    for env in args.envs:
        for algorithm in args.algorithms:
            for collector in args.collectors:
                print(f"{env}: {algorithm} with {LABELS[collector]} ...", flush=True)
                measured = run(env, algorithm, collector, args)
                rows.append((algorithm, measured))
                print(
                    f"  {measured.fps:.0f} frames/s, {measured.update_per_batch:.3f} s/update, "
                    f"policy lag {measured.lag}, load {report.load_str(measured.load)}",
                    flush=True,
                )
    hts = {(r.env, alg): r.fps for alg, r in rows if r.collector == "hts"}
    cells = []
    for algorithm, r in rows:
        ratio = f"{hts[r.env, algorithm] / r.fps:.2f}x" if (r.env, algorithm) in hts else "-"
        cells.append([r.env, algorithm, LABELS[r.collector], f"{r.fps:.0f}", ratio])
        cells[-1] += [f"{r.update_per_batch:.3f}", r.lag, report.load_str(r.load)]
    numbers = ("frames/s", "HTS / this", "s/update (learner)")
    header = ["env", "algorithm", "collector", *numbers, "policy lag", "load 1/5/15 min"]
    settings = (
        f"{', '.join(a.upper() for a in args.algorithms)}, {args.num_envs} envs, "
        f"{args.num_workers} worker processes, {args.batches} timed batches after the first "
        f"(after the first {args.num_workers} for MultiAsyncCollector), HTS inference: "
        f"{args.inference}; learner threads: each collector's own"
    )
    table = report.markdown_table(header, cells, right=numbers)
    report.publish("Training throughput", settings, table, [], args)


if __name__ == "__main__":
    main()
