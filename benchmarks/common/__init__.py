"""What the benchmarks share: records and reports, the training runner, the collection
measurements, the figures' command line, curve arithmetic, the plain-PyTorch PPO baseline and
the processes the benchmarks start."""

from __future__ import annotations

from pathlib import Path

#: The repository's root: recipes, results and plots are found from it.
ROOT = Path(__file__).resolve().parents[2]
