"""Whatever ends an `hts-rl fit` run, its last.ckpt holds the final state: the parameters,
optimizer and progress of the module at the end, and the logged MLflow model the same
parameters. (A stop signal's checkpoint is tested in test_fit_faults.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mlflow import MlflowClient

from hts_lightning.cli import main
from hts_lightning.evaluate import load_policy
from tests.final_state import RecordFinalState, assert_checkpoint_is
from tests.test_fit_faults import COUNTING as FAULT_RUN_ARGS

ROOT = Path(__file__).resolve().parents[1]
RECIPE = str(ROOT / "recipes" / "cartpole_a2c.yaml")
# Counting env, 2 replicas in 1 worker: 16 frames per update; periodic checkpoints every 50.
COUNTING = [*FAULT_RUN_ARGS, "--trainer.callbacks+=tests.final_state.RecordFinalState"]


def _fit(tmp_path: Path, monkeypatch, *args: str) -> int:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    RecordFinalState.final = None
    try:
        return main(["fit", "--config", RECIPE, *COUNTING, *args])
    except SystemExit as exit:
        return exit.code


def _assert_last_checkpoint_is_final(tmp_path: Path) -> dict:
    final = RecordFinalState.final
    assert final is not None
    (path,) = tmp_path.glob("runs/**/last.ckpt")
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    assert_checkpoint_is(checkpoint, final)
    return checkpoint


def _assert_logged_model_acts_as_checkpoint(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    (path,) = tmp_path.glob("runs/**/last.ckpt")
    trained = load_policy(str(path), tracking_uri=uri, sample=True).policy
    logged = load_policy(f"runs:/{run.info.run_id}/model", tracking_uri=uri, sample=True).policy
    observations = torch.arange(32, dtype=torch.float32).reshape(32, 1)  # Counting's counts
    expected = trained.logits(observations)
    assert not torch.allclose(expected, expected[:1])  # the logits depend on the observation
    torch.testing.assert_close(logged.logits(observations), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("ending", "args", "updates"),
    [
        ("total_frames", ["--model.init_args.total_frames=848"], 53),
        ("max_steps", ["--model.init_args.total_frames=100000", "--trainer.max_steps=61"], 61),
        (
            "StopAtReturn",
            [
                "--model.init_args.total_frames=100000",
                '--model.init_args.env_kwargs={"max_count": 3}',
                "--trainer.callbacks+=hts_lightning.callbacks.StopAtReturn",
                "--trainer.callbacks.target=2.5",
                "--trainer.callbacks.window=2",
            ],
            None,
        ),
        (
            "max_time",
            ["--model.init_args.total_frames=10000000", "--trainer.max_time=00:00:00:04"],
            None,
        ),
    ],
)
def test_a_finished_run_keeps_its_final_state_in_last_ckpt(
    ending, args, updates, tmp_path, monkeypatch
):
    assert _fit(tmp_path, monkeypatch, *args) == 0
    checkpoint = _assert_last_checkpoint_is_final(tmp_path)
    done = checkpoint["hts_progress"]["updates"]
    if updates is not None:
        assert done == updates
    else:
        assert 0 < done < 10000000 // 16
    if ending == "StopAtReturn":  # deterministic, and off the periodic 50: the check can fail
        assert done % 50 != 0
    # max_time stops wherever the clock runs out: on a multiple of 50 once in ~50 runs, where
    # the periodic checkpoint is the final state too, and the check above still holds.
    _assert_logged_model_acts_as_checkpoint(tmp_path)


def test_an_env_error_leaves_last_ckpt_at_the_last_whole_update(tmp_path, monkeypatch):
    # Each replica raises at count 420: in the 53rd batch, after 52 whole updates.
    code = _fit(
        tmp_path,
        monkeypatch,
        '--model.init_args.env_kwargs={"max_count": 1000, "fail_at": 420}',
        "--model.init_args.total_frames=100000",
    )
    assert code == 1
    checkpoint = _assert_last_checkpoint_is_final(tmp_path)
    assert checkpoint["hts_progress"]["updates"] == 52


def test_a_run_stopped_by_max_steps_goes_on_from_last_ckpt_with_a_larger_one(tmp_path, monkeypatch):
    # 61 updates: off the periodic 50, so last.ckpt is the final-state save, not a periodic one.
    budget = "--model.init_args.total_frames=100000"
    (tmp_path / "whole").mkdir()
    assert _fit(tmp_path / "whole", monkeypatch, budget, "--trainer.max_steps=83") == 0
    uninterrupted = RecordFinalState.final

    (tmp_path / "extended").mkdir()
    assert _fit(tmp_path / "extended", monkeypatch, budget, "--trainer.max_steps=61") == 0
    assert RecordFinalState.final["updates"] == 61
    code = _fit(
        tmp_path / "extended", monkeypatch, budget, "--trainer.max_steps=83", "--ckpt_path=last"
    )
    assert code == 0
    assert RecordFinalState.final is not None, "the resumed run ended without an update"
    assert RecordFinalState.final["updates"] == 83
    extended = _assert_last_checkpoint_is_final(tmp_path / "extended")
    for name, value in extended["state_dict"].items():
        assert torch.equal(value, uninterrupted["state_dict"][name]), f"{name} differs"


@pytest.mark.parametrize(
    ("ending", "stop", "go_on"),
    [
        (
            "StopAtReturn",
            [
                "--trainer.callbacks+=hts_lightning.callbacks.StopAtReturn",
                "--trainer.callbacks.target=2.5",
                "--trainer.callbacks.window=2",
            ],
            [],
        ),
        ("max_time", ["--trainer.max_time=00:00:00:04"], ["--trainer.max_time=01:00:00:00"]),
    ],
)
def test_a_run_stopped_by_a_callback_goes_on_from_last_ckpt(
    ending, stop, go_on, tmp_path, monkeypatch
):
    # The stop is a callback's (max_time's is Lightning's Timer), decided after the update.
    budget = [
        "--model.init_args.total_frames=100000",
        '--model.init_args.env_kwargs={"max_count": 3}',
    ]
    (tmp_path / "extended").mkdir()
    assert _fit(tmp_path / "extended", monkeypatch, *budget, *stop) == 0
    stopped_at = RecordFinalState.final["updates"]
    assert 0 < stopped_at < 100000 // 16
    target = f"--trainer.max_steps={stopped_at + 22}"
    code = _fit(tmp_path / "extended", monkeypatch, *budget, *go_on, target, "--ckpt_path=last")
    assert code == 0
    assert RecordFinalState.final is not None, "the resumed run ended without an update"
    assert RecordFinalState.final["updates"] == stopped_at + 22
    extended = _assert_last_checkpoint_is_final(tmp_path / "extended")

    (tmp_path / "whole").mkdir()
    assert _fit(tmp_path / "whole", monkeypatch, *budget, target) == 0
    for name, value in extended["state_dict"].items():
        assert torch.equal(value, RecordFinalState.final["state_dict"][name]), f"{name} differs"
