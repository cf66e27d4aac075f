"""The logger reads the tracking URI when it is made, and says what to do with a wrong run."""

from __future__ import annotations

import pytest
from lightning import Callback

from hts_lightning import PPO
from hts_lightning.tracking import MLflowLogger
from tests.conftest import quiet_trainer


def test_the_uri_is_read_when_the_logger_is_made_not_at_import(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # not contacted here
    assert MLflowLogger().tracking_uri == "http://127.0.0.1:9"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    # The embedded default, made absolute so that the run is found again from anywhere.
    assert MLflowLogger().tracking_uri == f"sqlite:///{tmp_path}/mlflow.db"
    explicit = MLflowLogger(tracking_uri="sqlite:///mlflow.db")
    assert explicit.tracking_uri == f"sqlite:///{tmp_path}/mlflow.db"
    assert MLflowLogger().save_dir == "runs"  # where checkpoints go


def test_continuing_a_run_that_is_not_in_the_store_says_how_to_fix_it(tmp_path):
    logger = MLflowLogger(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", run_id="0" * 32)
    with pytest.raises(ValueError, match="is not in the store") as error:
        logger.log_metrics({"perf/fps": 1.0}, step=1)
    assert "MLFLOW_TRACKING_URI" in str(error.value) and "run_id=null" in str(error.value)


def _history(logger, name):
    client = logger.experiment
    return [(m.step, m.value) for m in client.get_metric_history(logger.run_id, name)]


def test_metrics_are_buffered_and_all_reach_the_store_in_order_when_the_run_ends(tmp_path):
    logger = MLflowLogger(
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
        save_dir=str(tmp_path),
        metrics_interval=3600,
    )
    for step in range(1, 1201):  # more points than one log_batch takes (1000)
        logger.log_metrics({"perf/frames": float(step), "time/update": 0.5}, step=step)
    # The first call writes at once; the rest wait for the interval, a checkpoint or the end.
    assert _history(logger, "perf/frames") == [(1, 1.0)]
    logger.finalize("success")
    assert _history(logger, "perf/frames") == [(s, float(s)) for s in range(1, 1201)]
    assert len(_history(logger, "time/update")) == 1200
    assert logger.experiment.get_run(logger.run_id).info.status == "FINISHED"


class _FailAt(Callback):
    def __init__(self, batch_idx):
        self.batch_idx = batch_idx

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if batch_idx == self.batch_idx:
            raise RuntimeError("a failure in the middle of the run")


def test_the_metrics_before_a_crash_reach_the_store_and_the_run_is_failed(tmp_path):
    fail = _FailAt(3)
    logger = MLflowLogger(
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
        save_dir=str(tmp_path),
        log_policy=False,
        metrics_interval=3600,
    )
    module = PPO(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=0,
        sync_interval=16,
        total_frames=8 * 64,
        epochs=1,
        minibatches=1,
    )
    trainer = quiet_trainer(fail, logger=logger)
    with pytest.raises(RuntimeError, match="middle of the run"):
        trainer.fit(module)
    assert [s for s, _ in _history(logger, "perf/frames")] == [64, 128, 192]
    assert logger.experiment.get_run(logger.run_id).info.status == "FAILED"
