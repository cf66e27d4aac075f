"""The arithmetic of ``benchmarks/lag_study.py`` (curve grid, confidence band, frames to a
threshold, "stays there") on hand-computed numbers, and its reading of a real MLflow store."""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import numpy as np
import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def curves(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("_curves")


def test_on_grid_interpolates_inside_and_is_nan_outside(curves):
    x, y = np.array([10.0, 20.0, 30.0]), np.array([0.0, 10.0, 40.0])
    values = curves.on_grid(x, y, np.array([5.0, 10.0, 15.0, 25.0, 30.0, 35.0]))
    np.testing.assert_allclose(values, [np.nan, 0.0, 5.0, 25.0, 40.0, np.nan])


def test_mean_ci_is_students_t_times_the_standard_error(curves):
    matrix = np.array([[1.0, 2.0, 7.0], [3.0, 4.0, np.nan], [5.0, np.nan, np.nan]])
    mean, half = curves.mean_ci(matrix)
    # Column 0: n=3, mean 3, sample std 2, t(0.975, 2) = 4.302653 -> 4.302653 * 2 / sqrt(3).
    # Column 1: n=2, mean 3, std sqrt(2), t(0.975, 1) = 12.706205 -> 12.706205 * sqrt(2) / sqrt(2).
    # Column 2: one seed: its value, no band.
    np.testing.assert_allclose(mean, [3.0, 3.0, 7.0])
    np.testing.assert_allclose(half[:2], [4.968275, 12.706205], rtol=1e-6)
    assert math.isnan(half[2])


def test_first_reach_and_tail_min(curves):
    curve = curves.Curve(
        frames=np.array([80.0, 90.0, 95.0, 100.0]),
        wall_s=np.array([1.0, 2.0, 3.0, 4.0]),
        returns=np.array([476.0, 410.0, 390.0, 480.0]),
    )
    assert curves.first_reach(curve, 475.0) == (80, 1.0)
    assert curves.first_reach(curve, 478.0) == (100, 4.0)
    assert curves.first_reach(curve, 481.0) is None
    assert curves.tail_min(curve, total_frames=100) == 390.0  # frames >= 90
    assert curves.tail_min(curve, total_frames=100, fraction=0.05) == 390.0  # frames >= 95
    assert math.isnan(curves.tail_min(curve, total_frames=1000))  # the run never got there


def test_curve_csv_round_trip_and_empty_file(curves, tmp_path):
    path = tmp_path / "cell.csv"
    curves.write_curve(path, [(256, 1.5, 20.0), (512, 2.25, 31.5)])
    curve = curves.read_curve(path)
    np.testing.assert_array_equal(curve.frames, [256, 512])
    np.testing.assert_array_equal(curve.wall_s, [1.5, 2.25])
    np.testing.assert_array_equal(curve.returns, [20.0, 31.5])
    curves.write_curve(path, [])
    with pytest.raises(ValueError, match="no updates"):
        curves.read_curve(path)


def test_reads_frames_wall_seconds_and_returns_from_the_mlflow_store(curves, tmp_path):
    lag_study = importlib.import_module("lag_study")
    store = tmp_path / "mlflow.db"
    client = MlflowClient(f"sqlite:///{store}")
    run = client.create_run(client.create_experiment("hts-rl"))
    started = 1_700_000_000.0  # the process start, seconds
    metrics = [
        Metric(lag_study.METRIC, 22.0, int((started + 3.5) * 1000), 256),
        Metric(lag_study.METRIC, 40.0, int((started + 4.0) * 1000), 512),
        Metric("perf/fps", 900.0, int((started + 4.0) * 1000), 512),
    ]
    client.log_batch(run.info.run_id, metrics=metrics)
    rows = lag_study.read_mlflow_curve(store, started)
    assert rows == [(256, 3.5, 22.0), (512, 4.0, 40.0)]
