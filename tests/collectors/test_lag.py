"""Exactly one step of policy lag, and real overlap of collection with learning."""

from __future__ import annotations

import time
from functools import partial

import pytest

from hts_lightning import CountingEnv, HTSCollector
from tests.collectors.policies import set_choice, weight_readable_policy


@pytest.mark.parametrize(
    ("learner_seconds", "env_delay"),
    [(0.3, 0.0), (0.0, 0.004)],
    ids=["slow-learner", "slow-env"],
)
def test_batch_k_uses_the_weights_of_update_k_minus_1(learner_seconds, env_delay):
    policy = weight_readable_policy(num_actions=4)
    set_choice(policy, 0)
    num_batches = 6
    with HTSCollector(
        partial(CountingEnv, max_count=5, num_actions=4, max_delay=env_delay),
        policy,
        num_envs=4,
        num_workers=2,
        frames_per_batch=4 * 8,
        total_frames=4 * 8 * num_batches,
    ) as collector:
        for k, batch in enumerate(collector):
            # Every transition of batch k was acted by the weights of update k-1 (0 for k=0, 1).
            behaviour = max(k - 1, 0)
            assert batch["policy_version"].eq(behaviour).all()
            # ... and the actions prove it: update u makes the policy choose action u % 4.
            assert batch["action"].argmax(-1).eq(behaviour % 4).all()
            lag = collector.policy_version - behaviour
            assert lag == (0 if k == 0 else 1)
            time.sleep(learner_seconds)
            set_choice(policy, (k + 1) % 4)
            collector.update_policy_weights_()
            assert collector.policy_version == k + 1
    assert k == num_batches - 1


def test_without_weight_updates_nothing_stalls_and_version_stays_zero():
    policy = weight_readable_policy(num_actions=2)
    with HTSCollector(
        partial(CountingEnv, max_count=3),
        policy,
        num_envs=2,
        num_workers=1,
        frames_per_batch=8,
        total_frames=8 * 5,
    ) as collector:
        versions = [int(b["policy_version"].max()) for b in collector]
    assert versions == [0] * 5


def test_explicit_weights_are_taken_instead_of_the_policy_object():
    policy = weight_readable_policy(num_actions=4)
    other = weight_readable_policy(num_actions=4)
    set_choice(other, 2)
    with HTSCollector(
        partial(CountingEnv, max_count=3, num_actions=4),
        policy,
        num_envs=2,
        num_workers=0,
        frames_per_batch=4,
        total_frames=12,
    ) as collector:
        iterator = iter(collector)
        first = next(iterator)
        collector.update_policy_weights_(other)
        second, third = next(iterator), next(iterator)
    assert first["action"].argmax(-1).eq(0).all()
    assert second["action"].argmax(-1).eq(0).all()  # batch 1 still uses the initial weights
    assert third["action"].argmax(-1).eq(2).all()
    assert third["policy_version"].eq(1).all()


def test_next_batch_is_collected_while_the_learner_works():
    """Overlap: after a learner step as long as a batch, the next batch is already there."""
    delay = 0.01
    sync_interval = 20  # ~0.2 s of env time per replica and batch
    policy = weight_readable_policy(num_actions=2)
    with HTSCollector(
        partial(CountingEnv, max_count=50, max_delay=2 * delay),
        policy,
        num_envs=2,
        num_workers=2,
        frames_per_batch=2 * sync_interval,
        total_frames=2 * sync_interval * 3,
    ) as collector:
        iterator = iter(collector)
        next(iterator)
        time.sleep(1.0)  # the "learner": far longer than one batch of env time
        start = time.perf_counter()
        next(iterator)
        waited = time.perf_counter() - start
        start = time.perf_counter()
        next(iterator)  # the third batch only started when the second was handed out
        waited_without_overlap = time.perf_counter() - start
    assert waited < 0.05
    assert waited_without_overlap > 0.1
