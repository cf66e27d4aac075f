"""The embedded store (no MLFLOW_TRACKING_URI): where runs land, resuming a run, evaluating
a checkpoint; GIFs of Atari frames."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient
from torchrl.envs.utils import step_mdp

from hts_lightning.cli import main
from hts_lightning.envs import env_factory, make_atari_env
from hts_lightning.evaluate import _frame, _write_gif, load_policy, run_episodes
from tests.final_state import RecordFinalState
from tests.tracking.helpers import (
    RECIPES,
    TINY,
    assert_acts_as_trained,
    checkpoint_policy,
    child_runs,
    metric_steps,
)

CRASH = "--trainer.callbacks+=tests.tracking.helpers.CrashAfterCheckpoint"


def test_without_a_uri_runs_land_in_sqlite_mlflow_db_here_and_resume_continues_them(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    recipe = str(RECIPES / "cartpole_a2c.yaml")
    longer = [*TINY, "--model.init_args.total_frames=64"]  # four updates of 16 frames
    # A run that crashes after update 2, right after a checkpoint.
    with pytest.raises(RuntimeError, match="simulated crash"):
        main(["fit", "--config", recipe, *longer, CRASH])
    assert (tmp_path / "mlflow.db").is_file()
    mlflow.set_tracking_uri("sqlite:///mlflow.db")
    (first,) = mlflow.search_runs(experiment_names=["hts-rl"], output_format="list")
    assert first.info.status == "FAILED"
    assert Path(first.info.artifact_uri.removeprefix("file://")).is_relative_to(tmp_path / "mlruns")
    client = MlflowClient("sqlite:///mlflow.db")
    run_id = first.info.run_id
    assert metric_steps(client, run_id, "perf/frames") == [(16, 16.0), (32, 32.0)]

    # Resumed from its checkpoint: the same run, metrics at the next frame counts.
    RecordFinalState.final = None
    record = "--trainer.callbacks+=tests.final_state.RecordFinalState"
    assert main(["fit", "--config", recipe, *longer, "--ckpt_path", "crash.ckpt", record]) == 0
    assert f"Continuing MLflow run {run_id}" in capsys.readouterr().out
    (run,) = mlflow.search_runs(experiment_names=["hts-rl"], output_format="list")
    assert run.info.run_id == run_id and run.info.status == "FINISHED"
    frames = metric_steps(client, run_id, "perf/frames")
    assert frames == [(16, 16.0), (32, 32.0), (48, 48.0), (64, 64.0)]
    # Exact resume: the batch in flight at the checkpoint is collected again with the
    # weights that collected it, so the lag stays one, as in an uninterrupted run.
    assert [v for _, v in metric_steps(client, run_id, "perf/policy_lag")] == [0, 1, 1, 1]
    configs = [a.path for a in client.list_artifacts(run_id, "config")]
    assert "config/config.yaml" in configs
    assert any(p.startswith("config/config-resumed-") for p in configs)
    assert [a.path for a in client.list_artifacts(run_id, "last")].count("last/last.ckpt") == 1

    # Evaluating the checkpoint: a run nested in the training run, sampled actions.
    (checkpoint,) = (tmp_path / "runs").rglob("last.ckpt")
    assert checkpoint.parent.parent.name == run_id
    assert main(["evaluate", str(checkpoint), "--episodes", "2", "--sample"]) == 0
    (child,) = child_runs(client, run)
    assert child.data.metrics["eval/episodes"] == 2
    assert math.isfinite(child.data.metrics["eval/return_mean"])
    assert child.data.metrics["eval/return_mean"] >= 1
    assert child.data.params["actions"] == "sample"
    # What was evaluated is the trained policy: the checkpoint's, as evaluate loads it, and
    # the logged MLflow model act as the module's final parameters, and its episodes are
    # those the trained parameters play with the same seed (0, the default).
    trained = checkpoint_policy(checkpoint, RecordFinalState.final["state_dict"])
    untrained = checkpoint_policy(checkpoint, None)
    uri = "sqlite:///mlflow.db"
    loaded = load_policy(str(checkpoint), tracking_uri=uri).policy
    assert_acts_as_trained(loaded, loaded.logits, trained, untrained)
    logged = load_policy(f"runs:/{run_id}/model", tracking_uri=uri, sample=True).policy
    assert_acts_as_trained(logged, logged.logits, trained, untrained)
    expected, _, _ = run_episodes(
        trained, env_factory("CartPole-v1"), episodes=2, greedy=False, seed=0
    )
    returns = [v for _, v in metric_steps(client, child.info.run_id, "eval/episode_return")]
    assert returns == expected

    # A video of CartPole needs pygame (not installed here); MP4 is not offered.
    if importlib.util.find_spec("pygame") is None:
        capsys.readouterr()
        assert main(["evaluate", str(checkpoint), "--episodes", "1", "--video", "a.gif"]) == 2
        error = capsys.readouterr().err
        assert "a video of CartPole-v1 needs its renderer" in error and "pygame" in error
    assert main(["evaluate", str(checkpoint), "--video", "a.mp4"]) == 2
    assert "only GIF is written" in capsys.readouterr().err


def test_atari_frames_make_a_gif(tmp_path):
    from PIL import Image

    env = make_atari_env("ALE/Pong-v5", seed=0)
    data = env.reset()
    frames = [_frame(env)]
    for _ in range(3):
        data = step_mdp(env.rand_step(data))
        frames.append(_frame(env))
    env.close()
    assert frames[0].shape == (210, 160, 3)
    _write_gif(frames, tmp_path / "pong.gif", fps=15)
    with Image.open(tmp_path / "pong.gif") as gif:
        assert gif.size == (160, 210) and 1 <= gif.n_frames <= 4
