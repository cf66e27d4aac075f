"""The training step's advantages (OneCallGAE: the critic once over observations and next
observations, TorchRL's GAE on the values) against the loss's own TorchRL GAE: bit for bit
with MLP and players' critics; a critic with convolutions once per distinct observation, in
chunks (to float rounding: under vmap TorchRL's call differs from any direct one by ~1 ulp)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import Composite, OneHot, Unbounded
from torchrl.objectives.value import GAE

from hts_lightning import PPO
from hts_lightning.models import make_actor_critic
from hts_lightning.modules.advantages import OneCallGAE


def _random_batch(observation_shape, envs=3, steps=7, dtype=torch.float32, seed=0):
    """A [envs, steps] batch with terminations and truncations at known places."""
    generator = torch.Generator().manual_seed(seed)

    def observations():
        if dtype == torch.uint8:
            return torch.randint(0, 256, (envs, steps, *observation_shape), generator=generator)
        return torch.randn(envs, steps, *observation_shape, generator=generator)

    terminated = torch.zeros(envs, steps, 1, dtype=torch.bool)
    truncated = torch.zeros(envs, steps, 1, dtype=torch.bool)
    terminated[0, 2] = terminated[1, 5] = True
    truncated[0, 4] = truncated[2, 1] = truncated[2, 6] = True
    return TensorDict(
        observation=observations().to(dtype),
        next=TensorDict(
            observation=observations().to(dtype),
            reward=torch.randn(envs, steps, 1, generator=generator),
            terminated=terminated,
            truncated=truncated,
            done=terminated | truncated,
            batch_size=[envs, steps],
        ),
        batch_size=[envs, steps],
    )


def _assert_same_as_estimator(estimator, batch):
    """OneCallGAE's outputs equal, bit for bit, the estimator's (TorchRL: the critic under
    vmap)."""
    estimate = OneCallGAE(estimator)
    assert estimate.one_call
    with torch.no_grad():
        expected = estimator(batch.clone())
        got = estimate(batch.clone())
    for key in ("advantage", "value_target", "state_value", ("next", "state_value")):
        assert torch.equal(got[key], expected[key]), key
    assert got["advantage"].abs().sum() > 0


@pytest.mark.parametrize("shared_trunk", [True, False])
def test_mlp_critic_bitwise_as_the_loss_estimator(shared_trunk):
    module = PPO(
        env_id="CartPole-v1",
        num_envs=3,
        num_workers=0,
        sync_interval=7,
        seed=1,
        minibatches=1,
        shared_trunk=shared_trunk,
        gamma=0.98,
        gae_lambda=0.8,
    )
    assert module._advantages.one_call
    _assert_same_as_estimator(module.loss_module.value_estimator, _random_batch((4,)))


def _trajectory_batch(observation_shape, envs=3, steps=300, resets=((0, 40), (2, 299)), seed=0):
    """A [envs, steps] uint8 batch laid out as a collector writes one: each step's next
    observation is the following step's observation, except after the ``resets`` (env, step),
    where the following step starts from a new frame."""
    generator = torch.Generator().manual_seed(seed)
    frames = torch.randint(0, 256, (envs, steps + 1, *observation_shape), generator=generator)
    batch = _random_batch(observation_shape, envs, steps, seed=seed)
    batch["observation"] = frames[:, :-1].to(torch.uint8)
    batch["next", "observation"] = frames[:, 1:].to(torch.uint8).clone()
    for env, step in resets:
        if step + 1 < steps:
            batch["observation"][env, step + 1] = torch.randint(
                0, 256, observation_shape, generator=generator
            )
    return batch


def test_pixel_critic_once_per_distinct_observation():
    # The Nature CNN on uint8 frames (a small image keeps the test fast).
    spec = Composite(observation=Unbounded((4, 44, 44), dtype=torch.uint8))
    critic = make_actor_critic(spec, OneHot(6)).get_value_operator()
    estimator = GAE(gamma=0.99, lmbda=0.95, value_network=critic)
    estimate = OneCallGAE(estimator)
    assert estimate.one_call and estimate.pixels
    rows = []
    critic.register_forward_hook(lambda module, args, out: rows.append(out.batch_size[0]))
    batch = _trajectory_batch((4, 44, 44))
    with torch.no_grad():
        got = estimate(batch.clone())
        assert sum(rows) == 3 * 300 + 3 + 1  # every observation, each env's last next one,
        assert max(rows) == 64  # and the next observation of the reset at (0, 40)
        again = estimate(batch.clone())
        expected = estimator(batch.clone())
    for key in ("advantage", "value_target", "state_value", ("next", "state_value")):
        assert torch.equal(got[key], again[key]), key  # deterministic
        torch.testing.assert_close(got[key], expected[key], rtol=0, atol=1e-6)
    # A next observation that follows takes the following step's value itself.
    assert torch.equal(got["next", "state_value"][1, :-1], got["state_value"][1, 1:])
    assert not torch.equal(got["next", "state_value"][0, 40], got["state_value"][0, 41])
    assert got["advantage"].abs().sum() > 0


def test_players_critic_bitwise_as_the_loss_estimator():
    # Football's several controlled players: one team value, the mean over the players.
    spec = Composite(observation=Unbounded((3, 115)))
    critic = make_actor_critic(spec, OneHot(19, shape=(3, 19))).get_value_operator()
    estimator = GAE(gamma=0.993, lmbda=0.95, value_network=critic)
    _assert_same_as_estimator(estimator, _random_batch((3, 115)))


def test_other_estimators_are_called_as_they_are():
    critic = make_actor_critic(Composite(observation=Unbounded((4,))), OneHot(2))
    estimator = GAE(gamma=0.9, lmbda=0.9, value_network=critic.get_value_operator(), shifted=True)
    estimate = OneCallGAE(estimator)
    assert not estimate.one_call
    batch = _random_batch((4,))
    with torch.no_grad():
        assert torch.equal(estimate(batch.clone())["advantage"], estimator(batch)["advantage"])


def test_training_step_advantages_are_the_estimator_s():
    """The module's training step writes the loss estimator's advantages (bitwise)."""
    module = PPO(
        env_id="CartPole-v1", num_envs=3, num_workers=0, sync_interval=7, seed=2, minibatches=1
    )
    batch = _random_batch((4,))
    with torch.no_grad():
        expected = module.loss_module.value_estimator(batch.clone())
        module._advantages(batch)
    assert torch.equal(batch["advantage"], expected["advantage"])
    assert torch.equal(batch["value_target"], expected["value_target"])
