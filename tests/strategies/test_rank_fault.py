"""One rank's fault under hts_ddp: every rank ends, each with one line saying why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import marked_env, marked_processes

pytestmark = pytest.mark.distributed
ROOT = Path(__file__).resolve().parents[2]


def test_when_one_rank_fails_the_other_names_the_cause_in_one_line(tmp_path):
    command = [
        *(sys.executable, "-m", "hts_lightning.cli", "fit"),
        "--model=tests.strategies.rank_fail.RankOneFailsA2C",
        *("--model.init_args.num_envs=4", "--model.init_args.num_workers=1"),
        *("--model.init_args.sync_interval=8", "--model.init_args.total_frames=32000"),
        *("--trainer.strategy=hts_ddp", "--trainer.devices=2", "--trainer.accelerator=cpu"),
        "--trainer.enable_progress_bar=false",
    ]
    env, marker = marked_env(PYTHONPATH=str(ROOT))
    done = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 1, done.stderr[-3000:]
    # Rank 1's own error (replica 2 is its first: 2 replicas a rank), then rank 0's line
    # instead of gloo's traceback.
    assert "hts-rl: error: Environment replica 2 raised an exception" in done.stderr
    assert (
        "hts-rl: error: rank 0 lost its connection to another rank, which stopped first "
        "(its error is above): " in done.stderr
    ), done.stderr[-3000:]
    assert "[rank0]: Traceback" not in done.stderr
    # No process of the run is left: the ranks' and their collectors' (by the run's marker,
    # since those left would be init's children now, not pytest's).
    assert marked_processes(marker) == []
