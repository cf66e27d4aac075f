"""ACKTR on the shared skeleton: K-FAC statistics from the Fisher pass, KL-clipped steps."""

from __future__ import annotations

import copy

import torch
from lightning import Callback
from torch import nn

from hts_lightning import ACKTR
from tests.conftest import quiet_trainer
from tests.optim.helpers import assert_same


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
    assert any(
        not torch.equal(b, p) for b, p in zip(before, module.model.parameters(), strict=True)
    )
    assert module.gradient_mode == "delayed"


class _CheckpointAt(Callback):
    """Saves a checkpoint after update ``at`` (mid-run, as ModelCheckpoint does), with deep
    copies of the K-FAC state and the Fisher stream at that moment."""

    def __init__(self, path, at: int):
        self.path, self.at = path, at
        self.optimizer_state = self.fisher_rng = None

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if module.updates == self.at:
            trainer.save_checkpoint(self.path)
            self.optimizer_state = copy.deepcopy(module.optimizers().optimizer.state_dict())
            self.fisher_rng = module._fisher_rng.get_state()


class _StateAtStart(Callback):
    """The module's K-FAC state and Fisher stream once Lightning has restored a checkpoint."""

    def on_train_start(self, trainer, module):
        self.updates = module.updates
        self.optimizer_state = copy.deepcopy(module.optimizers().optimizer.state_dict())
        self.fisher_rng = module._fisher_rng.get_state()
        trainer.should_stop = True


def test_checkpoint_restores_the_kfac_state_and_the_fisher_stream(tmp_path):
    kwargs = dict(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=0,
        sync_interval=8,
        total_frames=4 * 8 * 5,
        inv_update_interval=2,
    )
    path = tmp_path / "mid.ckpt"
    saver = _CheckpointAt(path, at=3)
    quiet_trainer(saver, default_root_dir=tmp_path).fit(ACKTR(**kwargs))
    kfac = saver.optimizer_state["kfac"]
    assert kfac["steps"] == 3 and kfac["factors"] and kfac["eigen"]
    fresh_rng = torch.Generator().manual_seed(1)  # seed 0 + 1, as ACKTR seeds it
    assert not torch.equal(saver.fisher_rng, fresh_rng.get_state())
    checkpoint = torch.load(path, weights_only=True)
    assert_same(checkpoint["optimizer_states"][0], saver.optimizer_state)
    assert torch.equal(checkpoint["hts_acktr"]["fisher_rng"], saver.fisher_rng)
    assert checkpoint["hts_progress"]["updates"] == 3  # the base class's entry is kept

    start = _StateAtStart()
    quiet_trainer(start, default_root_dir=tmp_path).fit(ACKTR(**kwargs), ckpt_path=path)
    assert start.updates == 3
    assert_same(start.optimizer_state, saver.optimizer_state)
    assert torch.equal(start.fisher_rng, saver.fisher_rng)
