"""A module across fits and failures: versions stay aligned, workers never outlive an error."""

from __future__ import annotations

import gc
import signal
import weakref

import pytest
from lightning import Callback

from hts_lightning import A2C
from hts_lightning.callbacks import StopOnSignal
from tests.conftest import quiet_trainer, worker_processes


class _Lags(Callback):
    def __init__(self):
        self.lags = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.lags.append(module.last_metrics["perf/policy_lag"])


def test_a_second_fit_continues_with_the_trained_weights_and_lag_one():
    module = A2C(env_id="CartPole-v1", num_envs=2, num_workers=0, sync_interval=8, total_frames=48)
    first, second = _Lags(), _Lags()
    quiet_trainer(first).fit(module)
    quiet_trainer(second).fit(module)  # a new collector, counting versions from 0 again
    assert module.updates == 6
    assert first.lags == second.lags == [0.0, 1.0, 1.0]


class _Explode(Callback):
    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if batch_idx == 1:
            raise RuntimeError("boom")


def test_an_exception_in_training_stops_the_workers():
    module = A2C(env_id="CartPole-v1", num_envs=4, num_workers=2, sync_interval=8, total_frames=320)
    with pytest.raises(RuntimeError, match="boom"):
        quiet_trainer(_Explode()).fit(module)
    assert worker_processes() == []


def test_a_finished_fit_leaves_the_signal_handlers_and_frees_the_run():
    """Lightning's teardown puts back the SIGTERM handler it found before on_fit_end, where
    StopOnSignal used to re-install Lightning's own: left installed after the run, it held
    the trainer, the module and the collector's env snapshots (ale_py's then printed ~40
    "leaked instance" lines at hts-rl's exit)."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    module = A2C(env_id="CartPole-v1", num_envs=2, num_workers=0, sync_interval=8, total_frames=32)
    quiet_trainer(StopOnSignal()).fit(module)
    assert {s: signal.getsignal(s) for s in before} == before
    alive = weakref.ref(module)
    del module
    gc.collect()
    assert alive() is None
