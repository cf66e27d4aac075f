"""The HTSCollector in a plain TorchRL loop: replay buffer, GAE and ClipPPOLoss, no Lightning."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from hts_lightning import CountingEnv, HTSCollector, make_gym_env
from hts_lightning.models import make_actor_critic
from tests.collectors.policies import set_choice, weight_readable_policy


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
            assert any(
                not torch.equal(b, p) for b, p in zip(before, actor.parameters(), strict=True)
            )
    assert len(buffer) == 4 * 32 * 2
    sample = buffer.sample()
    assert {"action_log_prob", "action", ("next", "reward"), "policy_version"} <= set(
        sample.keys(True, True)
    )


def test_torchrl_documented_calls_send_weights_seed_and_shut_down():
    """update_policy_weights_, set_seed and shutdown as TorchRL 0.14's BaseCollector documents
    them: every weight form reaches the batch after next, the rest is refused by name."""
    policy = weight_readable_policy(num_actions=4)
    collector = HTSCollector(
        partial(CountingEnv, max_count=1000, num_actions=4),
        policy,
        num_envs=2,
        num_workers=0,
        sync_interval=3,
    )
    with pytest.raises(ValueError, match="static_seed=True"):
        collector.set_seed(5, static_seed=True)
    assert collector.set_seed(5) == collector.set_seed(5) != collector.set_seed(6)
    other = weight_readable_policy(num_actions=4)

    def module_of(choice):
        set_choice(other, choice)
        return other

    def weights_of(choice):
        return TensorDict.from_module(module_of(choice)).clone()

    def flat_of(choice):
        return {k: v.clone() for k, v in module_of(choice).state_dict().items()}

    sends = [
        lambda: collector.update_policy_weights_(module_of(1)),
        lambda: collector.update_policy_weights_(weights=weights_of(2)),
        lambda: collector.update_policy_weights_(policy=module_of(3)),
        lambda: collector.update_policy_weights_(weights_dict={"policy": flat_of(1)}),
        lambda: collector.update_policy_weights_(weights_of(2), model_id="policy"),
    ]
    choices = []
    for index, batch in enumerate(collector):
        choices.append(batch["next", "reward"].unique().tolist())
        if index == 6:
            break
        if index < len(sends):
            sends[index]()
    # Batches 0 and 1 act with the initial weights (argmax of zeros: action 0); batch k + 2
    # with the weights sent after batch k.
    assert choices == [[0.0], [0.0], [1.0], [2.0], [3.0], [1.0], [2.0]]
    refused = [
        (dict(worker_ids=[0]), ValueError, "worker_ids"),
        (dict(model_id="critic"), ValueError, "one model, 'policy'"),
        (dict(weights_dict={"critic": flat_of(1)}), ValueError, "one model"),
        (dict(policy_or_weights={0: flat_of(1)}), ValueError, "Per-worker weights"),
        (dict(weights=flat_of(1), policy=other), ValueError, "Give the weights once"),
        (dict(weight_sync=True), TypeError, "weight_sync"),
    ]
    for kwargs, error, message in refused:
        with pytest.raises(error, match=message):
            collector.update_policy_weights_(**kwargs)
    with pytest.raises(ValueError, match="timeout"):
        collector.shutdown(timeout=1.0)
    with pytest.raises(ValueError, match="close_env=False"):
        collector.shutdown(close_env=False)
    collector.shutdown(raise_on_error=False)
    collector.shutdown()  # idempotent
    with pytest.raises(RuntimeError, match="shut down"):
        next(iter(collector))
