"""The envpool-versions probe: a digest of seeded play that matches across installs of the
same envpool and moves with the seed, so a match across versions means the same game."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks.common import records
from benchmarks.probes import envpool_versions
from tests.conftest import require_module


def test_the_same_install_plays_the_same_and_another_seed_plays_otherwise(tmp_path, monkeypatch):
    envpool = require_module("envpool")
    monkeypatch.setattr(records, "RESULTS", tmp_path)
    envpool_versions.main(["--python", sys.executable, "--steps", "300", "--num-envs", "2"])
    record = json.loads((tmp_path / "envpool_versions.json").read_text())
    (table,) = record["tables"]
    first, second = table["rows"]
    assert first[2] == second[2] == envpool.__version__
    assert first[3:] == second[3:]  # digest, summed rewards, episode ends
    assert record["title"] == "envpool versions on Pong-v5: the same frames, rewards and ends"
    other = envpool_versions.play("Pong-v5", num_envs=2, steps=300, seed=2)
    assert other["digest"] != first[3]


def test_without_the_other_python_or_with_one_that_cannot_play_it_says_why(capsys, tmp_path):
    with pytest.raises(SystemExit):
        envpool_versions.main([])
    assert "--python is needed" in capsys.readouterr().err
    no_envpool = tmp_path / "python"
    no_envpool.write_text("#!/bin/sh\necho 'ModuleNotFoundError: envpool' >&2\nexit 1\n")
    no_envpool.chmod(0o755)
    with pytest.raises(SystemExit, match="could not play: ModuleNotFoundError: envpool"):
        envpool_versions.main(["--python", str(no_envpool), "--steps", "10"])
