"""Against a real ``mlflow server``: params, frame-step metrics, tags, checkpoint, model,
registry and ``hts-rl evaluate``, from one short ``hts-rl fit``."""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest
import torch
from mlflow import MlflowClient

from hts_lightning import make_gym_env
from hts_lightning.cli import main
from hts_lightning.envs import env_factory
from hts_lightning.evaluate import load_policy, run_episodes
from tests.conftest import require_module
from tests.final_state import RecordFinalState
from tests.tracking.helpers import (
    RECIPES,
    TINY,
    assert_acts_as_trained,
    checkpoint_policy,
    child_runs,
    metric_steps,
)

REGISTERED = "cartpole-ppo-test"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    log = (root / "server.log").open("w")
    command = [
        sys.executable, "-m", "mlflow", "server",
        "--host", "127.0.0.1", "--port", str(port),
        "--backend-store-uri", f"sqlite:///{root}/mlflow.db",
        "--artifacts-destination", str(root / "artifacts"),
        "--workers", "1",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"mlflow server exited: {(root / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"mlflow server not healthy: {(root / 'server.log').read_text()[-2000:]}"
                )
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the server and its uvicorn workers
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


@pytest.fixture(scope="module")
def fitted(server, tmp_path_factory):
    """One tiny PPO run on CartPole logged to the server: (client, run, the policy of the
    module's parameters at the end of the run, the policy it started from)."""
    require_module("envpool")  # the recipe's env_backend
    folder = tmp_path_factory.mktemp("fit")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("MLFLOW_TRACKING_URI", server)
        recipe = RECIPES / "cartpole_ppo.yaml"
        overrides = [
            *TINY,
            "--model.init_args.minibatches=2",
            "--model.init_args.epochs=2",  # the recipe's 20 would only cost time here
            f"--trainer.logger.init_args.registered_model_name={REGISTERED}",
            "--trainer.callbacks+=tests.final_state.RecordFinalState",
        ]
        RecordFinalState.final = None
        assert main(["fit", "--config", str(recipe), *overrides]) == 0
        mlflow.set_tracking_uri(None)
    client = MlflowClient(server)
    (run,) = client.search_runs([client.get_experiment_by_name("hts-rl").experiment_id])
    (checkpoint,) = folder.glob("runs/**/last.ckpt")
    trained_policy = checkpoint_policy(checkpoint, RecordFinalState.final["state_dict"])
    return client, run, trained_policy, checkpoint_policy(checkpoint, None)


@pytest.fixture(scope="module")
def trained(fitted):
    """The run of ``fitted``: (client, run)."""
    client, run, _, _ = fitted
    return client, run


def test_the_resolved_recipe_is_logged_as_params_and_artifact(trained):
    client, run = trained
    params = run.data.params
    assert params["model.class_path"] == "hts_lightning.PPO"
    assert params["model.init_args.env_id"] == "CartPole-v1"
    assert params["model.init_args.num_envs"] == "2"  # the override, not the recipe's 8
    assert params["model.init_args.total_frames"] == "32"
    assert params["model.init_args.lr"] == "0.001"  # from the recipe
    assert params["model.init_args.epochs"] == "2"
    assert params["model.init_args.clip_epsilon"] == "0.2"  # from the recipe
    assert params["trainer.log_every_n_steps"] == "1"
    assert params["seed_everything"] == "0"
    config = client.download_artifacts(run.info.run_id, "config/config.yaml")
    text = Path(config).read_text()
    assert "total_frames: 32" in text and "class_path: hts_lightning.PPO" in text


def test_metrics_are_stepped_by_env_frames_and_tags_name_the_run(trained):
    client, run = trained
    assert metric_steps(client, run.info.run_id, "perf/frames") == [(16, 16.0), (32, 32.0)]
    assert [s for s, _ in metric_steps(client, run.info.run_id, "train/loss_objective")] == [16, 32]
    assert metric_steps(client, run.info.run_id, "perf/policy_lag")[-1] == (32, 1.0)
    tags = run.data.tags
    assert tags["hts.algorithm"] == "PPO"
    assert tags["hts.seed"] == "0"
    assert tags["hts.world_size"] == "1"
    assert tags["hts.collector"] == "hts"
    assert tags["hts.env_id"] == "CartPole-v1"
    assert tags["hts.version"] == "0.1.0"
    assert run.info.status == "FINISHED"


def test_checkpoint_is_an_artifact(trained):
    client, run = trained
    names = [a.path for a in client.list_artifacts(run.info.run_id, "last")]
    assert "last/last.ckpt" in names
    # Plain data only: it loads with weights_only=True, as hts-rl evaluate and resume read it.
    checkpoint = torch.load(
        client.download_artifacts(run.info.run_id, "last/last.ckpt"), weights_only=True
    )
    assert checkpoint["hts_mlflow"]["run_id"] == run.info.run_id
    assert checkpoint["hts_progress"]["frames"] == 32


def test_the_policy_models_are_pickle_free_and_act(fitted, monkeypatch):
    client, run, trained_policy, untrained_policy = fitted
    mlflow.set_tracking_uri(client.tracking_uri)
    # MLflow refuses pickles and checks pt2 archives for pickle records with this unset.
    monkeypatch.setenv("MLFLOW_ALLOW_PICKLE_DESERIALIZATION", "false")
    policy = mlflow.pytorch.load_model(f"runs:/{run.info.run_id}/model")
    logits = mlflow.pytorch.load_model(f"runs:/{run.info.run_id}/logits")
    env = make_gym_env("CartPole-v1", seed=0)
    observation = env.reset()["observation"]
    action = policy(observation.unsqueeze(0))
    assert action.shape == (1,) and action.dtype == torch.int64 and int(action) in (0, 1)
    observations = torch.randn(7, 4)
    actions = policy(observations)
    assert actions.shape == (7,) and set(actions.tolist()) <= {0, 1}
    assert logits(observations).shape == (7, 2)
    assert torch.equal(actions, logits(observations).argmax(-1))  # greedy
    info = mlflow.models.get_model_info(f"runs:/{run.info.run_id}/model")
    for name in ("model", "logits"):  # torch.export programs, no pickled module
        files = [a.path for a in client.list_artifacts(run.info.run_id, f"{name}/data")]
        assert files == [f"{name}/data/model.pt2"]
    assert info.metadata["env_id"] == "CartPole-v1"
    assert info.signature.inputs.to_dict()[0]["tensor-spec"]["shape"] == (-1, 4)
    (version,) = client.search_model_versions(f"name = '{REGISTERED}'")
    assert version.run_id == run.info.run_id and version.version == "1"
    registered = mlflow.pytorch.load_model(f"models:/{REGISTERED}/1")
    assert torch.equal(registered(observations), actions)
    # They act as the trained parameters do, not as any network of the right shapes would:
    # as logged, and as hts-rl evaluate loads them.
    assert_acts_as_trained(policy, logits, trained_policy, untrained_policy)
    assert_acts_as_trained(registered, logits, trained_policy, untrained_policy)
    loaded = load_policy(
        f"runs:/{run.info.run_id}/model", tracking_uri=client.tracking_uri, sample=True
    ).policy
    assert_acts_as_trained(loaded, loaded.logits, trained_policy, untrained_policy)


def test_evaluate_a_model_uri_logs_a_nested_run(fitted, capsys):
    client, run, trained_policy, _ = fitted
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", client.tracking_uri)
        source = f"runs:/{run.info.run_id}/model"
        assert main(["evaluate", source, "--episodes", "3", "--seed", "1"]) == 0
    assert "over 3 episodes, greedy actions" in capsys.readouterr().out
    (child,) = child_runs(client, run)
    metrics = child.data.metrics
    assert metrics["eval/episodes"] == 3
    returns = [v for _, v in metric_steps(client, child.info.run_id, "eval/episode_return")]
    assert len(returns) == 3 and all(math.isfinite(r) and r >= 1 for r in returns)
    # The episodes the trained parameters play, greedily, in the env seeded alike.
    expected, _, _ = run_episodes(
        trained_policy, env_factory("CartPole-v1"), episodes=3, greedy=True, seed=1
    )
    assert returns == expected
    assert metrics["eval/return_mean"] == pytest.approx(sum(returns) / 3)
    mean = metrics["eval/return_mean"]
    std = math.sqrt(sum((r - mean) ** 2 for r in returns) / 3)
    assert metrics["eval/return_std"] == pytest.approx(std)
    assert child.data.params["actions"] == "greedy"
    assert child.data.params["source"] == source


class _RunsCodeWhenLoaded(torch.nn.Module):
    """A model whose unpickling would run ``exec``, writing the file ``marker``."""

    def __init__(self, marker: Path):
        super().__init__()
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def test_evaluate_refuses_a_pickled_model_and_runs_nothing_from_it(trained, capsys, tmp_path):
    client, _ = trained
    marker = tmp_path / "ran"
    mlflow.set_tracking_uri(client.tracking_uri)
    with mlflow.start_run(experiment_id=client.get_experiment_by_name("hts-rl").experiment_id):
        info = mlflow.pytorch.log_model(
            _RunsCodeWhenLoaded(marker),
            name="pickled",
            serialization_format="pickle",
            metadata={"env_id": "CartPole-v1"},
            pip_requirements=["torch"],
        )
    assert not marker.exists()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", client.tracking_uri)
        assert main(["evaluate", info.model_uri, "--no-mlflow"]) == 2
    error = capsys.readouterr().err
    assert f"{info.model_uri} cannot be loaded without running code in it" in error
    assert "pickle" in error
    assert not marker.exists()
