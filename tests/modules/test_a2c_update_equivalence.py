"""The A2C module's update is Stable-Baselines3's A2C update, number for number.

SB3's ``A2C.train`` (stable_baselines3/a2c/a2c.py, 2.9.2): the policy loss on the raw
advantages, ``vf_coef`` x the mean squared error to the returns (advantages + the values that
collected the batch), ``ent_coef`` x the negative mean entropy, the gradient's norm clipped,
one optimizer step; OpenAI baselines' A2C is the same with TensorFlow's RMSprop. Written here
in plain PyTorch on a copy of the module's networks: from the same initial weights, on the
batch the module trained on, both end at the same parameters (to float rounding). The Pong A2C
recipe (shared trunk, TensorFlow's RMSprop, 1-lambda returns) is the setting tested.
"""

from __future__ import annotations

import pytest
import torch
from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

from benchmarks.common import plain_ppo
from hts_lightning import A2C
from tests.conftest import first_batch_keeper, quiet_trainer


def _sb3_a2c_update(nets, optimizer, batch, *, gamma, entropy_coef, value_coef, max_grad_norm):
    advantage, returns = plain_ppo.advantages(nets, batch, gamma, lmbda=1.0)
    obs = batch["observation"].flatten(0, 1)
    action = batch["action"].flatten(0, 1).argmax(-1, keepdim=True)
    features = nets.trunk(obs)
    log_probs = torch.log_softmax(nets.actor_head(features), -1)
    value = nets.critic_head(features).squeeze(-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    policy_loss = -(advantage.flatten() * log_probs.gather(-1, action).squeeze(-1)).mean()
    value_loss = torch.nn.functional.mse_loss(returns.flatten(), value)
    loss = policy_loss + entropy_coef * -entropy.mean() + value_coef * value_loss
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(nets.parameters()), max_grad_norm)
    optimizer.step()


@pytest.mark.parametrize("orthogonal_init", [True, False])
def test_one_a2c_update_equals_stable_baselines3s(orthogonal_init):
    settings = dict(gamma=0.99, entropy_coef=0.01, value_coef=0.5, max_grad_norm=0.5)
    module = A2C(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=0,
        sync_interval=5,
        total_frames=20,
        seed=3,
        shared_trunk=True,
        optimizer="rmsprop_tf",
        orthogonal_init=orthogonal_init,
        lr=1e-2,  # larger than the recipe's 7e-4: a wrong term moves the parameters visibly
        gae_lambda=1.0,
        **settings,
    )
    nets = plain_ppo.networks(module.model)  # the initial weights, copied before training
    first = first_batch_keeper()
    quiet_trainer(first).fit(module)
    assert module.updates == 1

    optimizer = RMSpropTFLike(list(nets.parameters()), lr=1e-2, alpha=0.99, eps=1e-5)
    before = [p.detach().clone() for p in nets.parameters()]
    _sb3_a2c_update(nets, optimizer, first.batch, **settings)

    trained = plain_ppo.networks(module.model)
    moved = 0.0
    for start, expected, actual in zip(
        before, nets.parameters(), trained.parameters(), strict=True
    ):
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-7)
        moved = max(moved, float((expected - start).abs().max().detach()))
    # Not vacuous: TF's RMSprop's first step is about lr x the gradient (its running square
    # starts at 1), ~2e-3 here, well above the tolerance.
    assert moved > 1e-3
