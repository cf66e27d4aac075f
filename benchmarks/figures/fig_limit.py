"""Paper figure: the limit. The env alone on the same cores, and HTS's fraction of it.

For each env, on the same replicas and processes: the env stepped with random actions and no
policy (``collector_throughput``'s "env alone", and for Atari ale-py's C++
``AtariVectorEnv``), the HTSCollector collecting with no learning (``collector_throughput``'s
measurement), and end-to-end PPO training with HTS and with the synchronous baseline
(``Collector(ParallelEnv)``). The fractions say how much of the machine's env throughput each
reaches. The measurements themselves are ``common/collection.py``'s functions, called here.

    python -m benchmarks fig_limit [--full] [--output benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import os

import torch

from benchmarks.common import collection, figure_args, report, runner

ENVS = ("pong", "latency-high")


def parse_args(argv=None) -> argparse.Namespace:
    parser = figure_args.figure_parser(__doc__)
    parser.add_argument("--envs", nargs="+", choices=ENVS, default=list(ENVS))
    workers = (
        "processes (default 2 for pong, num-envs for latency; --full min(8, cores) / num-envs)"
    )
    return figure_args.parse_figure_args(
        parser,
        argv,
        num_envs=figure_args.Size(8, 16),
        num_workers=figure_args.Size(None, None, help=workers),  # per env: workers_for
        sync_interval=figure_args.Size(32, 128),
        batches=figure_args.Size(4, 12),
    )


def workers_for(env: str, args: argparse.Namespace) -> int:
    if args.num_workers:
        return args.num_workers
    if env == "pong":  # CPU-bound: more processes than cores only adds switching
        return min(8, os.cpu_count() or 1) if args.full else 2
    return args.num_envs  # sleeps: one replica per process, the paper's regime


def main(argv=None) -> None:
    args = parse_args(argv)
    cases = collection.env_cases()
    rows = []  # (env, contender, frames/s, load)
    for env in args.envs:
        workers = workers_for(env, args)
        sizes = collection.Sizes(
            num_envs=args.num_envs,
            num_workers=workers,
            sync_interval=args.sync_interval,
            batches=-(-args.batches // workers) * workers,
            device="cuda" if torch.cuda.is_available() else "cpu",
            inference_batch_size=None,
        )
        case = cases[env]
        print(f"== {env}: {sizes}", flush=True)
        measured = [collection.run_env_alone(case, sizes)]
        if case.ale_game:
            measured.append(collection.run_ale_native(case.ale_game, sizes))
        measured.append(
            collection.run_collector(collection.HTS, case, collection.make_policy(case), sizes)
        )
        for m in measured:
            rows.append((env, m.collector, m.fps, os.getloadavg()))
            print(f"  {m.collector}: {m.fps:.0f} frames/s", flush=True)
        env_id, env_kwargs = (
            (runner.GAMES[env], {}) if env in runner.GAMES else runner.latency_env(10.0)
        )
        for kind, inference in runner.contenders(["hts", "sync"], args.hts_inference):
            run = runner.Run(
                env, kind, args.num_envs, workers, args.sync_interval, inference=inference
            )
            name = f"PPO training, {run.label}"
            run = runner.train(
                run,
                env_id,
                env_kwargs,
                batches=args.batches,
            )
            report.announce(run)
            rows.append((env, name, run.fps, run.load))
    limit = {env: fps for env, name, fps, _ in rows if name == collection.ENV_ALONE}
    table = report.markdown_table(
        ["env", "contender", "frames/s", "this / env alone", "load 1/5/15 min"],
        [
            [env, name, f"{fps:.0f}", f"{fps / limit[env]:.2f}", report.load_str(load)]
            for env, name, fps, load in rows
        ],
        right=("frames/s", "this / env alone"),
    )
    settings = (
        f"{args.num_envs} envs; processes: "
        + ", ".join(f"{env} {workers_for(env, args)}" for env in args.envs)
        + f"; sync interval {args.sync_interval}; {args.batches} timed batches; latency-high = "
        "VariableLatencyEnv, log-normal step time, mean 2 ms, std 10 ms"
    )
    title = "The limit: env alone and HTS's fraction of it"
    report.publish(title, settings, table, [plot(rows, args)], args)


def plot(rows, args: argparse.Namespace):
    plt = report.pyplot()
    fig, axes = plt.subplots(1, len(args.envs), figsize=(5.5 * len(args.envs), 4.2))
    axes = axes if len(args.envs) > 1 else [axes]
    for ax, env in zip(axes, args.envs, strict=True):
        mine = [(name, fps) for e, name, fps, _ in rows if e == env]
        limit = dict(mine)[collection.ENV_ALONE]
        names = [n.replace(" (", "\n(") for n, _ in mine]
        bars = ax.barh(names, [fps for _, fps in mine], color="tab:blue")
        for bar, (_, fps) in zip(bars, mine, strict=True):
            ax.text(
                bar.get_width(),
                bar.get_y() + bar.get_height() / 2,
                f" {fps / limit:.2f}",
                va="center",
                fontsize=8,
            )
        ax.invert_yaxis()
        ax.set_xlabel("frames/s (label: fraction of env alone)")
        ax.set_title(env)
        ax.tick_params(axis="y", labelsize=7)
    return report.save_plot(fig, args, "limit")


if __name__ == "__main__":
    main()
