"""Paper figure: learning curves against frames and against wall time, HTS vs synchronous PPO.

The same PPO module with a recipe's hyperparameters, fed by the HTSCollector (lag exactly one,
one-step delayed gradient) and by TorchRL's ``Collector(ParallelEnv)`` (synchronous at every
step, no lag), same seeds. Every update records (frames, wall seconds since the start of
training, mean of the last 20 episode returns); the curves go to a CSV and a PNG in
``benchmarks/plots``.

- ``cartpole`` (default): ``recipes/cartpole_ppo.yaml`` in full, 100k frames, seeds 0 and 1.
- ``pong`` / ``breakout``: ``recipes/atari/*_ppo.yaml``; by default only the first
  ``--frames`` of the 10M-frame run (same learning-rate schedule, stopped early: what 2 cores
  allow in minutes), with ``--full`` the whole run.

    python -m benchmarks fig_learning [--env cartpole|pong|breakout] [--full]
        [--output benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path
from typing import get_args

import yaml

from benchmarks.common import ROOT, figure_args, report, runner
from hts_lightning.choices import CollectorKind

RECIPES = ROOT / "recipes"
ENVS = {
    "cartpole": (RECIPES / "cartpole_ppo.yaml", 475.0),
    "pong": (RECIPES / "atari" / "pong_ppo.yaml", 18.0),
    "breakout": (RECIPES / "atari" / "breakout_ppo.yaml", 100.0),
}


def recipe_kwargs(path: Path) -> dict:
    """The PPO keyword arguments of a recipe (its ``model.init_args``)."""
    with path.open() as handle:
        return dict(yaml.safe_load(handle)["model"]["init_args"])


def parse_args(argv=None) -> argparse.Namespace:
    parser = figure_args.figure_parser(__doc__)
    parser.add_argument("--env", default="cartpole", choices=list(ENVS))
    parser.add_argument("--seeds", type=int, nargs="+", help="default 0 1 (Atari: 0)")
    parser.add_argument(
        "--collectors", nargs="+", choices=get_args(CollectorKind), default=["hts", "sync"]
    )
    parser.add_argument(
        "--frames", type=int, help="stop after these frames (Atari default 8 batches)"
    )
    args = figure_args.parse_figure_args(parser, argv, defaults={"hts_inference": ["auto"]})
    atari = args.env != "cartpole"
    args.seeds = args.seeds or ([0] if atari and not args.full else [0, 1])
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    recipe, target = ENVS[args.env]
    kwargs = recipe_kwargs(recipe)
    frames_per_batch = kwargs["num_envs"] * kwargs["sync_interval"]
    frames = args.frames
    if frames is None and args.env != "cartpole" and not args.full:
        frames = 8 * frames_per_batch
    # A stop before the end keeps the recipe's full-length learning-rate schedule.
    updates = None if frames is None else math.ceil(frames / frames_per_batch)
    runs: list[runner.Run] = []
    for seed in args.seeds:
        for kind, inference in runner.contenders(args.collectors, args.hts_inference):
            print(f"== {args.env} seed {seed} {kind} {inference}", flush=True)
            run = runner.Run(
                args.env,
                kind,
                kwargs["num_envs"],
                kwargs["num_workers"],
                kwargs["sync_interval"],
                seed=seed,
                inference=inference,
            )
            overrides = {
                k: v
                for k, v in kwargs.items()
                if k not in ("num_envs", "num_workers", "sync_interval")
            }
            runner.train(run, batches=None if updates is None else updates - 1, **overrides)
            report.announce(run)
            runs.append(run)
    csv_path = write_csv(runs, args)
    plots = [plot(runs, args, target)]
    rows = []
    for r in runs:
        frames_end, wall_end, ret = r.curve[-1]
        hit = next(((f, w) for f, w, v in r.curve if v >= target), None)
        hit_f, hit_w = (f"{hit[0]}", f"{hit[1]:.0f}") if hit else ("not reached", "-")
        end = [frames_end, f"{wall_end:.0f}", f"{ret:.1f}"]
        rows.append([r.label, r.seed, *end, hit_f, hit_w, report.load_str(r.load)])
    numbers = ("seed", "frames", "wall s", "return_last_20 at end")
    numbers += (f"frames to {target:g}", f"wall s to {target:g}")
    table = report.markdown_table(["collector", *numbers, "load 1/5/15 min"], rows, right=numbers)
    stop = "to the end" if updates is None else f"stopped after {updates} updates"
    settings = (
        f"`{recipe.relative_to(RECIPES.parent)}` ({kwargs['num_envs']} envs, "
        f"{kwargs['num_workers']} processes, sync interval {kwargs['sync_interval']}, "
        f"total_frames {kwargs['total_frames']}), {stop}; per-update curves in "
        f"`plots/{csv_path.name}`"
    )
    report.publish(f"Learning curves, {args.env}", settings, table, plots, args)


def write_csv(runs: list[runner.Run], args: argparse.Namespace) -> Path:
    report.PLOTS.mkdir(exist_ok=True)
    path = report.PLOTS / f"{args.plot_name or 'learning_' + args.env}.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["collector", "seed", "frames", "wall_s", "return_last_20"])
        for r in runs:
            for frames, wall, ret in r.curve:
                writer.writerow([r.collector, r.seed, frames, f"{wall:.3f}", f"{ret:.3f}"])
    return path


def plot(runs: list[runner.Run], args: argparse.Namespace, target: float) -> Path:
    plt = report.pyplot()
    fig, (by_frames, by_wall) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colors = {
        "hts": "tab:blue",
        "sync": "tab:orange",
        "multi_sync": "tab:green",
        "multi_async": "tab:red",
    }
    styles = ["-", "--", ":", "-."]
    for r in runs:
        frames, wall, ret = zip(*r.curve, strict=True)
        style = dict(
            color=colors[r.collector],
            ls=styles[args.seeds.index(r.seed) % 4],
            label=f"{r.label}, seed {r.seed}",
        )
        by_frames.plot(frames, ret, **style)
        by_wall.plot(wall, ret, **style)
    for ax in (by_frames, by_wall):
        ax.axhline(target, color="gray", lw=0.8)
    by_frames.set_xlabel("env frames")
    by_wall.set_xlabel("wall seconds (2-core machine, shared)")
    by_frames.set_ylabel("mean return of the last 20 episodes")
    by_frames.set_title(f"PPO, {args.env}: per frame")
    by_wall.set_title(f"PPO, {args.env}: per wall second")
    by_wall.legend(fontsize=8)
    return report.save_plot(fig, args, f"learning_{args.env}")


if __name__ == "__main__":
    main()
