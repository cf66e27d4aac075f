"""Frames to a mean return of 475 on CartPole, per seed, for a recipe (issue #5's measure).

Fits the recipe's module in one process (``num_workers=0``: the same batches as with worker
processes, by the collector's determinism, on one core) until the mean of the last 20
episode returns first reaches the target or ``total_frames`` runs out, and prints one line
per seed: frames at the first hit (or "not reached" with the best mean), wall seconds and the
load average. ``--set key=value`` overrides a recipe argument (a YAML value).

    python -m benchmarks cartpole_frames_to_solve recipes/cartpole_acktr.yaml --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import importlib
import os
import time
from pathlib import Path

import torch
import yaml
from lightning import Callback

from benchmarks.common import records, runner


class _Reach(Callback):
    def __init__(self, target: float):
        self.target = target
        self.reached_at: int | None = None
        self.best = float("-inf")
        self.curve: list[tuple[int, float]] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if len(module.recent_returns) < 20:
            return
        mean = sum(module.recent_returns) / len(module.recent_returns)
        self.curve.append((module.frames, mean))
        self.best = max(self.best, mean)
        if mean >= self.target:
            self.reached_at = module.frames
            trainer.should_stop = True


def _module_class(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("recipe", type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    recipe = yaml.safe_load(args.recipe.read_text())
    cls = _module_class(recipe["model"]["class_path"])
    kwargs = dict(recipe["model"]["init_args"], num_workers=0)
    for item in args.set:
        key, _, value = item.partition("=")
        kwargs[key] = yaml.safe_load(value)
    torch.set_num_threads(1)
    rows = []
    for seed in args.seeds:
        module = cls(**dict(kwargs, seed=seed))
        reach = _Reach(args.target)
        started = time.perf_counter()
        runner.fit(module, reach)
        wall = time.perf_counter() - started
        hit = f"{reach.reached_at} frames" if reach.reached_at else "not reached"
        # every 10th of the run's frames
        every = -(-(module.hparams.total_frames // 10) // module.frames_per_batch)
        checkpoints = " ".join(
            f"{f / 1000:.0f}k:{r:.0f}" for i, (f, r) in enumerate(reach.curve) if i % every == 0
        )
        print(
            f"seed {seed}: {args.target:g} {hit} (best {reach.best:.1f}, frames {module.frames}); "
            f"{wall:.0f} s, load {'/'.join(f'{x:.2f}' for x in os.getloadavg())}; "
            f"{' '.join(args.set)}\n  return_last_20 at {checkpoints}",
            flush=True,
        )
        rows.append([seed, reach.reached_at or "not reached", f"{reach.best:.1f}", f"{wall:.0f}"])
    records.write(
        f"cartpole_seeds_{args.recipe.stem}",
        title=f"{args.recipe.stem}: frames to a mean return of {args.target:g}, per seed",
        claim="learning",
        tables=[{"columns": ["seed", f"frames to {args.target:g}", "best mean return",
                             "seconds"], "rows": rows}],
        text=[f"`{args.recipe}` in one process (num_workers=0, the same batches as with "
              f"workers), overrides: {' '.join(args.set) or 'none'}."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
