"""Advantages as the modules compute them (TorchRL's GAE, and OneCallGAE), against hand-computed
values."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.modules import ProbabilisticActor
from torchrl.modules.distributions import OneHotCategorical
from torchrl.objectives import A2CLoss, ValueEstimators

from hts_lightning.modules.advantages import OneCallGAE


class _FirstFeature(nn.Module):
    def forward(self, observation):
        return observation[..., :1]


def _loss_with_gae(gamma, lmbda):
    actor = ProbabilisticActor(
        TensorDictModule(nn.Linear(1, 2), ["observation"], ["logits"]),
        in_keys=["logits"],
        distribution_class=OneHotCategorical,
    )
    critic = TensorDictModule(_FirstFeature(), ["observation"], ["state_value"])
    loss = A2CLoss(actor, critic)
    loss.make_value_estimator(ValueEstimators.GAE, gamma=gamma, lmbda=lmbda)
    return loss


def _batch(values, next_values, rewards, terminated, truncated):
    column = lambda xs, dtype=torch.float32: torch.tensor(xs, dtype=dtype).reshape(1, -1, 1)  # noqa: E731
    done = [a or b for a, b in zip(terminated, truncated, strict=True)]
    return TensorDict(
        observation=column(values),
        next=TensorDict(
            observation=column(next_values),
            reward=column(rewards),
            terminated=column(terminated, torch.bool),
            truncated=column(truncated, torch.bool),
            done=column(done, torch.bool),
            batch_size=[1, len(values)],
        ),
        batch_size=[1, len(values)],
    )


@pytest.mark.parametrize("one_call", [False, True], ids=["torchrl_gae", "one_call_gae"])
def test_gae_bootstraps_on_truncation_and_not_on_termination(one_call):
    """TorchRL's GAE, and the training step's OneCallGAE (the critic once, then TorchRL's GAE
    on the values)."""
    gamma, lmbda = 0.9, 0.8
    # t=1 ends an episode by truncation (time limit): bootstrap from the final observation's
    # value 5 and cut the trace; t=3 ends one by termination: no bootstrap.
    batch = _batch(
        values=[1.0, 2.0, 3.0, 4.0],
        next_values=[2.0, 5.0, 4.0, 6.0],
        rewards=[1.0, 0.0, 2.0, 1.0],
        terminated=[False, False, False, True],
        truncated=[False, True, False, False],
    )
    estimator = _loss_with_gae(gamma, lmbda).value_estimator
    with torch.no_grad():
        (OneCallGAE(estimator) if one_call else estimator)(batch)
    delta = [1 + 0.9 * 2 - 1, 0 + 0.9 * 5 - 2, 2 + 0.9 * 4 - 3, 1 - 4]
    a3 = delta[3]
    a2 = delta[2] + gamma * lmbda * a3
    a1 = delta[1]
    a0 = delta[0] + gamma * lmbda * a1
    expected = torch.tensor([a0, a1, a2, a3])
    torch.testing.assert_close(batch["advantage"].flatten(), expected)
    torch.testing.assert_close(
        batch["value_target"].flatten(), expected + torch.tensor([1.0, 2.0, 3.0, 4.0])
    )
    torch.testing.assert_close(batch["next", "state_value"].flatten(), torch.tensor([2.0, 5, 4, 6]))


def test_gae_with_lambda_one_is_the_discounted_return_minus_value():
    rewards = [1.0, 1.0, 1.0]
    batch = _batch(
        values=[0.0, 0.0, 0.0],
        next_values=[0.0, 0.0, 10.0],
        rewards=rewards,
        terminated=[False, False, False],
        truncated=[False, False, False],
    )
    with torch.no_grad():
        _loss_with_gae(0.5, 1.0).value_estimator(batch)
    # The batch ends mid-episode: the last step bootstraps from V(s_3) = 10.
    expected = [1 + 0.5 * (1 + 0.5 * (1 + 0.5 * 10)), 1 + 0.5 * (1 + 0.5 * 10), 1 + 0.5 * 10]
    torch.testing.assert_close(batch["advantage"].flatten(), torch.tensor(expected))


def test_gae_with_zero_discount_is_the_reward_minus_value():
    batch = _batch([1.0, 2.0], [3.0, 4.0], [0.5, 0.25], [False, True], [False, False])
    with torch.no_grad():
        _loss_with_gae(0.0, 0.95).value_estimator(batch)
    torch.testing.assert_close(batch["advantage"].flatten(), torch.tensor([-0.5, -1.75]))
