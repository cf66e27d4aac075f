"""What ``hts-rl fit`` prints at its exit: nothing but its own lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tracking.helpers import RECIPES, TINY


@pytest.mark.slow
def test_an_atari_run_exits_without_leak_warnings(tmp_path):
    """The Python ALE path's env snapshots (ale_py's nanobind ALEState) reached the exit alive
    and nanobind printed ~40 lines of "leaked instance" warnings after every Atari run."""
    command = [str(Path(sys.executable).with_name("hts-rl")), "fit"]
    command += ["--config", str(RECIPES / "atari" / "pong_ppo.yaml"), *TINY]
    command += ["--model.init_args.env_backend=python"]  # ale_py's envs, snapshots and all
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Last checkpoint" in done.stdout
    assert "leaked" not in done.stdout + done.stderr
