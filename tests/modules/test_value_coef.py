"""value_coef=0 means no critic term: the critic gets no gradient from the loss."""

from __future__ import annotations

import pytest
import torch

from hts_lightning import A2C, PPO
from tests.conftest import quiet_trainer


@pytest.mark.parametrize("cls", [PPO, A2C])
def test_value_coef_zero_leaves_the_critic_untouched(cls, monkeypatch):
    extra = {"epochs": 2, "minibatches": 2} if cls is PPO else {}
    module = cls(
        env_id="CartPole-v1",
        num_envs=2,
        num_workers=0,
        sync_interval=8,
        total_frames=2 * 16,
        shared_trunk=False,  # separate networks: the critic's parameters are its own
        value_coef=0.0,
        **extra,
    )
    critic = dict(module.critic.named_parameters())
    assert {id(p) for p in critic.values()}.isdisjoint(map(id, module.actor.parameters()))
    critic_before = {n: p.detach().clone() for n, p in critic.items()}
    actor_before = [p.detach().clone() for p in module.actor.parameters()]
    critic_losses = []
    step = module.gradient_step

    def recorded(data):
        out = step(data)
        critic_losses.append(float(out["loss_critic"]))
        return out

    monkeypatch.setattr(module, "gradient_step", recorded)
    quiet_trainer().fit(module)
    assert module.updates == 2
    assert len(critic_losses) == 2 * (4 if cls is PPO else 1)
    assert critic_losses == [0.0] * len(critic_losses)
    for name, p in critic.items():
        assert torch.equal(p, critic_before[name]), f"critic {name} changed"
    assert any(
        not torch.equal(p, q) for p, q in zip(module.actor.parameters(), actor_before, strict=True)
    )
