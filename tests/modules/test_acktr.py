"""ACKTR on the shared skeleton: K-FAC statistics from the Fisher pass, KL-clipped steps."""

from __future__ import annotations

import torch
from lightning import Callback
from torch import nn

from hts_lightning import ACKTR
from tests.conftest import quiet_trainer


class _Steps(Callback):
    def __init__(self):
        self.kl_scales = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.kl_scales.append(module.optimizers().optimizer.last_kl_scale)


def test_acktr_records_factors_for_every_layer_and_takes_kl_clipped_steps():
    module = ACKTR(
        env_id="CartPole-v1", num_envs=4, num_workers=0, sync_interval=16, total_frames=4 * 16 * 4
    )
    before = [p.detach().clone() for p in module.model.parameters()]
    steps = _Steps()
    quiet_trainer(steps).fit(module)
    kfac = module.optimizers().optimizer
    linear = {n for n, m in module.model.named_modules() if isinstance(m, nn.Linear)}
    assert set(kfac.factors) == linear
    for name, layer in kfac.layers.items():
        width = layer.in_features + 1
        assert kfac.factors[name]["A"].shape == (width, width)
        assert kfac.factors[name]["G"].shape == (layer.out_features,) * 2
    assert len(steps.kl_scales) == 4 and all(0 < s <= 1 for s in steps.kl_scales)
    assert any(not torch.equal(b, p) for b, p in zip(before, module.model.parameters()))
    assert module.gradient_mode == "delayed"
