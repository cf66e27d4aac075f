"""The ``hts-rl fit`` command line of the benchmarks that train as a user would."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def hts_fit(recipe: str | Path, *options: str, seed: int | None = None) -> list[str]:
    """``hts-rl fit --config recipe`` (relative to the repository root, or absolute), seeded
    by ``seed`` as the recipes' measured runs are (``seed_everything`` and the module's seed),
    then ``options``."""
    seeds = [] if seed is None else [f"--seed_everything={seed}", f"--model.init_args.seed={seed}"]
    executable = Path(sys.executable).with_name("hts-rl")
    return [str(executable), "fit", "--config", str(ROOT / recipe), *seeds, *options]
