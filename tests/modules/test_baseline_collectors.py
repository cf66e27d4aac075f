"""The same module trains with TorchRL's own collectors as its data source."""

from __future__ import annotations

import pytest
import torch
from lightning import Callback, Trainer

from hts_lightning import A2C, PPO


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
    Trainer(
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[batches],
    ).fit(module)
    assert module.updates == 3
    assert module.frames == 3 * 32
    assert batches.shapes == [32, 32, 32]
    assert all("policy_version" not in keys for keys in batches.keys)
    assert any(not torch.equal(b, p) for b, p in zip(before, module.parameters()))
    assert "perf/policy_lag" not in module.trainer.callback_metrics
