"""The training modules' optimizer choice: Adam (default), PyTorch's RMSprop with
Stable-Baselines3's A2C settings or TensorFlow's (as baselines' Atari A2C); ACKTR keeps K-FAC."""

from __future__ import annotations

import pytest
import torch

from hts_lightning import A2C, ACKTR, PPO
from tests.conftest import quiet_trainer


def _fit(module) -> None:
    quiet_trainer().fit(module)


def _a2c(**kwargs) -> A2C:
    return A2C(env_id="CartPole-v1", num_envs=2, num_workers=0, sync_interval=8,
               total_frames=2 * 8 * 3, seed=4, lr=1e-3, **kwargs)  # fmt: skip


def test_rmsprop_takes_sb3s_settings_and_steps_as_rmsprop_does():
    module = _a2c(optimizer="rmsprop")
    before = {n: p.detach().clone() for n, p in module.loss_module.named_parameters()}
    _fit(module)
    optimizer = module.trainer.optimizers[0]
    assert type(optimizer) is torch.optim.RMSprop
    group = optimizer.param_groups[0]
    assert (group["alpha"], group["eps"], group["lr"], group["momentum"]) == (0.99, 1e-5, 1e-3, 0)
    # Its state is RMSprop's running square average, and the parameters moved.
    state = optimizer.state[next(iter(module.loss_module.parameters()))]
    assert set(state) == {"step", "square_avg"} and int(state["step"]) == 3
    moved = [n for n, p in module.loss_module.named_parameters() if not torch.equal(p, before[n])]
    assert moved
    # Another optimizer, other parameters from the same batches' first gradient on.
    adam = _a2c()
    _fit(adam)
    assert type(adam.trainer.optimizers[0]) is torch.optim.Adam
    assert not torch.equal(
        next(adam.loss_module.parameters()), next(module.loss_module.parameters())
    )


def test_rmsprop_tf_is_tensorflows_whose_first_steps_are_small():
    """TensorFlow's RMSprop (Stable-Baselines3's ``RMSpropTFLike``) starts its running square
    at 1: from the same weights and batches its first updates move the parameters far less
    than PyTorch's, whose first step is ~10x the learning rate per parameter."""
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

    start = _a2c().loss_module.state_dict()

    def displacement(optimizer: str) -> float:
        module = _a2c(optimizer=optimizer)
        _fit(module)
        moved = module.loss_module.state_dict()
        return sum(float((moved[k] - start[k]).abs().sum()) for k in start), module

    tf_moved, tf_module = displacement("rmsprop_tf")
    torch_moved, _ = displacement("rmsprop")
    optimizer = tf_module.trainer.optimizers[0]
    assert type(optimizer) is RMSpropTFLike
    group = optimizer.param_groups[0]
    assert (group["alpha"], group["eps"], group["lr"]) == (0.99, 1e-5, 1e-3)
    assert 0 < tf_moved < 0.2 * torch_moved


def test_an_unknown_optimizer_is_named_with_the_choices():
    with pytest.raises(
        ValueError, match=r"optimizer must be one of \('adam', 'rmsprop', 'rmsprop_tf'\)"
    ):
        PPO(env_id="CartPole-v1", num_envs=2, num_workers=0, optimizer="sgd")


def test_acktr_refuses_another_optimizer():
    with pytest.raises(ValueError, match="ACKTR's optimizer is K-FAC"):
        ACKTR(env_id="CartPole-v1", num_envs=2, num_workers=0, optimizer="rmsprop")
