"""Learning-curve arithmetic of ``lag_study``: reading a run's curve, putting seeds on one
grid, the mean with a 95% confidence band, frames to a threshold and "stays there".

A curve is one row per update: env frames, wall seconds since the run's process started, and
the mean return of the last 20 episodes (the module's ``rollout/return_last_20``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

COLUMNS = ("frames", "wall_s", "return_last_20")


@dataclass
class Curve:
    """One run's per-update curve (three equally long 1-d arrays)."""

    frames: np.ndarray
    wall_s: np.ndarray
    returns: np.ndarray


def write_curve(path: Path, rows: list[tuple[int, float, float]]) -> None:
    """Write ``(frames, wall_s, return_last_20)`` rows as a CSV with a header."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for frames, wall, ret in rows:
            writer.writerow([int(frames), f"{wall:.3f}", f"{ret:.3f}"])


def read_curve(path: Path) -> Curve:
    """The curve a :func:`write_curve` CSV holds."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise ValueError(f"{path} holds no updates: rerun that cell (delete the file).")
    return Curve(*(np.array([float(r[c]) for r in rows]) for c in COLUMNS))


def on_grid(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``y(x)`` linearly interpolated at ``grid``; NaN outside ``[x[0], x[-1]]`` (no update
    measured there: a run that ended or had not yet logged a return does not count)."""
    values = np.interp(grid, x, y)
    values[(grid < x[0]) | (grid > x[-1])] = np.nan
    return values


def mean_ci(matrix: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``matrix`` (seeds x grid points, NaN = no value): the mean over seeds and
    the half-width of its ``level`` confidence interval, Student's t with n - 1 degrees of
    freedom times the standard error (sample std / sqrt(n)). NaN where fewer than 2 seeds have
    a value (the mean too where none has)."""
    matrix = np.atleast_2d(np.asarray(matrix, dtype=float))
    n = (~np.isnan(matrix)).sum(axis=0)
    mean = np.full(matrix.shape[1], np.nan)
    half = np.full(matrix.shape[1], np.nan)
    some, several = n >= 1, n >= 2
    mean[some] = np.nanmean(matrix[:, some], axis=0)
    std = np.nanstd(matrix[:, several], axis=0, ddof=1)
    t = stats.t.ppf(0.5 + level / 2, n[several] - 1)
    half[several] = t * std / np.sqrt(n[several])
    return mean, half


def first_reach(curve: Curve, threshold: float) -> tuple[int, float] | None:
    """(frames, wall seconds) of the first update whose return is at least ``threshold``."""
    hits = np.nonzero(curve.returns >= threshold)[0]
    if not hits.size:
        return None
    i = hits[0]
    return int(curve.frames[i]), float(curve.wall_s[i])


def tail_min(curve: Curve, total_frames: int, fraction: float = 0.1) -> float:
    """The lowest return over the updates in the last ``fraction`` of ``total_frames``
    ("stays there": this above a level). NaN if the run never got there."""
    start = total_frames * (1 - fraction)
    tail = curve.returns[curve.frames >= start]
    return float(tail.min()) if tail.size else math.nan
