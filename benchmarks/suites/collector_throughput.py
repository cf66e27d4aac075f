"""Collection throughput of HTSCollector next to TorchRL's own collectors (frames/s, no learning).

Every collector gets the same env factory, the same policy (``make_actor_critic``'s actor), the
same number of env replicas, the same number of worker processes and the same batch size
(``num_envs * sync_interval`` frames). Throughput is measured in steady state: the first batch
(process start-up, first resets, first inference; W batches for MultiAsyncCollector) is a warm-up
and is not timed, and the consumer does nothing with the batches. The collectors
run one after the other in the same invocation, so that they share the machine's load of the
moment (the machines are shared and noisy: compare ratios, not absolute numbers across runs).

Contenders, all with W worker processes:

- ``HTSCollector``: W processes step the replicas; one barrier per batch, and batch k+1 is
  collected while batch k is consumed. Inference runs in the workers on a CPU-only machine and in
  the main process (batched over whichever replicas are ready) with a GPU: its ``inference="auto"``.
- ``Collector(ParallelEnv)``: the classic A2C/PPO vectorized setup, synchronous at every step.
- ``MultiSyncCollector``: W sub-collectors, each with its own policy copy and envs, synchronized at
  every batch; every yielded batch holds frames from all of them.
- ``MultiAsyncCollector``: the same sub-collectors, unsynchronized; every yielded batch comes from
  one of them (so its trajectories are W times longer, with the same frame count).
- env alone: the env with random actions and no policy, "the limit". For Pong also ale-py's native
  C++ vector env (``AtariVectorEnv`` with W threads), which skips the Python/gymnasium/TorchRL
  stack altogether and shows what the emulator itself can do.

Run ``python -m benchmarks collector_throughput --help``; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import torch

from benchmarks.common import collection, report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--envs",
        nargs="+",
        choices=list(collection.env_cases()),
        default=list(collection.env_cases()),
        metavar="ENV",
    )
    parser.add_argument("--num-envs", type=int, help="replicas (default 16; 32 with --full)")
    parser.add_argument("--num-workers", type=int, help="processes (default 2; 8 with --full)")
    parser.add_argument("--sync-interval", type=int, help="steps per replica per batch")
    parser.add_argument(
        "--batches",
        type=int,
        help="measured batches, rounded up to a multiple of W (default 4; 12 with --full)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="rounds; the median is reported")
    parser.add_argument("--inference-batch-size", type=int, help="HTSCollector's; its default")
    parser.add_argument("--full", action="store_true", help="bigger sizes, for a real machine")
    parser.add_argument("--output", type=Path, help="append a dated section to this file")
    return parser.parse_args(argv)


def resolve_sizes(args: argparse.Namespace, case: collection.EnvCase) -> collection.Sizes:
    cores = os.cpu_count() or 1
    num_workers = args.num_workers or (min(8, cores) if args.full else 2)
    num_envs = args.num_envs or (max(32, 4 * num_workers) if args.full else 16)
    if num_envs % num_workers:
        raise SystemExit(f"--num-envs ({num_envs}) must be a multiple of --num-workers.")
    batches = args.batches or (12 if args.full else 4)
    # A multiple of W, so that MultiAsyncCollector's timed window holds whole rounds of its
    # workers' batches.
    batches = math.ceil(batches / num_workers) * num_workers
    return collection.Sizes(
        num_envs=num_envs,
        num_workers=num_workers,
        sync_interval=args.sync_interval or case.sync_interval,
        batches=batches,
        device="cuda" if torch.cuda.is_available() else "cpu",
        inference_batch_size=args.inference_batch_size,
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cases = collection.env_cases()
    sizes_by_env = {name: resolve_sizes(args, cases[name]) for name in args.envs}
    results = {}
    started = time.perf_counter()
    for name, sizes in sizes_by_env.items():
        print(f"== {name}: {sizes}", flush=True)
        results[name] = collection.bench_env(cases[name], sizes, args.repeats)
    text = report.collection_section(results, sizes_by_env, args.repeats)
    print(f"(total {time.perf_counter() - started:.0f} s)")
    report.emit(text, args.output, record="collector_throughput_" + "_".join(args.envs))


if __name__ == "__main__":  # workers are spawned or forkserver'd: they re-import this module
    main()
