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
    assert first[1] == second[1] == envpool.__version__
    assert first[2:] == second[2:]  # digest, summed rewards, episode ends
    assert record["title"] == "envpool versions on Pong-v5: the same frames, rewards and ends"
    other = envpool_versions.play("Pong-v5", num_envs=2, steps=300, seed=2)
    assert other["digest"] != first[2]


def test_without_the_other_python_it_says_what_to_pass(capsys):
    with pytest.raises(SystemExit):
        envpool_versions.main([])
    assert "--python is needed" in capsys.readouterr().err
