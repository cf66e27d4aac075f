"""Paper figure: the limit. The env alone on the same cores, and HTS's fraction of it.

For each env, on the same replicas and processes: the env stepped with random actions and no
policy (``collector_throughput.py``'s "env alone", and for Atari ale-py's C++
``AtariVectorEnv``), the HTSCollector collecting with no learning (``collector_throughput.py``'s
measurement), and end-to-end PPO training with HTS and with the synchronous baseline
(``Collector(ParallelEnv)``). The fractions say how much of the machine's env throughput each
reaches. The measurements themselves are ``collector_throughput.py``'s functions, called here.

    python benchmarks/fig_limit.py [--full] [--output benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import os

import collector_throughput as ct
import torch
from _common import (
    GAMES,
    PLOTS,
    Run,
    add_common_args,
    announce,
    contenders,
    emit,
    latency_env,
    load_str,
    pyplot,
    section,
    train,
)

ENVS = ("pong", "latency-high")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", choices=ENVS, default=list(ENVS))
    parser.add_argument("--num-envs", type=int, help="default 8; 16 with --full")
    parser.add_argument(
        "--num-workers", type=int, help="default 2 (pong) / num-envs (latency); --full: 8 / envs"
    )
    parser.add_argument("--sync-interval", type=int, help="default 32; 128 with --full")
    parser.add_argument("--batches", type=int, help="timed batches (default 4; 12 --full)")
    add_common_args(parser)
    args = parser.parse_args(argv)
    args.num_envs = args.num_envs or (16 if args.full else 8)
    args.sync_interval = args.sync_interval or (128 if args.full else 32)
    args.batches = args.batches or (12 if args.full else 4)
    return args


def workers_for(env: str, args: argparse.Namespace) -> int:
    if args.num_workers:
        return args.num_workers
    if env == "pong":  # CPU-bound: more processes than cores only adds switching
        return min(8, os.cpu_count() or 1) if args.full else 2
    return args.num_envs  # sleeps: one replica per process, the paper's regime


def main(argv=None) -> None:
    args = parse_args(argv)
    cases = ct.env_cases()
    rows = []  # (env, contender, frames/s, load)
    for env in args.envs:
        workers = workers_for(env, args)
        sizes = ct.Sizes(
            num_envs=args.num_envs,
            num_workers=workers,
            sync_interval=args.sync_interval,
            batches=-(-args.batches // workers) * workers,
            device="cuda" if torch.cuda.is_available() else "cpu",
            inference_batch_size=None,
        )
        case = cases[env]
        print(f"== {env}: {sizes}", flush=True)
        measured = [ct.run_env_alone(case, sizes)]
        if case.ale_game:
            measured.append(ct.run_ale_native(case.ale_game, sizes))
        measured.append(ct.run_collector(ct.HTS, case, ct.make_policy(case), sizes))
        for m in measured:
            rows.append((env, m.collector, m.fps, os.getloadavg()))
            print(f"  {m.collector}: {m.fps:.0f} frames/s", flush=True)
        env_id, env_kwargs = (GAMES[env], {}) if env in GAMES else latency_env(10.0)
        for kind, inference in contenders(["hts", "sync"], args.hts_inference):
            run = Run(env, kind, args.num_envs, workers, args.sync_interval, inference=inference)
            name = f"PPO training, {run.label}"
            run = train(
                run,
                env_id,
                env_kwargs,
                batches=args.batches,
            )
            announce(run)
            rows.append((env, name, run.fps, run.load))
    limit = {env: fps for env, name, fps, _ in rows if name == ct.ENV_ALONE}
    table = [
        "| env | contender | frames/s | this / env alone | load 1/5/15 min |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for env, name, fps, load in rows:
        table.append(f"| {env} | {name} | {fps:.0f} | {fps / limit[env]:.2f} | {load_str(load)} |")
    settings = (
        f"{args.num_envs} envs; processes: "
        + ", ".join(f"{env} {workers_for(env, args)}" for env in args.envs)
        + f"; sync interval {args.sync_interval}; {args.batches} timed batches; latency-high = "
        "VariableLatencyEnv, log-normal step time, mean 2 ms, std 10 ms"
    )
    plots = [plot(rows, args)]
    emit(
        section("The limit: env alone and HTS's fraction of it", settings, table, plots),
        args.output,
    )


def plot(rows, args: argparse.Namespace):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(args.envs), figsize=(5.5 * len(args.envs), 4.2))
    axes = axes if len(args.envs) > 1 else [axes]
    for ax, env in zip(axes, args.envs):
        mine = [(name, fps) for e, name, fps, _ in rows if e == env]
        limit = dict(mine)[ct.ENV_ALONE]
        names = [n.replace(" (", "\n(") for n, _ in mine]
        bars = ax.barh(names, [fps for _, fps in mine], color="tab:blue")
        for bar, (_, fps) in zip(bars, mine):
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
    fig.tight_layout()
    path = PLOTS / f"{args.plot_name or 'limit'}.png"
    fig.savefig(path, dpi=110)
    return path


if __name__ == "__main__":
    main()
