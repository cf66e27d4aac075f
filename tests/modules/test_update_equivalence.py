"""The PPO module's update is PPO: it equals a plain-PyTorch PPO update, number for number.

The plain update (``benchmarks/common/plain_ppo.py``, also the learner benchmark's baseline)
has no Lightning, no TensorDict and no TorchRL loss. From the same initial weights, on the batch
the module trained on, with the module's minibatch order, both end at the same parameters (to
float rounding); a change in the loss terms, the advantages or the step would show here.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from benchmarks.common import plain_ppo
from hts_lightning import PPO
from tests.conftest import first_batch_keeper, quiet_trainer, require_module


@pytest.mark.parametrize(
    ("shared_trunk", "entropy_coef", "normalize_advantage"),
    [(True, 0.01, True), (False, 0.0, False)],
)
def test_one_ppo_update_equals_plain_pytorch(shared_trunk, entropy_coef, normalize_advantage):
    kwargs = dict(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=0,
        sync_interval=16,
        total_frames=64,
        seed=3,
        shared_trunk=shared_trunk,
        lr=3e-3,
        gamma=0.98,
        gae_lambda=0.8,
        entropy_coef=entropy_coef,
        value_coef=0.5,
        max_grad_norm=0.5,
        normalize_advantage=normalize_advantage,
        clip_epsilon=0.2,
        epochs=4,
        minibatches=2,
    )
    module = PPO(**kwargs)
    nets = plain_ppo.networks(module.model)  # the initial weights, copied before training
    first = first_batch_keeper()
    quiet_trainer(first).fit(module)
    assert module.updates == 1 and module.global_step == 8

    settings = plain_ppo.PPOSettings(
        epochs=4,
        minibatches=2,
        clip_epsilon=0.2,
        entropy_coef=entropy_coef,
        value_coef=0.5,
        max_grad_norm=0.5,
        gamma=0.98,
        gae_lambda=0.8,
        normalize_advantage=normalize_advantage,
    )
    optimizer = torch.optim.Adam(nets.parameters(), lr=3e-3, eps=1e-5)
    generator = torch.Generator().manual_seed(3 * 1_000_003 + 0)  # PPO.update's order
    before = [p.detach().clone() for p in nets.parameters()]
    clip_fraction = plain_ppo.update(nets, optimizer, first.batch, settings, generator)
    assert clip_fraction > 0.01  # the clipped branch of the surrogate is exercised

    trained = plain_ppo.networks(module.model)
    moved = 0.0
    for start, expected, actual in zip(
        before, nets.parameters(), trained.parameters(), strict=True
    ):
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-6)
        moved = max(moved, float((expected - start).abs().max().detach()))
    assert moved > 1e-4  # the update did move the parameters


def _clip_data(module, seed=0, rows=64):
    """A CartPole minibatch acted on by ``module``, its behaviour log-probabilities moved away
    from the current ones so that the ratio's clip engages."""
    generator = torch.Generator().manual_seed(seed)
    data = module.actor(
        TensorDict(observation=torch.randn(rows, 4, generator=generator), batch_size=[rows])
    )
    data["advantage"] = torch.randn(rows, 1, generator=generator)
    data["value_target"] = torch.randn(rows, 1, generator=generator)
    data["action_log_prob"] = data["action_log_prob"].detach() + 0.3 * torch.randn(
        rows, generator=generator
    )
    return data


@pytest.mark.parametrize("shared_trunk", [True, False])
def test_lean_loss_tensor_path_equals_tensordict_path(shared_trunk):
    """The loss's forward on tensors (our networks' layers called directly, the categorical
    terms from one log_softmax) gives the losses and gradients of TensorDict's get_dist and
    ClipPPOLoss.loss_critic, to float rounding."""
    module = PPO(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=0,
        sync_interval=16,
        total_frames=64,
        seed=5,
        shared_trunk=shared_trunk,
        entropy_coef=0.01,
    )
    loss = module.loss_module
    assert loss._tensor_path is not None  # make_actor_critic's networks take the tensor path
    data = _clip_data(module, rows=32)

    def losses_and_grads():
        loss.zero_grad()
        out = loss(data.clone())
        (out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]).backward()
        return out.detach(), [p.grad.clone() for p in loss.parameters()]

    fast, fast_grads = losses_and_grads()
    tensor_path, loss._tensor_path = loss._tensor_path, None
    slow, slow_grads = losses_and_grads()
    loss._tensor_path = tensor_path
    assert float(fast["clip_fraction"]) > 0
    assert torch.equal(fast["clip_fraction"], slow["clip_fraction"])
    assert torch.equal(fast["loss_critic"], slow["loss_critic"])  # the same layers and sum
    for key in ("loss_objective", "loss_entropy", "kl_approx"):
        torch.testing.assert_close(fast[key], slow[key], rtol=1e-6, atol=1e-7, msg=key)
    for got, expected in zip(fast_grads, slow_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-7)
    assert any(float(g.abs().sum()) > 0 for g in fast_grads)


def test_lean_loss_float_clip_bounds_bitwise_as_tensor_bounds_and_follow_a_schedule():
    """The log-ratio clamp with float bounds gives the bits of ClipPPOLoss's 0-d tensor
    bounds (forward and gradient), and a scheduled clip_epsilon takes effect at once."""
    module = PPO(env_id="CartPole-v1", num_envs=4, num_workers=0, sync_interval=16, seed=1)
    loss = module.loss_module
    data = _clip_data(module)
    log_prob = data["action_log_prob"].detach().unsqueeze(-1) + 0.3
    fractions = []
    for epsilon in (0.2, 0.1):
        loss.clip_epsilon.fill_(epsilon)  # the schedulable buffer, as a scheduler sets it
        low, high = loss._log_ratio_bounds()
        assert (low, high) == (
            float((-loss.clip_epsilon).log1p()),
            float(loss.clip_epsilon.log1p()),
        )
        for bounds in ((low, high), ((-loss.clip_epsilon).log1p(), loss.clip_epsilon.log1p())):
            weight = (log_prob + torch.linspace(-0.5, 0.5, 64).unsqueeze(-1)).requires_grad_()
            clipped = weight.clamp(*bounds)
            (clipped.exp() * data["advantage"]).sum().backward()
            if isinstance(bounds[0], float):
                got = clipped.detach(), weight.grad
            else:
                assert torch.equal(got[0], clipped.detach())
                assert torch.equal(got[1], weight.grad)
        fractions.append(float(loss(data.clone())["clip_fraction"]))
    assert 0 < fractions[0] < fractions[1] < 1  # the tighter clip clips more ratios


def test_lean_loss_takes_an_asymmetric_clip_epsilon_as_clip_ppo_loss():
    """A (low, high) clip_epsilon (TorchRL's clip_epsilon_low / _high buffers): the same
    surrogate as TorchRL's ClipPPOLoss, which the lean loss broke on before."""
    from torchrl.objectives import ClipPPOLoss

    from hts_lightning.modules.ppo_loss import LeanClipPPOLoss

    module = PPO(env_id="CartPole-v1", num_envs=4, num_workers=0, sync_interval=16, seed=2)
    kwargs = dict(clip_epsilon=(0.1, 0.3), entropy_coeff=0.0, critic_coeff=0.5)
    lean = LeanClipPPOLoss(module.actor, module.critic_head, **kwargs)
    reference = ClipPPOLoss(
        module.actor, module.critic_head, functional=False, loss_critic_type="l2", **kwargs
    )
    assert lean._log_ratio_bounds() == (
        float(torch.tensor(-0.1).log1p()),
        float(torch.tensor(0.3).log1p()),
    )
    data = _clip_data(module, seed=3)
    got, expected = lean(data.clone()), reference(data.clone())
    assert 0 < float(got["clip_fraction"]) < 1
    torch.testing.assert_close(
        got["loss_objective"], expected["loss_objective"], rtol=1e-6, atol=1e-7
    )
    torch.testing.assert_close(got["clip_fraction"], expected["clip_fraction"])


def test_lean_loss_per_row_diagnostics_average_to_the_forward_bitwise():
    """The update's loss call (a dict, clip fraction and KL per row) gives forward's terms,
    and ``mean_per_key`` averages the rows of all steps at once to the bits of the per-step
    means averaged over steps (what the update logged before)."""
    from hts_lightning.modules.ppo import mean_per_key

    module = PPO(env_id="CartPole-v1", num_envs=4, num_workers=0, sync_interval=16, seed=4)
    loss = module.loss_module
    steps, expected = [], []
    for seed in range(3):
        data = _clip_data(module, seed=seed)
        lean, out = loss.lean_loss(data.clone()), loss(data.clone())
        assert lean["clip_fraction"].dtype == torch.bool and lean["kl_approx"].shape == (64,)
        assert sorted(lean) == sorted(out.keys())
        for key, value in lean.items():
            assert torch.equal(value.float().mean() if value.dim() else value, out[key]), key
        steps.append({k: v.detach() for k, v in lean.items()})
        expected.append({k: v.detach() for k, v in out.items()})
    means = mean_per_key(steps)
    names = sorted(expected[0])
    per_step = torch.stack([torch.stack([step[k] for k in names]) for step in expected])
    assert list(means) == names
    assert torch.equal(torch.stack(list(means.values())), per_step.mean(0))
    assert 0 < float(means["clip_fraction"]) < 1


def test_value_clipping_is_clip_ppo_losss_and_keeps_the_critic_near_its_start():
    """PPO(clip_value=True): the critic term is TorchRL's ClipPPOLoss's clipped one (the larger
    of the squared errors of the new value and of the value clipped around the batch's), so
    its gradient vanishes where the value moved past the clip toward a farther target."""
    from torchrl.objectives import ClipPPOLoss

    module = PPO(env_id="CartPole-v1", num_envs=4, num_workers=0, sync_interval=16, seed=6,
                 clip_epsilon=0.1, clip_value=True)  # fmt: skip
    loss = module.loss_module
    assert loss._tensor_path is None  # value clipping takes TensorDict's path
    data = _clip_data(module, seed=5)
    with torch.no_grad():
        current = module.critic_head(module.actor(data.clone()))["state_value"]
    data["state_value"] = current + 0.5 * torch.randn(current.shape)  # the start, moved away
    reference = ClipPPOLoss(module.actor, module.critic_head, functional=False,
                            loss_critic_type="l2", clip_epsilon=0.1, clip_value=0.1,
                            critic_coeff=module.hparams.value_coef)  # fmt: skip
    got, expected = loss(data.clone()), reference(data.clone())
    torch.testing.assert_close(got["loss_critic"], expected["loss_critic"])
    clipped = data["state_value"] + (current - data["state_value"]).clamp(-0.1, 0.1)
    by_hand = torch.maximum(
        (current - data["value_target"]) ** 2, (clipped - data["value_target"]) ** 2
    ).mean()
    torch.testing.assert_close(got["loss_critic"], module.hparams.value_coef * by_hand)
    unclipped = module.hparams.value_coef * ((current - data["value_target"]) ** 2).mean()
    assert float(got["loss_critic"]) > float(unclipped)  # the clip engaged


def test_minibatch_advantage_normalization_standardizes_each_minibatch():
    plain = PPO(env_id="CartPole-v1", num_envs=4, num_workers=0, sync_interval=16, seed=7)
    normalized = PPO(env_id="CartPole-v1", num_envs=4, num_workers=0, sync_interval=16,
                     seed=7, normalize_minibatch_advantage=True)  # fmt: skip
    data = _clip_data(plain, seed=8)
    data["advantage"] = 3.0 + 2.0 * data["advantage"]
    standardized = data.clone()
    advantage = data["advantage"]
    standardized["advantage"] = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    got = normalized.loss_module(data.clone())["loss_objective"]
    expected = plain.loss_module(standardized)["loss_objective"]
    torch.testing.assert_close(got, expected)
    assert not torch.allclose(got, plain.loss_module(data.clone())["loss_objective"])


def test_plain_loop_prints_every_finished_episode_return(capsys):
    """The single-file loop the learning studies' ``plain`` cells run: each update once, and
    each finished episode's raw return, reset to 0 for the next (CartPole pays 1 a step, so a
    return is an episode's length: a whole number from 8, the shortest fall, to 500)."""
    require_module("envpool")
    from hts_lightning.envs.envpool import envpool_factory

    module = PPO(env_id="CartPole-v1", env_backend="envpool", num_envs=4, num_workers=0,
                 sync_interval=64, total_frames=512, seed=0)  # fmt: skip
    nets = plain_ppo.networks(module.model)
    before = [p.detach().clone() for p in nets.parameters()]
    pool = envpool_factory("CartPole-v1").make_pool(seeds=[1, 2, 3, 4], num_threads=1, batch_size=4)
    settings = plain_ppo.PPOSettings(
        epochs=2, minibatches=2, clip_epsilon=0.2, entropy_coef=0.0, value_coef=0.5,
        max_grad_norm=0.5, gamma=0.99, gae_lambda=0.95,
    )  # fmt: skip
    plain_ppo.train(nets, pool, settings=settings, lr=3e-3, steps_per_batch=64, batches=2,
                    schedule_batches=2, clip_rewards=True, seed=0)  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines if line.startswith("plain: update")] == ["1/2", "2/2"]
    episodes = [
        (int(step.removeprefix("global_step=")), float(value))
        for step, _, value in (
            line.partition(", episodic_return=") for line in lines if line.startswith("global_")
        )
    ]
    steps, returns = zip(*episodes, strict=True)
    assert len(episodes) >= 8  # 512 steps of a nearly uniform policy: episodes of ~20 steps
    assert all(value == int(value) and 8 <= value <= 500 for value in returns)
    # Every episode's steps and its reset step (envpool's auto-reset) are among the 512.
    assert sum(returns) + len(returns) <= 512
    assert list(steps) == sorted(steps) and all(s % 4 == 0 and 0 < s <= 512 for s in steps)
    assert any(not torch.equal(a, b) for a, b in zip(before, nets.parameters(), strict=True))
