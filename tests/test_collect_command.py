"""`hts-rl collect`: the HTSCollector alone on CartPole, and the JSON summary it writes."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hts_lightning.cli import main
from tests.conftest import worker_processes

# 4 replicas of 16 steps a batch, 5 batches.
SETTING = ["--num-envs", "4", "--sync-interval", "16", "--frames", "320", "--seed", "3"]


def _collect(out: Path, capsys, *args: str) -> tuple[dict, list[str]]:
    """The summary `hts-rl collect --env CartPole-v1 --output out ARGS` wrote, and its lines."""
    assert main(["collect", "--env", "CartPole-v1", "--output", str(out), *args]) == 0
    (path,) = out.glob("collect-*.json")
    return json.loads(path.read_text()), capsys.readouterr().out.splitlines()


def test_collect_collects_the_frames_asked_for_and_summarizes_them(tmp_path, capsys):
    summary, lines = _collect(tmp_path / "two", capsys, *SETTING, "--num-workers", "2")
    assert set(summary) == {
        *("env", "num_envs", "num_workers", "sync_interval", "frames", "seed"),
        *("steady_fps", "wall_seconds", "episodes", "episode_returns"),
    }
    assert (summary["env"], summary["num_envs"], summary["num_workers"]) == ("CartPole-v1", 4, 2)
    assert (summary["sync_interval"], summary["frames"], summary["seed"]) == (16, 320, 3)
    # Five batches of 4 x 16 frames, 320 in all: what was asked.
    batches = [line.split() for line in lines if line.startswith("batch ")]
    assert [(words[1], int(words[3])) for words in batches] == [
        (f"{i}/5", 64 * i) for i in range(1, 6)
    ]
    assert any(line.startswith("Results written to ") for line in lines)
    assert 0 < summary["steady_fps"] < math.inf
    assert 0 < summary["wall_seconds"] < math.inf
    # CartPole pays 1 a step: each return is its episode's length, and the episodes that
    # ended lie within the 320 frames.
    returns = summary["episode_returns"]
    assert summary["episodes"] == len(returns) > 0
    assert all(r == int(r) and r >= 1 for r in returns)
    assert sum(returns) <= 320
    assert worker_processes() == []

    # The seed fixes the episodes, whatever the number of worker processes.
    again, _ = _collect(tmp_path / "one", capsys, *SETTING, "--num-workers", "1")
    assert again["num_workers"] == 1
    assert again["episode_returns"] == returns
