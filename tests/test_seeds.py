"""The run's seed is the one a user sets: ``seed_everything`` (Lightning's), or the module's own
``seed`` when it is given explicitly. Every run is a real ``hts-rl fit``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from mlflow import MlflowClient

from hts_lightning import PPO
from hts_lightning.cli import main

RECIPE = str(Path(__file__).resolve().parents[1] / "recipes" / "cartpole_ppo.yaml")
TINY = [
    "--model.init_args.num_envs=4",
    "--model.init_args.sync_interval=8",
    "--model.init_args.total_frames=96",
    "--model.init_args.epochs=2",
    "--trainer.enable_progress_bar=false",
]


@pytest.fixture
def empty_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


def _fit(folder: Path, store: Path, monkeypatch, *args: str) -> dict:
    """The final parameters and the MLflow run's seed tag of one ``hts-rl fit``."""
    folder.mkdir()
    shutil.copy(store, folder / "mlflow.db")
    monkeypatch.chdir(folder)
    uri = f"sqlite:///{folder}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    assert main(["fit", "--config", RECIPE, *TINY, *args]) == 0
    (checkpoint,) = folder.glob("runs/**/last.ckpt")
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("hts-rl").experiment_id])
    return {
        "parameters": state["state_dict"],
        "seed": state["hyper_parameters"]["seed"],
        "tag": run.data.tags["hts.seed"],
        "param": run.data.params["seed"],
    }


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_seed_everything_is_the_runs_seed_and_an_explicit_seed_wins(
    tmp_path, monkeypatch, empty_store
):
    def fit(name, *args):
        return _fit(tmp_path / name, empty_store, monkeypatch, *args)

    one = fit("one", "--seed_everything=1", "--model.init_args.num_workers=1")
    one_2w = fit("one_2w", "--seed_everything=1", "--model.init_args.num_workers=2")
    two = fit("two", "--seed_everything=2", "--model.init_args.num_workers=1")
    # seed_everything 1, but the module's seed 2 given explicitly, in 2 workers.
    explicit = fit(
        "explicit",
        "--seed_everything=1",
        "--model.init_args.seed=2",
        "--model.init_args.num_workers=2",
    )
    # The same seed: bitwise-identical runs, with 1 and with 2 worker processes.
    assert _same(one["parameters"], one_2w["parameters"])
    # Another seed: another run (seed_everything is no longer overridden by the module).
    assert not _same(one["parameters"], two["parameters"])
    # An explicit module seed wins over seed_everything (and 2 workers equal 1 again).
    assert _same(explicit["parameters"], two["parameters"])
    # The seed in force is what the checkpoint and MLflow record.
    assert [one["seed"], two["seed"], explicit["seed"]] == [1, 2, 2]
    assert [one["tag"], two["tag"], explicit["tag"]] == ["1", "2", "2"]
    assert [one["param"], two["param"], explicit["param"]] == ["1", "2", "2"]


def test_the_module_seed_defaults_to_lightnings_global_seed(monkeypatch):
    from lightning import seed_everything

    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    kwargs = dict(env_id="CartPole-v1", num_envs=2, num_workers=0, sync_interval=4)
    assert PPO(**kwargs).hparams.seed == 0  # nothing set: 0, as Lightning's own default
    seed_everything(7)
    seven = PPO(**kwargs)
    assert seven.hparams.seed == 7
    assert PPO(**kwargs, seed=3).hparams.seed == 3
    seed_everything(7)
    assert _same(PPO(**kwargs).state_dict(), seven.state_dict())


def test_print_config_shows_the_seed_in_force(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--config", RECIPE, "--seed_everything=5", "--print_config"])
    printed = capsys.readouterr().out
    assert "seed_everything: 5" in printed
    assert "seed: null" in printed  # the module's: None means seed_everything's
