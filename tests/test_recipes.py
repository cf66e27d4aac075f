"""Every recipe runs two updates through the real ``hts-rl fit`` with tiny overrides."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from hts_lightning.cli import main

RECIPE_DIR = Path(__file__).resolve().parents[1] / "recipes"
RECIPES = sorted(RECIPE_DIR.rglob("*.yaml"))


def test_the_recipes_we_promise_exist():
    names = {p.relative_to(RECIPE_DIR).as_posix() for p in RECIPES}
    promised = {
        "cartpole_a2c.yaml",
        "cartpole_ppo.yaml",
        "atari/pong_ppo.yaml",
        "atari/pong_a2c.yaml",
        "atari/breakout_ppo.yaml",
        "cartpole_acktr.yaml",
        "atari/pong_acktr.yaml",
    }
    assert promised <= names


@pytest.mark.smoke
@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_recipe_runs_two_updates(recipe, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    init_args = yaml.safe_load(recipe.read_text())["model"]["init_args"]
    overrides = [
        "--model.init_args.num_envs=2",
        "--model.init_args.num_workers=1",
        "--model.init_args.sync_interval=8",
        "--model.init_args.total_frames=32",
        "--trainer.log_every_n_steps=1",
        "--trainer.enable_progress_bar=false",
    ]
    if "minibatches" in init_args:
        overrides.append("--model.init_args.minibatches=2")
    assert main(["fit", "--config", str(recipe), *overrides]) == 0
    metrics = list(Path("runs").rglob("metrics.csv"))
    assert len(metrics) == 1
    rows = [r for r in csv.DictReader(metrics[0].open()) if r.get("train/loss_objective")]
    assert len(rows) == 2  # two updates, both logged
    assert float(rows[-1]["perf/frames"]) == 32
    assert [int(r["step"]) for r in rows] == [16, 32]  # the env-frame count is the step
    assert all(float(r["perf/fps"]) > 0 for r in rows)
    assert float(rows[-1]["perf/policy_lag"]) == 1.0
    assert list(Path("runs").rglob("last.ckpt")), "a last checkpoint is written"
