"""A2C's loss: the value loss reaches a shared trunk, and separate networks keep TorchRL's
numbers bit for bit."""

from __future__ import annotations

import pytest
import torch
from torchrl.objectives import A2CLoss

from hts_lightning import A2C, ACKTR, make_gym_env
from hts_lightning.models import make_actor_critic
from hts_lightning.modules.a2c_loss import SharedTrunkA2CLoss


def _batch(model, rows=16, seed=0):
    """A detached rollout of the model's policy with advantages and value targets, as the
    on-policy skeleton hands it to the loss (the trunk's stored "features" included)."""
    torch.manual_seed(seed)
    env = make_gym_env("CartPole-v1")
    env.set_seed(seed)
    with torch.no_grad():
        data = env.rollout(rows, model.get_policy_operator(), break_when_any_done=False)
    data["advantage"] = torch.randn(rows, 1)
    data["value_target"] = torch.randn(rows, 1)
    return data


def _grads(loss, data, term=None):
    loss.zero_grad(set_to_none=True)
    terms = loss(data.clone())
    total = terms[term] if term else sum(v for k, v in terms.items() if k.startswith("loss_"))
    total.backward()
    return terms, {n: p.grad for n, p in loss.named_parameters() if p.grad is not None}


def test_separate_networks_keep_torchrls_numbers_bitwise():
    torch.manual_seed(0)
    model = make_actor_critic(
        make_gym_env("CartPole-v1").observation_spec,
        make_gym_env("CartPole-v1").action_spec,
        shared_trunk=False,
    )
    actor, critic = model.get_policy_operator(), model.get_value_head()
    options = dict(entropy_coeff=0.01, critic_coeff=0.5, loss_critic_type="l2", functional=False)
    data = _batch(model)
    ours, our_grads = _grads(SharedTrunkA2CLoss(actor, critic, **options), data)
    theirs, their_grads = _grads(A2CLoss(actor, critic, **options), data)
    assert list(ours.keys()) == ["loss_objective", "entropy", "loss_entropy", "loss_critic"]
    for key in list(ours.keys()):
        assert torch.equal(ours[key], theirs[key]), key
    assert our_grads.keys() == their_grads.keys() and len(our_grads) == 12
    for name, grad in our_grads.items():
        assert torch.equal(grad, their_grads[name]), name


def test_the_value_loss_reaches_a_shared_trunk():
    """The critic head's gradient through the trunk equals that of the whole critic run on the
    observations (trunk and head, as a user without the head would pass it)."""
    torch.manual_seed(0)
    env = make_gym_env("CartPole-v1")
    model = make_actor_critic(env.observation_spec, env.action_spec, shared_trunk=True)
    trunk = list(model.module[0].parameters())
    data = _batch(model)
    assert not data["features"].requires_grad  # stored by the rollout, detached
    loss = SharedTrunkA2CLoss(
        model.get_policy_operator(), model.get_value_head(), critic_coeff=0.5, loss_critic_type="l2"
    )
    _grads(loss, data, term="loss_critic")
    reached = [p.grad.clone() for p in trunk]

    model.zero_grad(set_to_none=True)
    value = model.get_value_operator()(data.exclude("features").clone())["state_value"]
    (0.5 * (value - data["value_target"]).pow(2).mean()).backward()
    assert len(trunk) == 4 and all(p.grad.abs().sum() > 0 for p in trunk)
    for got, parameter in zip(reached, trunk, strict=True):
        torch.testing.assert_close(got, parameter.grad, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("algorithm", [A2C, ACKTR])
def test_the_modules_value_loss_reaches_their_shared_trunk(algorithm):
    """A2C's and ACKTR's own loss, the advantages 0 (no policy gradient): the value loss alone
    gives every trunk parameter a gradient."""
    module = algorithm(
        env_id="CartPole-v1", num_envs=2, num_workers=0, sync_interval=8, shared_trunk=True
    )
    data = _batch(module.model, rows=16)
    data["advantage"] = torch.zeros(16, 1)
    losses = module.loss_module.lean_loss(data)
    assert losses["loss_objective"] == 0 and losses["loss_critic"] > 0
    losses["loss_critic"].backward()
    trunk = list(module.model.module[0].parameters())
    assert len(trunk) == 4 and all(p.grad.abs().sum() > 0 for p in trunk)


def test_torchrls_own_a2c_loss_still_leaves_a_shared_trunk_out():
    """Why SharedTrunkA2CLoss exists: TorchRL's A2CLoss gives a critic head on a shared trunk
    the batch's stored features, so its value loss gives the trunk no gradient. When this
    fails, TorchRL feeds the head the actor's pass and the subclass can go."""
    torch.manual_seed(0)
    env = make_gym_env("CartPole-v1")
    model = make_actor_critic(env.observation_spec, env.action_spec, shared_trunk=True)
    loss = A2CLoss(
        model.get_policy_operator(), model.get_value_head(), critic_coeff=0.5, functional=False
    )
    _grads(loss, _batch(model), term="loss_critic")
    assert all(p.grad is None for p in model.module[0].parameters())
