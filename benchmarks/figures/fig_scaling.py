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

    python -m benchmarks fig_scaling envs [--full] [--output benchmarks/RESULTS.md]
    python -m benchmarks fig_scaling interval [--full] [--output benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse

from benchmarks.common import figure_args, report, runner

# what: (default values, --full values, default collectors)
SWEEPS = {
    "envs": ([4, 8, 16, 32], [4, 8, 16, 32], ["hts", "sync", "multi_async"]),
    "interval": ([32, 128, 512, 1024], [32, 64, 128, 256, 512, 1024], ["hts", "sync"]),
}


def env_of(name: str) -> tuple[str, dict]:
    return runner.latency_env(10.0) if name == "latency-high" else (runner.GAMES[name], {})


def parse_args(argv=None) -> argparse.Namespace:
    parser = figure_args.figure_parser(__doc__)
    parser.add_argument("sweep", choices=list(SWEEPS))
    parser.add_argument("--values", type=int, nargs="+", help="the swept values")
    parser.add_argument("--env", default="latency-high", choices=["latency-high", *runner.GAMES])
    parser.add_argument("--collectors", nargs="+", choices=list(runner.LABELS))
    args = figure_args.parse_figure_args(
        parser,
        argv,
        num_envs=figure_args.Size(8, 16, "env replicas of the interval sweep"),
        sync_interval=figure_args.Size(32, 128, "sync interval of the envs sweep"),
        # Each TorchRL baseline process costs ~10 s of start-up on a loaded 2-core machine.
        max_workers=figure_args.Size(4, 32, "processes: min(envs, this)"),
        batches=figure_args.Size(3, 10),
    )
    default, full, collectors = SWEEPS[args.sweep]
    args.values = args.values or (full if args.full else default)
    args.collectors = args.collectors or collectors
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    runs: list[runner.Run] = []
    for value in args.values:
        num_envs = value if args.sweep == "envs" else args.num_envs
        interval = value if args.sweep == "interval" else args.sync_interval
        workers = min(num_envs, args.max_workers)
        print(f"== {args.sweep} = {value}", flush=True)
        for kind, inference in runner.contenders(args.collectors, args.hts_inference):
            run = runner.Run(args.env, kind, num_envs, workers, interval, inference=inference)
            runs.append(runner.train(run, *env_of(args.env), batches=args.batches))
            report.announce(run)
    key = (lambda r: r.num_envs) if args.sweep == "envs" else (lambda r: r.sync_interval)
    columns = {
        "envs": lambda r: r.num_envs,
        "processes": lambda r: r.num_workers,
        "sync interval": lambda r: r.sync_interval,
        "collector": lambda r: r.label,
    }
    table = report.throughput_table(runs, key, columns)
    settings = (
        f"PPO (4 epochs x 4 minibatches) on {args.env}; processes min(envs, "
        f"{args.max_workers}); {args.batches} timed batches after the first"
    )
    title = (
        "Throughput vs number of envs" if args.sweep == "envs" else "Throughput vs sync interval"
    )
    report.publish(title, settings, table, [plot(runs, args, key)], args)


def plot(runs: list[runner.Run], args: argparse.Namespace, key):
    plt = report.pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for label in dict.fromkeys(r.label for r in runs):
        points = sorted((key(r), r.fps) for r in runs if r.label == label)
        ax.plot(*zip(*points, strict=True), marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(args.values)
    ax.set_xticklabels([str(v) for v in args.values])
    ax.set_xlabel("number of envs" if args.sweep == "envs" else "sync interval (steps per batch)")
    ax.set_ylabel("training frames/s")
    ax.set_title(f"PPO on {args.env}")
    ax.legend(fontsize=8)
    return report.save_plot(fig, args, f"scaling_{args.sweep}")


if __name__ == "__main__":
    main()
