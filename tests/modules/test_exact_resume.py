"""Exact resume: stopped by a signal and resumed from last.ckpt, a run ends with the parameters
and the logged metrics of an uninterrupted one, bitwise."""

from __future__ import annotations

import pytest
import torch
from lightning import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers.logger import Logger
from lightning.pytorch.utilities.exceptions import SIGTERMException

from hts_lightning import A2C, ACKTR, PPO
from hts_lightning.callbacks import StopOnSignal
from tests.conftest import worker_processes
from tests.strategies.ddp_run import _InterruptAfter

# Wall-clock metrics differ between any two runs.
_TIMING = ("perf/fps", "time/wait_for_batch", "time/update")


class _Recorder(Logger):
    """Keeps every logged (step, metrics) in memory."""

    def __init__(self):
        super().__init__()
        self.rows: list[tuple[int, dict[str, float]]] = []

    name = "recorder"
    version = "0"

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        return None

    def log_metrics(self, metrics, step=None) -> None:
        kept = {k: v for k, v in metrics.items() if k not in _TIMING and k != "epoch"}
        self.rows.append((step, kept))


def _trainer(tmp_path, logger, *callbacks) -> Trainer:
    return Trainer(
        max_epochs=1,
        logger=logger,
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ModelCheckpoint(dirpath=tmp_path, save_last=True), StopOnSignal(), *callbacks],
    )


def _assert_resume_is_exact(make_module, tmp_path, stop_after: int) -> list:
    uninterrupted, expected = make_module(), _Recorder()
    _trainer(tmp_path / "uninterrupted", expected).fit(uninterrupted)

    interrupted, got = make_module(), _Recorder()
    with pytest.raises(SIGTERMException):
        _trainer(tmp_path / "resumed", got, _InterruptAfter(stop_after)).fit(interrupted)
    assert interrupted.updates == stop_after
    assert worker_processes() == []
    resumed = make_module()
    _trainer(tmp_path / "resumed", got).fit(resumed, ckpt_path=tmp_path / "resumed" / "last.ckpt")

    assert resumed.updates == uninterrupted.updates
    assert list(resumed.state_dict()) == list(uninterrupted.state_dict())
    for (name, a), b in zip(
        uninterrupted.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), f"{name} differs"
    assert got.rows == expected.rows
    return expected.rows


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", [A2C, PPO, ACKTR])
def test_cartpole_resume_is_exact(algorithm, tmp_path):
    def make():
        extra = {"epochs": 2, "minibatches": 2} if algorithm is PPO else {}
        return algorithm(
            env_id="CartPole-v1",
            num_envs=4,
            num_workers=2,
            sync_interval=16,
            total_frames=4 * 16 * 8,
            seed=5,
            **extra,
        )

    rows = _assert_resume_is_exact(make, tmp_path, stop_after=3)
    # Not vacuous: the run learned and finished episodes, lag one from the second batch on.
    assert [step for step, _ in rows] == [64 * k for k in range(1, 9)]
    assert rows[0][1]["perf/policy_lag"] == 0 and rows[4][1]["perf/policy_lag"] == 1
    assert any("rollout/episode_return" in metrics for _, metrics in rows[4:])


@pytest.mark.slow
def test_resume_without_overlap_is_exact(tmp_path):
    """Stopped between a batch's update and the start of the next (nothing in flight)."""

    def make():
        return PPO(
            env_id="CartPole-v1",
            num_envs=4,
            num_workers=2,
            sync_interval=16,
            total_frames=4 * 16 * 6,
            seed=5,
            epochs=2,
            minibatches=2,
            overlap=False,
        )

    rows = _assert_resume_is_exact(make, tmp_path, stop_after=3)
    assert [metrics["perf/policy_lag"] for _, metrics in rows] == [0] * 6


@pytest.mark.slow
def test_atari_resume_is_exact(tmp_path):
    def make():
        return A2C(
            env_id="ALE/Pong-v5",
            num_envs=2,
            num_workers=1,
            sync_interval=8,
            total_frames=2 * 8 * 5,
            seed=1,
        )

    rows = _assert_resume_is_exact(make, tmp_path, stop_after=2)
    assert len(rows) == 5
