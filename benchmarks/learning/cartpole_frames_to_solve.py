"""Frames to a mean return of 475 on CartPole, per seed, for a recipe (issue #5's measure).

Fits the recipe's module in one process a seed (``num_workers=0``: the same batches as with
worker processes, by the collector's determinism, on one core) until the mean of the last 20
episode returns first reaches the target or ``total_frames`` runs out, and prints one line
per seed: frames at the first hit (or "not reached" with the best mean), wall seconds and the
load average. ``--set key=value`` overrides a recipe argument (a YAML value). ``--jobs 2``
runs two seeds at a time, each in its own process on one core: the frames are the same (each
run is deterministic), the seconds are not comparable then.

    python -m benchmarks cartpole_frames_to_solve recipes/cartpole_acktr.yaml --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing
import os
import time
from pathlib import Path

import torch
import yaml
from lightning import Callback

from benchmarks.common import records, runner


class _Reach(Callback):
    def __init__(self, target: float, *, stop: bool):
        self.target = target
        self.stop = stop
        self.reached_at: int | None = None
        self.best = float("-inf")
        self.curve: list[tuple[int, float]] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if len(module.recent_returns) < 20:
            return
        mean = sum(module.recent_returns) / len(module.recent_returns)
        self.curve.append((module.frames, mean))
        self.best = max(self.best, mean)
        if mean >= self.target and self.reached_at is None:
            self.reached_at = module.frames
            trainer.should_stop = self.stop

    def lowest_after(self, frames: int) -> float:
        """The lowest 20-episode mean from ``frames`` on (NaN: none)."""
        tail = [mean for at, mean in self.curve if at >= frames]
        return min(tail) if tail else float("nan")


def _module_class(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _run_seed(cls, kwargs: dict, seed: int, args) -> tuple[str, list]:
    """One seed's run: its printed line and its table row."""
    torch.set_num_threads(1)
    module = cls(**dict(kwargs, seed=seed))
    reach = _Reach(args.target, stop=not args.hold)
    started = time.perf_counter()
    runner.fit(module, reach)
    wall = time.perf_counter() - started
    hit = f"{reach.reached_at} frames" if reach.reached_at else "not reached"
    lowest = reach.lowest_after(0.9 * module.hparams.total_frames)
    # every 10th of the run's frames
    every = -(-(module.hparams.total_frames // 10) // module.frames_per_batch)
    checkpoints = " ".join(
        f"{f / 1000:.0f}k:{r:.0f}" for i, (f, r) in enumerate(reach.curve) if i % every == 0
    )
    line = (
        f"seed {seed}: {args.target:g} {hit} (best {reach.best:.1f}, lowest in the last 10% "
        f"{lowest:.1f}, frames {module.frames}); "
        f"{wall:.0f} s, load {'/'.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"{' '.join(args.set)}\n  return_last_20 at {checkpoints}"
    )
    row = [seed, reach.reached_at or "not reached", f"{reach.best:.1f}"]
    return line, row + ([f"{lowest:.1f}"] if args.hold else []) + [f"{wall:.0f}"]


def _run_seed_of(task: tuple) -> tuple[str, list]:
    return _run_seed(*task)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("recipe", type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--hold",
        action="store_true",
        help="train every frame of the budget and report the lowest mean of the last 10%%",
    )
    parser.add_argument("--jobs", type=int, default=1, help="seeds run at a time (one core each)")
    args = parser.parse_args(argv)
    recipe = yaml.safe_load(args.recipe.read_text())
    cls = _module_class(recipe["model"]["class_path"])
    kwargs = dict(recipe["model"]["init_args"], num_workers=0)
    for item in args.set:
        key, _, value = item.partition("=")
        kwargs[key] = yaml.safe_load(value)
    context = multiprocessing.get_context("spawn")  # a fresh interpreter per seed's run
    rows = []
    with context.Pool(args.jobs) as pool:
        tasks = [(cls, kwargs, seed, args) for seed in args.seeds]
        for line, row in pool.imap(_run_seed_of, tasks):  # in the seeds' order, as they end
            print(line, flush=True)
            rows.append(row)
    records.write(
        f"cartpole_seeds_{args.recipe.stem}" + ("_hold" if args.hold else ""),
        title=f"{args.recipe.stem}: frames to a mean return of {args.target:g}, per seed"
        + (", every frame of the budget trained" if args.hold else ""),
        claim="learning",
        tables=[{"columns": ["seed", f"frames to {args.target:g}", "best mean return"]
                 + (["lowest mean, last 10% of frames"] if args.hold else []) + ["seconds"],
                 "rows": rows}],
        text=[f"`{args.recipe}` in one process a seed (num_workers=0, the same batches as "
              f"with workers), overrides: {' '.join(args.set) or 'none'}, {args.jobs} at a time"
              + (", every frame of the budget trained (--hold)." if args.hold else ".")],
    )  # fmt: skip


if __name__ == "__main__":
    main()
