"""The arithmetic of ``python -m benchmarks lag_study`` (curve grid, confidence band, frames to a
threshold, "stays there") on hand-computed numbers, and its reading of a real MLflow store."""

from __future__ import annotations

import importlib
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric


@pytest.fixture
def curves():
    return importlib.import_module("benchmarks.common.curves")


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
    lag_study = importlib.import_module("benchmarks.learning.lag_study")
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


@pytest.fixture
def lag_study():
    return importlib.import_module("benchmarks.learning.lag_study")


@pytest.fixture
def processes():
    return importlib.import_module("benchmarks.common.processes")


def test_a_run_that_ignores_sigterm_is_killed_with_its_whole_process_group(processes, tmp_path):
    # A leader and its child both ignore SIGTERM and sleep: the hung-collector case.
    child_pid = tmp_path / "child.pid"
    script = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "code = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "time.sleep(600)'\n"
        f"child = subprocess.Popen([sys.executable, '-c', code])\n"
        f"open({str(child_pid)!r}, 'w').write(str(child.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    log = tmp_path / "log.txt"
    returncode, reason = processes.run_bounded(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=dict(os.environ),
        log=log,
        timeout_s=3.0,
        grace_s=0.5,
    )
    assert returncode == -signal.SIGKILL
    assert reason == (
        "no exit within --cell-timeout 3 s: SIGTERM, still running 0.5 s later: SIGKILL"
    )
    assert log.read_text() == "started\n"
    pid = int(child_pid.read_text())
    for _ in range(100):  # the SIGKILLed child is reaped by init soon after
        if not Path(f"/proc/{pid}").exists() or "State:\tZ" in Path(
            f"/proc/{pid}/status"
        ).read_text(errors="replace"):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"child {pid} of the killed run still alive")


def test_an_interrupted_runner_stops_its_run_which_saves_before_exiting(processes, tmp_path):
    """The runner SIGTERMed (as SystemExit) while it waits: the run gets the SIGTERM too and
    saves, instead of running on unwatched."""
    saved = tmp_path / "saved"
    script = (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *_: (open({str(saved)!r}, 'w').write('ok'), "
        "sys.exit(0)))\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    log = tmp_path / "log.txt"

    def interrupt(*_):
        raise SystemExit(143)

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    started = time.monotonic()
    try:
        with pytest.raises(SystemExit):
            processes.run_bounded(
                [sys.executable, "-c", script],
                cwd=tmp_path,
                env=dict(os.environ),
                log=log,
                timeout_s=300.0,
                grace_s=30.0,
            )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert saved.read_text() == "ok"
    assert time.monotonic() - started < 30.0


def test_a_cell_that_exits_nonzero_is_recorded_as_failed_and_reported(
    lag_study, processes, tmp_path, monkeypatch
):
    monkeypatch.setattr(lag_study, "RAW", tmp_path / "raw")
    monkeypatch.setattr(processes, "LOCK", tmp_path / "lock")
    failing = [sys.executable, "-c", "print('line 1'); print('boom'); raise SystemExit(3)"]
    monkeypatch.setattr(lag_study, "command", lambda *cell: failing)
    lag_study.run_cell("cartpole", "ppo", "sync", 7, timeout_s=120.0)
    meta = json.loads((tmp_path / "raw" / "cartpole_ppo_sync_seed7.json").read_text())
    assert meta["failed"] == "hts-rl exited with 3"
    assert meta["returncode"] == 3
    assert meta["log_tail"] == "line 1\nboom"
    assert meta["updates_logged"] == 0 and meta["last_update"] is None
    assert not (tmp_path / "raw" / "cartpole_ppo_sync_seed7.csv").exists()
    cells, failed = lag_study.load_cells("cartpole", "ppo")
    assert cells == {} and list(failed) == ["cartpole_ppo_sync_seed7"]
    (line,) = lag_study.failure_lines(failed)
    assert line.startswith(
        "- FAILED `cartpole_ppo_sync_seed7`: hts-rl exited with 3 after 0 s (0 updates logged, "
        "no update; load "
    )
    # Recorded: the next run skips it instead of retrying or aborting.
    lag_study.run_cell("cartpole", "ppo", "sync", 7, timeout_s=120.0)
    assert json.loads((tmp_path / "raw" / "cartpole_ppo_sync_seed7.json").read_text()) == meta
