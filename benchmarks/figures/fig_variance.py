"""Paper figure: HTS's speedup over the baselines against the variance of env step time.

End-to-end PPO training frames/s (Lightning Trainer, the same module and learner, only
``collector=`` differs) of HTS and of TorchRL's ``Collector(ParallelEnv)`` ("sync"),
``MultiSyncCollector`` and ``MultiAsyncCollector``, in two panels:

- ``latency``: ``VariableLatencyEnv`` over a sweep of the step time's standard deviation
  (log-normal, mean 2 ms), one replica per process by default (the paper's regime: the variance
  does not average out inside a worker);
- ``atari``: Pong, Breakout and Qbert at a small size, and ``football`` (Google Research
  Football, academy_3_vs_1_with_keeper with ``make_football_env``'s defaults; needs the
  ``football`` extra, and stops with its install command when it is missing).

Paper (Liu et al. 2020): 1.5-1.8x over PPO on Atari, 4.9-5.6x on football.

    python -m benchmarks fig_variance latency [--full] [--output benchmarks/RESULTS.md]
    python -m benchmarks fig_variance atari [--games pong breakout qbert football] [--full]
"""

from __future__ import annotations

import argparse
import os
from typing import get_args

from benchmarks.common import figure_args, report, runner
from hts_lightning.choices import CollectorKind

COLLECTORS = get_args(CollectorKind)


def parse_args(argv=None) -> argparse.Namespace:
    parser = figure_args.figure_parser(__doc__)
    parser.add_argument("panel", choices=("latency", "atari"))
    parser.add_argument("--stds", type=float, nargs="+", help="latency: step-time std in ms")
    parser.add_argument("--mean-ms", type=float, default=2.0, help="latency: mean step time, ms")
    parser.add_argument(
        "--games",
        nargs="+",
        choices=[*runner.GAMES, "football"],
        help="default: pong breakout qbert",
    )
    parser.add_argument("--collectors", nargs="+", choices=COLLECTORS, default=list(COLLECTORS))

    def latency(args):
        return args.panel == "latency"

    # latency: one replica per process, 4 by default (each TorchRL baseline process costs
    # ~10 s of start-up on 2 loaded cores)
    args = figure_args.parse_figure_args(
        parser,
        argv,
        num_envs=figure_args.Size(
            lambda a: 4 if latency(a) else 8, 16, help="default 4 (latency) / 8; --full 16"
        ),
        num_workers=figure_args.Size(
            lambda a: a.num_envs if latency(a) else 2,
            lambda a: a.num_envs if latency(a) else min(8, os.cpu_count() or 1),
            help="default: num-envs (latency), 2 (atari; --full min(8, cores))",
        ),
        sync_interval=figure_args.Size(32, 128),
        batches=figure_args.Size(
            lambda a: 4 if latency(a) else 2, 10, help="timed batches (default 4 / 2; 10 --full)"
        ),
    )
    args.stds = args.stds or ([0, 0.5, 2, 5, 10, 20] if args.full else [0, 2, 10, 20])
    args.games = args.games or list(runner.GAMES)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.panel == "atari" and "football" in args.games:
        runner.require_football()  # before anything runs
    cases = (
        [(f"std {std:g} ms", runner.latency_env(std, args.mean_ms)) for std in args.stds]
        if args.panel == "latency"
        else [
            (game, (runner.GAMES.get(game, f"GFootball/{runner.FOOTBALL}"), {}))
            for game in args.games
        ]
    )
    runs: list[runner.Run] = []
    for name, (env_id, env_kwargs) in cases:
        print(f"== {name}", flush=True)
        for kind, inference in runner.contenders(args.collectors, args.hts_inference):
            run = runner.Run(name, kind, args.num_envs, args.num_workers, args.sync_interval)
            run.inference = inference
            runs.append(runner.train(run, env_id, env_kwargs, batches=args.batches))
            report.announce(run)
    columns = {"env": lambda r: r.env, "collector": lambda r: r.label}
    table = report.throughput_table(runs, lambda r: r.env, columns)
    what = (
        f"log-normal step time, mean {args.mean_ms:g} ms"
        if args.panel == "latency"
        else "Atari (make_atari_env preprocessing) / football (stacked SMM), Nature CNN"
    )
    settings = (
        f"PPO (4 epochs x 4 minibatches); {what}; {args.num_envs} envs in {args.num_workers} "
        f"processes, {args.sync_interval} steps per replica and batch, {args.batches} timed "
        "batches after the first"
    )
    title = f"Speedup vs step-time variance ({args.panel})"
    report.publish(title, settings, table, [plot(runs, args)], args)


def plot(runs: list[runner.Run], args: argparse.Namespace):
    plt = report.pyplot()
    labels, _ = report.ratio_header(runs)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    baselines = [runner.LABELS[k] for k in args.collectors if k != "hts"]
    pairs = [(h, b) for h in labels for b in baselines]
    fps = {(r.env, r.label): r.fps for r in runs}
    envs = list(dict.fromkeys(r.env for r in runs))
    if args.panel == "latency":
        for h, b in pairs:
            ax.plot(
                args.stds, [fps[e, h] / fps[e, b] for e in envs], marker="o", label=f"{h} / {b}"
            )
        ax.axhspan(4.9, 5.6, color="tab:green", alpha=0.15, label="paper: football vs PPO")
        ax.set_xlabel(f"std of env step time (ms); log-normal, mean {args.mean_ms:g} ms")
        ax.set_title(f"VariableLatencyEnv, {args.num_envs} envs / {args.num_workers} processes")
    else:
        width = 0.8 / max(len(pairs), 1)
        for i, (h, b) in enumerate(pairs):
            xs = [j + i * width for j in range(len(envs))]
            ax.bar(xs, [fps[e, h] / fps[e, b] for e in envs], width, label=f"{h} / {b}")
        ax.set_xticks([j + width * (len(pairs) - 1) / 2 for j in range(len(envs))])
        ax.set_xticklabels(envs)
        ax.axhspan(1.5, 1.8, color="tab:green", alpha=0.15, label="paper: Atari vs PPO")
        if "football" in envs:
            ax.axhspan(4.9, 5.6, color="tab:olive", alpha=0.15, label="paper: football vs PPO")
        ax.set_title(f"{' / '.join(envs)}, {args.num_envs} envs / {args.num_workers} processes")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_ylabel("training frames/s ratio")
    ax.legend(fontsize=7)
    return report.save_plot(fig, args, f"variance_{args.panel}")


if __name__ == "__main__":
    main()
