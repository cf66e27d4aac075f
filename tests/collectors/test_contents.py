"""Exact batch contents, shapes and keys, read off the counting env."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torchrl.collectors import BaseCollector

from hts_lightning import CountingEnv, HTSCollector
from tests.collectors.policies import sampling_policy, set_choice, weight_readable_policy


def _collect(num_workers: int, **kwargs):
    envs = [partial(CountingEnv, max_count=m, num_actions=4) for m in (2, 3, 5)]
    policy = weight_readable_policy(num_actions=4)
    set_choice(policy, 3)
    collector = HTSCollector(
        envs,
        policy,
        num_envs=3,
        num_workers=num_workers,
        frames_per_batch=12,
        total_frames=24,
        **kwargs,
    )
    with collector:
        return list(collector), collector


@pytest.mark.parametrize("num_workers", [0, 3])
def test_exact_contents_from_counting_env(num_workers):
    (first, second), _ = _collect(num_workers)
    assert first.batch_size == torch.Size([3, 4])
    obs = torch.cat([first["observation"], second["observation"]], 1).squeeze(-1)
    nxt = torch.cat([first["next", "observation"], second["next", "observation"]], 1).squeeze(-1)
    # Replica r counts 0..max_count-1 and resets; batch 2 continues where batch 1 stopped.
    assert obs.tolist() == [
        [0, 1, 0, 1, 0, 1, 0, 1],
        [0, 1, 2, 0, 1, 2, 0, 1],
        [0, 1, 2, 3, 4, 0, 1, 2],
    ]
    assert nxt.tolist() == [
        [1, 2, 1, 2, 1, 2, 1, 2],
        [1, 2, 3, 1, 2, 3, 1, 2],
        [1, 2, 3, 4, 5, 1, 2, 3],
    ]
    terminated = torch.cat([first["next", "terminated"], second["next", "terminated"]], 1)
    assert torch.equal(terminated.squeeze(-1), nxt == torch.tensor([[2], [3], [5]]))
    assert torch.equal(first["next", "done"], first["next", "terminated"])
    assert not first["next", "truncated"].any()
    # The root done flags describe the observation: never done right after a reset.
    assert not first["done"].any()
    # The policy chose action 3 everywhere; the counting env pays the action index.
    assert (first["action"].argmax(-1) == 3).all()
    assert (first["next", "reward"] == 3).all()
    # Trajectory ids: episode number * num_envs + replica, continuing across batches.
    traj = torch.cat([first["collector", "traj_ids"], second["collector", "traj_ids"]], 1)
    assert traj.tolist() == [
        [0, 0, 3, 3, 6, 6, 9, 9],
        [1, 1, 1, 4, 4, 4, 7, 7],
        [2, 2, 2, 2, 2, 5, 5, 5],
    ]
    assert first["policy_version"].eq(0).all() and second["policy_version"].eq(0).all()


def test_keys_and_dtypes_of_a_sampling_policy_batch():
    collector = HTSCollector(
        partial(CountingEnv, max_count=4),
        sampling_policy(),
        num_envs=2,
        num_workers=0,
        frames_per_batch=10,
        total_frames=10,
    )
    batch = next(iter(collector))
    collector.shutdown()
    keys = set(batch.keys(include_nested=True, leaves_only=True))
    expected = {
        "observation",
        "action",
        "action_log_prob",
        "logits",
        "done",
        "terminated",
        "truncated",
        ("next", "observation"),
        ("next", "reward"),
        ("next", "done"),
        ("next", "terminated"),
        ("next", "truncated"),
        ("collector", "traj_ids"),
        "policy_version",
    }
    assert keys == expected
    assert batch["action"].shape == (2, 5, 2) and batch["action"].dtype == torch.int64
    assert batch["action"].sum(-1).eq(1).all()
    assert batch["action_log_prob"].shape == (2, 5)
    # The stored log-prob is the log-prob of the stored action under the stored logits.
    log_softmax = batch["logits"].log_softmax(-1)
    expected_log_prob = (log_softmax * batch["action"]).sum(-1)
    torch.testing.assert_close(batch["action_log_prob"], expected_log_prob)


def test_sampled_actions_follow_the_policy_distribution():
    """Per-replica noise still samples from the policy: frequencies match the probabilities."""
    policy = sampling_policy(seed=3)
    with torch.no_grad():
        policy.module[0].module[-1].bias.copy_(torch.tensor([0.0, 1.0]))
        policy.module[0].module[-1].weight.zero_()
    collector = HTSCollector(
        partial(CountingEnv, max_count=50),
        policy,
        num_envs=4,
        num_workers=0,
        frames_per_batch=4 * 500,
        total_frames=4 * 500,
    )
    batch = next(iter(collector))
    collector.shutdown()
    frequency = batch["action"][..., 1].float().mean().item()
    assert frequency == pytest.approx(torch.sigmoid(torch.tensor(1.0)).item(), abs=0.03)


def test_is_a_torchrl_collector_with_length():
    _, collector = _collect(0)
    assert isinstance(collector, BaseCollector)
    assert len(collector) == 2
    endless = HTSCollector(
        partial(CountingEnv), sampling_policy(), num_envs=2, num_workers=0, frames_per_batch=4
    )
    with pytest.raises(TypeError, match="never ends"):
        len(endless)


def test_total_frames_not_a_multiple_rounds_up_to_whole_batches():
    collector = HTSCollector(
        partial(CountingEnv),
        sampling_policy(),
        num_envs=2,
        num_workers=0,
        frames_per_batch=4,
        total_frames=9,
    )
    assert len(collector) == 3
    assert len(list(collector)) == 3


def test_state_dict_round_trip_and_seed_frozen_once_started():
    make = partial(
        HTSCollector,
        partial(CountingEnv, max_count=3),
        sampling_policy(),
        num_envs=2,
        num_workers=0,
        frames_per_batch=8,
    )
    collector = make(seed=5)
    iterator = iter(collector)
    next(iterator)
    state = collector.state_dict()
    collector.shutdown()
    assert state["seed"] == 5 and state["batches_yielded"] == 1
    restored = make(seed=0)
    restored.load_state_dict(state)
    assert restored.state_dict()["seed"] == 5
    assert restored.state_dict()["batches_yielded"] == 1
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            restored.state_dict()["noise_generator_states"],
            state["noise_generator_states"],
            strict=True,
        )
    )
    next(iter(restored))
    with pytest.raises(RuntimeError, match="before the first batch"):
        restored.set_seed(1)
    restored.shutdown()
