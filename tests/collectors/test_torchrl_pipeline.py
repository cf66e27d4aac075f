"""The HTSCollector in a plain TorchRL loop: replay buffer, GAE and ClipPPOLoss, no Lightning."""

from __future__ import annotations

from functools import partial

import torch
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from hts_lightning import HTSCollector, make_gym_env
from hts_lightning.models import make_actor_critic


def test_replay_buffer_gae_and_clip_ppo_loss_on_hts_batches():
    create_env = partial(make_gym_env, "CartPole-v1")
    probe = create_env()
    model = make_actor_critic(probe.observation_spec, probe.action_spec)
    actor, critic = model.get_policy_operator(), model.get_value_operator()
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True)
    loss = ClipPPOLoss(actor, critic, clip_epsilon=0.2)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-3)
    buffer = ReplayBuffer(storage=LazyTensorStorage(4 * 32 * 2), batch_size=64)
    with HTSCollector(
        create_env,
        actor,
        num_envs=4,
        num_workers=2,
        frames_per_batch=4 * 32,
        total_frames=4 * 32 * 2,
    ) as collector:
        for batch in collector:
            with torch.no_grad():
                gae(batch)
            assert batch["advantage"].shape == (4, 32, 1)
            assert torch.isfinite(batch["value_target"]).all()
            buffer.extend(batch.reshape(-1))
            before = [p.detach().clone() for p in actor.parameters()]
            losses = loss(buffer.sample())
            total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
            optimizer.zero_grad()
            total.backward()
            optimizer.step()
            collector.update_policy_weights_()
            assert all(torch.isfinite(v).all() for v in losses.values())
            assert any(not torch.equal(b, p) for b, p in zip(before, actor.parameters()))
    assert len(buffer) == 4 * 32 * 2
    sample = buffer.sample()
    assert {"action_log_prob", "action", ("next", "reward"), "policy_version"} <= set(
        sample.keys(True, True)
    )
