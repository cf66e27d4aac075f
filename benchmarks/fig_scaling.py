"""Paper figures: training throughput against the number of envs, and against the sync interval.

End-to-end PPO training frames/s (Lightning Trainer, the same module and learner, only
``collector=`` differs) on one env, swept over one setting:

- ``envs``: the number of env replicas (4, 8, 16, 32), for HTS, the synchronous baseline
  (``sync``: TorchRL ``Collector(ParallelEnv)``, the PPO/A2C setup) and the asynchronous one
  (``multi_async``: ``MultiAsyncCollector``, IMPALA-like, unbounded policy lag). Paper: HTS
  202 -> 1515, PPO 107 -> 271, IMPALA 246 -> 1767 steps/s from 4 to 32 envs (football).
- ``interval``: the sync interval alpha, steps per replica and batch (32 ... 1024), for HTS and
  the synchronous baseline at the same batch sizes.

The env defaults to ``latency-high``: ``VariableLatencyEnv``, log-normal step time with mean
2 ms and std 10 ms (football-like variance); ``pong``, ``breakout`` and ``qbert`` are the
alternatives. Processes: ``min(num_envs, --max-workers)`` (4 by default, 32 with ``--full``:
one replica per process).

    python benchmarks/fig_scaling.py envs [--full] [--output benchmarks/RESULTS.md]
    python benchmarks/fig_scaling.py interval [--full] [--output benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse

from _common import (
    GAMES,
    LABELS,
    PLOTS,
    Run,
    add_common_args,
    announce,
    contenders,
    emit,
    latency_env,
    load_str,
    pyplot,
    ratio_header,
    ratios,
    section,
    train,
)

# what: (default values, --full values, default collectors)
SWEEPS = {
    "envs": ([4, 8, 16, 32], [4, 8, 16, 32], ["hts", "sync", "multi_async"]),
    "interval": ([32, 128, 512, 1024], [32, 64, 128, 256, 512, 1024], ["hts", "sync"]),
}


def env_of(name: str) -> tuple[str, dict]:
    return latency_env(10.0) if name == "latency-high" else (GAMES[name], {})


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sweep", choices=list(SWEEPS))
    parser.add_argument("--values", type=int, nargs="+", help="the swept values")
    parser.add_argument("--env", default="latency-high", choices=["latency-high", *GAMES])
    parser.add_argument("--collectors", nargs="+", choices=list(LABELS))
    parser.add_argument("--num-envs", type=int, help="interval sweep (default 8; 16 --full)")
    parser.add_argument("--sync-interval", type=int, help="envs sweep (default 32; 128 --full)")
    parser.add_argument(
        "--max-workers", type=int, help="processes: min(envs, this); default 4 (32 with --full)"
    )
    parser.add_argument("--batches", type=int, help="timed batches (default 3; 10 --full)")
    add_common_args(parser)
    args = parser.parse_args(argv)
    default, full, collectors = SWEEPS[args.sweep]
    args.values = args.values or (full if args.full else default)
    args.collectors = args.collectors or collectors
    args.num_envs = args.num_envs or (16 if args.full else 8)
    args.sync_interval = args.sync_interval or (128 if args.full else 32)
    args.batches = args.batches or (10 if args.full else 3)
    # Each TorchRL baseline process costs ~10 s of start-up on a loaded 2-core machine.
    args.max_workers = args.max_workers or (32 if args.full else 4)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    runs: list[Run] = []
    for value in args.values:
        num_envs = value if args.sweep == "envs" else args.num_envs
        interval = value if args.sweep == "interval" else args.sync_interval
        workers = min(num_envs, args.max_workers)
        print(f"== {args.sweep} = {value}", flush=True)
        for kind, inference in contenders(args.collectors, args.hts_inference):
            run = Run(args.env, kind, num_envs, workers, interval, inference=inference)
            runs.append(train(run, *env_of(args.env), batches=args.batches))
            announce(run)
    key = (lambda r: r.num_envs) if args.sweep == "envs" else (lambda r: r.sync_interval)
    labels, titles = ratio_header(runs)
    table = [
        f"| envs | processes | sync interval | collector | frames/s | {' | '.join(titles)} "
        "| policy lag | update / wait s | load 1/5/15 min |",
        "| ---: | ---: | ---: | --- | ---: | " + "---: | " * len(titles) + "--- | --- | --- |",
    ]
    for r in runs:
        cells = " | ".join(ratios(runs, r, key, labels))
        table.append(
            f"| {r.num_envs} | {r.num_workers} | {r.sync_interval} | {r.label} | {r.fps:.0f} "
            f"| {cells} | {r.lag} | {r.per_batch} | {load_str(r.load)} |"
        )
    settings = (
        f"PPO (4 epochs x 4 minibatches) on {args.env}; processes min(envs, "
        f"{args.max_workers}); {args.batches} timed batches after the first"
    )
    title = (
        "Throughput vs number of envs" if args.sweep == "envs" else "Throughput vs sync interval"
    )
    plots = [plot(runs, args, key)]
    emit(section(title, settings, table, plots), args.output)


def plot(runs: list[Run], args: argparse.Namespace, key):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for label in dict.fromkeys(r.label for r in runs):
        points = sorted((key(r), r.fps) for r in runs if r.label == label)
        ax.plot(*zip(*points), marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(args.values)
    ax.set_xticklabels([str(v) for v in args.values])
    ax.set_xlabel("number of envs" if args.sweep == "envs" else "sync interval (steps per batch)")
    ax.set_ylabel("training frames/s")
    ax.set_title(f"PPO on {args.env}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = PLOTS / f"{args.plot_name or 'scaling_' + args.sweep}.png"
    fig.savefig(path, dpi=110)
    return path


if __name__ == "__main__":
    main()
