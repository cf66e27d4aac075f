"""The same module trains with TorchRL's own collectors as its data source."""

from __future__ import annotations

import pytest
import torch
from lightning import Callback
from lightning.pytorch.callbacks import ModelCheckpoint

from hts_lightning import A2C, PPO
from tests.conftest import quiet_trainer


class _Batches(Callback):
    def __init__(self):
        self.shapes, self.keys = [], []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.shapes.append(batch.numel())
        self.keys.append(set(batch.keys()))


@pytest.mark.parametrize(
    ("kind", "cls"), [("sync", A2C), ("multi_sync", PPO), ("multi_async", A2C)]
)
def test_trainer_runs_with_torchrl_baseline_collector(kind, cls):
    extra = {} if cls is A2C else dict(epochs=1, minibatches=2)
    module = cls(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=2,
        sync_interval=8,
        total_frames=3 * 32,
        collector=kind,
        **extra,
    )
    before = [p.detach().clone() for p in module.parameters()]
    batches = _Batches()
    quiet_trainer(batches).fit(module)
    assert module.updates == 3
    assert module.frames == 3 * 32
    assert batches.shapes == [32, 32, 32]
    assert all("policy_version" not in keys for keys in batches.keys)
    assert any(not torch.equal(b, p) for b, p in zip(before, module.parameters(), strict=True))
    assert "perf/policy_lag" not in module.last_metrics


def test_run_bounded_by_max_steps_keeps_lag_one():
    """Without total_frames the collector is sized from max_steps, so Lightning never fetches
    a batch ahead of the update (which would make the lag 2)."""
    module = PPO(
        env_id="CartPole-v1", num_envs=2, num_workers=1, sync_interval=8, epochs=1, minibatches=2
    )
    lags = []

    class _Lag(Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            lags.append(module.last_metrics["perf/policy_lag"])

    quiet_trainer(_Lag(), max_epochs=None, max_steps=8).fit(module)
    assert module.updates == 4 and module.global_step == 8
    assert lags == [0.0, 1.0, 1.0, 1.0]


def test_unbounded_run_is_refused_with_the_fix():
    module = A2C(env_id="CartPole-v1", num_envs=2, num_workers=1, sync_interval=8)
    trainer = quiet_trainer()
    with pytest.raises(ValueError, match="set model total_frames"):
        trainer.fit(module)


@pytest.mark.parametrize("kind", ["sync", "multi_sync", "multi_async"])
def test_a_run_stopped_by_max_steps_writes_its_last_checkpoint(kind, tmp_path):
    """Lightning's ModelCheckpoint saves the last checkpoint at the end of training, after the
    collector has shut down: the collector's state must still be there to save."""
    module = PPO(
        env_id="CartPole-v1",
        num_envs=2,
        num_workers=1,
        sync_interval=8,
        epochs=2,
        minibatches=2,
        collector=kind,
    )
    last = ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_train_steps=50)
    quiet_trainer(last, max_epochs=None, max_steps=3, enable_checkpointing=True).fit(module)
    assert module.updates == 1 and module.global_step == 4
    saved = torch.load(tmp_path / "last.ckpt", map_location="cpu", weights_only=False)
    assert saved["global_step"] == 4 and saved["hts_progress"]["updates"] == 1
    assert saved["hts_collector"] is not None
