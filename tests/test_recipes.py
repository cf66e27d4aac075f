"""Every recipe runs two updates through the real ``hts-rl fit`` with tiny overrides, logged to
MLflow (the default logger), in a SQLite store of the test's own."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from mlflow import MlflowClient

from hts_lightning.cli import main
from hts_lightning.envs import env_factory
from hts_lightning.envs.football import PAPER_SCENARIOS
from tests.conftest import require_module
from tests.tracking.helpers import TINY

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
        *(f"football/{scenario}_ppo.yaml" for scenario in PAPER_SCENARIOS),
        "football/academy_3_vs_1_with_keeper_multiagent_ppo.yaml",
    }
    assert promised <= names


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.relative_to(RECIPE_DIR).as_posix())
def test_a_recipe_opens_with_what_it_trains_its_result_and_its_docs(recipe):
    header = []
    for line in recipe.read_text().splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    assert len(header) == 3, "three comment lines: what it trains, its result, its docs"
    assert header[1].startswith("# Measured: ")
    docs = header[2].removeprefix("# Docs: ")
    page = RECIPE_DIR.parent / docs
    assert page.is_file(), docs
    assert recipe.relative_to(RECIPE_DIR).as_posix() in page.read_text(), (
        f"{docs} says nothing of {recipe.name}"
    )


def _measured(recipe: Path) -> str:
    return recipe.read_text().splitlines()[1].removeprefix("# Measured: ")


def test_the_readme_states_every_recipes_measured_result():
    """The README's recipe table is the recipes' own headers: a result measured and written in
    a recipe reaches the README, and the ones not measured are named as such."""
    readme = (RECIPE_DIR.parent / "README.md").read_text()
    not_yet = re.search(r"^Not measured yet: (.*)$", readme, re.M)
    assert not_yet, "README.md: a line 'Not measured yet: ...' naming the other recipes"
    for recipe in RECIPES:
        name = recipe.relative_to(RECIPE_DIR).as_posix()
        measured = _measured(recipe)
        if measured.startswith(("not yet", "no learning result")):
            assert f"`{name}`" in not_yet.group(1), f"README: {name} is not measured yet"
        else:
            assert f"| `{name}` | {measured} |" in readme, f"README: {name}'s row is stale"


# The scenarios of the HTS-RL poster's table, with recipes on envpool's football port too.
FOOTBALL_ON_ENVPOOL = ("academy_empty_goal_close", "academy_empty_goal", "academy_run_to_score")


def test_football_recipes_use_the_papers_ppo_settings():
    paper = {
        "num_envs": 16,
        "sync_interval": 128,
        "lr": 0.000343,
        "lr_schedule": "linear",
        "clip_epsilon": 0.08,
        "gamma": 0.993,
        "gae_lambda": 0.95,
        "entropy_coef": 0.003,
        "max_grad_norm": 0.64,
        "epochs": 2,
        "minibatches": 8,
        "total_frames": 5_000_000,
    }
    recipes = sorted((RECIPE_DIR / "football").rglob("*.yaml"))
    assert len(recipes) == len(PAPER_SCENARIOS) + 1 + len(FOOTBALL_ON_ENVPOOL)
    for recipe in recipes:
        config = yaml.safe_load(recipe.read_text())
        init_args = config["model"]["init_args"]
        assert {k: init_args[k] for k in paper} == paper, recipe.name
        # Not the paper's: its PPO had no lag to correct (the study football_empty_goal_close).
        assert init_args["gradient_mode"] == "decoupled", recipe.name
        assert init_args["env_id"].removeprefix("GFootball/") in PAPER_SCENARIOS
        rewards = init_args.get("env_kwargs", {}).get("rewards", "scoring,checkpoints")
        (callback,) = config["trainer"]["callbacks"]
        if init_args.get("env_backend") == "envpool":
            # The port's scoring reward only: an episode's return is its goal difference.
            assert rewards == "scoring", recipe.name
            assert callback["init_args"]["key"] == "episode_reward"
            assert recipe.stem.removesuffix("_ppo") in FOOTBALL_ON_ENVPOOL
            continue
        # rewards scoring+checkpoints: the env's default, or said explicitly.
        assert rewards == "scoring,checkpoints", recipe.name
        assert callback["init_args"]["key"] == "goal_difference"


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory):
    """An MLflow SQLite file with its tables made, for each test to copy: making them runs
    MLflow's migrations, which take seconds."""
    path = tmp_path_factory.mktemp("store") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


# The scenario recipes differ only in env_id (test_football_recipes_use_the_papers_ppo_settings):
# two of them train here, and every one's env is built and stepped (test below).
FOOTBALL_TRAINED = {"academy_empty_goal_close_ppo", "academy_3_vs_1_with_keeper_multiagent_ppo"}
TRAINED = [r for r in RECIPES if "football" not in r.parts or r.stem in FOOTBALL_TRAINED]


@pytest.mark.parametrize(
    "recipe",
    sorted((RECIPE_DIR / "football").rglob("*.yaml")),
    ids=lambda p: p.relative_to(RECIPE_DIR / "football").with_suffix("").as_posix(),
)
def test_football_recipe_env_steps(recipe):
    init_args = yaml.safe_load(recipe.read_text())["model"]["init_args"]
    backend = init_args.get("env_backend", "python")
    require_module("envpool" if backend == "envpool" else "gfootball")
    env = env_factory(init_args["env_id"], backend=backend, **init_args.get("env_kwargs", {}))()
    try:
        out = env.rollout(3)
    finally:
        env.close()
    assert out["next", "observation"].shape[0] == 3
    assert torch.isfinite(out["next", "reward"]).all()


@pytest.mark.smoke
@pytest.mark.parametrize(
    "recipe", TRAINED, ids=lambda p: p.relative_to(RECIPE_DIR).with_suffix("").as_posix()
)
def test_recipe_runs_two_updates(recipe, tmp_path, monkeypatch, empty_store):
    init_args = yaml.safe_load(recipe.read_text())["model"]["init_args"]
    if init_args.get("env_backend") == "envpool":
        require_module("envpool")
    elif "football" in recipe.parts:
        require_module("gfootball")
    monkeypatch.chdir(tmp_path)
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    store = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    overrides = list(TINY)
    if "minibatches" in init_args:
        overrides.append("--model.init_args.minibatches=2")
    assert main(["fit", "--config", str(recipe), *overrides]) == 0
    client = MlflowClient(store)
    (run,) = client.search_runs([client.get_experiment_by_name("hts-rl").experiment_id])

    def history(key):
        return client.get_metric_history(run.info.run_id, key)

    assert len(history("train/loss_objective")) == 2  # two updates, both logged
    assert [m.step for m in history("perf/frames")] == [16, 32]  # the env-frame count is the step
    assert history("perf/frames")[-1].value == 32
    assert all(m.value > 0 for m in history("perf/fps"))
    assert history("perf/policy_lag")[-1].value == 1.0
    assert list(Path("runs").rglob("last.ckpt")), "a last checkpoint is written"
