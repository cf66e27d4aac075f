"""Exactly one step of policy lag, and real overlap of collection with learning."""

from __future__ import annotations

import time
from functools import partial

import pytest

from hts_lightning import PPO, CountingEnv, HTSCollector
from hts_lightning.envs import env_factory
from tests.collectors.policies import (
    assert_bitwise_equal,
    collect,
    sampling_policy,
    set_choice,
    weight_readable_policy,
)


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


class _StepLoggingEnv(CountingEnv):
    """A CountingEnv that appends one byte to ``log`` per step: the steps every replica has
    taken so far, seen from the consumer's process."""

    def __init__(self, log: str, **kwargs):
        super().__init__(**kwargs)
        self._log = log

    def _step(self, tensordict):
        with open(self._log, "ab") as file:
            file.write(b".")
        return super()._step(tensordict)


def _steps_reach(log, count: int, hang_guard: float = 120.0) -> int:
    """Wait until ``log`` records ``count`` steps; the steps recorded. The limit only keeps a
    broken collector from hanging the suite; nothing is asserted about how long it takes."""
    deadline = time.monotonic() + hang_guard
    while log.stat().st_size < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return log.stat().st_size


def test_the_next_batch_is_collected_while_the_learner_holds_this_one(tmp_path):
    """Overlap: batch k+1 is collected while the consumer holds batch k, and no further
    (batch k+2 would need the weights of update k)."""
    log = tmp_path / "steps"
    log.touch()
    per_batch = 2 * 20
    policy = weight_readable_policy(num_actions=2)
    set_choice(policy, 0)
    with HTSCollector(
        partial(_StepLoggingEnv, str(log), max_count=50),
        policy,
        num_envs=2,
        num_workers=2,
        frames_per_batch=per_batch,
        total_frames=per_batch * 3,
    ) as collector:
        iterator = iter(collector)
        first = next(iterator)
        # Without asking for it, batch 1 is collected: the steps of two batches.
        assert _steps_reach(log, 2 * per_batch) == 2 * per_batch
        assert log.stat().st_size == 2 * per_batch
        # No clock gives the collector room to run ahead: update 1's weights choose action 1,
        # so a step of batch 2 taken before the update (running ahead, which lag one forbids)
        # would show in batch 2 as action 0, however late it came.
        set_choice(policy, 1)
        collector.update_policy_weights_()
        second = next(iterator)  # already there; handing it out starts batch 2
        assert _steps_reach(log, 3 * per_batch) == 3 * per_batch
        third = next(iterator)
    assert log.stat().st_size == 3 * per_batch
    assert first["policy_version"].eq(0).all() and second["policy_version"].eq(0).all()
    assert third["policy_version"].eq(1).all()  # collected after the update, with its weights
    assert first["action"].argmax(-1).eq(0).all() and second["action"].argmax(-1).eq(0).all()
    assert third["action"].argmax(-1).eq(1).all()  # every step of batch 2 after the update


@pytest.mark.parametrize(
    ("make_env", "num_workers", "inference"),
    [
        (partial(CountingEnv, max_count=5, num_actions=4), 2, "workers"),
        (partial(CountingEnv, max_count=5, num_actions=4), 0, "main"),
        (env_factory("CartPole-v1", backend="envpool"), 2, "workers"),
        (env_factory("CartPole-v1", backend="envpool"), 2, "main"),
    ],
    ids=["python-workers", "python-inline", "envpool-workers", "envpool-main"],
)
def test_without_overlap_batch_k_uses_the_weights_sent_after_batch_k_minus_1(
    make_env, num_workers, inference
):
    num_actions = 4 if isinstance(make_env, partial) else 2
    policy = weight_readable_policy(num_actions=num_actions)
    set_choice(policy, 0)
    with HTSCollector(
        make_env,
        policy,
        num_envs=4,
        num_workers=num_workers,
        frames_per_batch=4 * 8,
        total_frames=4 * 8 * 5,
        inference=inference,
        overlap=False,
    ) as collector:
        for k, batch in enumerate(collector):
            assert batch["policy_version"].eq(k).all()
            assert batch["action"].argmax(-1).eq(k % num_actions).all()
            assert collector.policy_version == k  # no lag
            time.sleep(0.05)  # a learner: the next batch must not start before its weights
            set_choice(policy, (k + 1) % num_actions)
            collector.update_policy_weights_()
    assert k == 4


@pytest.mark.parametrize("num_workers", [0, 2])
def test_without_overlap_the_batches_differ_only_through_the_weights(num_workers):
    """With weights that never change, the overlap changes nothing: same replicas, seeds and
    action noise, bitwise."""

    def batches(overlap: bool):
        return collect(
            env_factory("CartPole-v1"),
            sampling_policy(in_features=4, seed=1),
            num_workers=num_workers,
            num_envs=4,
            sync_interval=16,
            batches=4,
            seed=5,
            perturb_scale=0.0,
            overlap=overlap,
        )

    with_overlap, without = batches(True), batches(False)
    assert_bitwise_equal(with_overlap.exclude("policy_version"), without.exclude("policy_version"))
    # Only the version counts differ: the lag of one is gone.
    assert with_overlap["policy_version"][:, 0, 0].tolist() == [0, 0, 1, 2]
    assert without["policy_version"][:, 0, 0].tolist() == [0, 1, 2, 3]
    assert with_overlap["next", "done"].sum() > 0  # episodes ended inside the batches


def test_overlap_must_be_a_bool_and_is_the_htscollectors_alone():
    with pytest.raises(TypeError, match="overlap must be True or False"):
        HTSCollector(CountingEnv, sampling_policy(), num_envs=2, sync_interval=4, overlap="no")
    with pytest.raises(ValueError, match="overlap=False needs collector='hts'"):
        PPO(env_id="CartPole-v1", num_envs=2, num_workers=1, collector="sync", overlap=False)


def test_without_overlap_a_new_iterator_goes_on_with_the_next_batch():
    """A loop that breaks between batches and iterates again: the next batch starts then,
    with the weights sent meanwhile (nothing was in flight to wait for)."""
    policy = weight_readable_policy(num_actions=4)
    set_choice(policy, 0)
    with HTSCollector(
        partial(CountingEnv, max_count=5, num_actions=4),
        policy,
        num_envs=2,
        num_workers=1,
        frames_per_batch=2 * 4,
        total_frames=2 * 4 * 4,
        overlap=False,
    ) as collector:
        versions = []
        for batch in collector:
            versions.append(int(batch["policy_version"].max()))
            set_choice(policy, len(versions) % 4)
            collector.update_policy_weights_()
            break
        for batch in collector:
            versions.append(int(batch["policy_version"].max()))
            assert batch["action"].argmax(-1).eq(versions[-1] % 4).all()
            set_choice(policy, len(versions) % 4)
            collector.update_policy_weights_()
    assert versions == [0, 1, 2, 3]
