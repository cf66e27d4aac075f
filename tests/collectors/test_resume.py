"""A collector restored from state_dict() goes on with the same batches, bitwise."""

from __future__ import annotations

import copy
import logging
import pickle
import re
from functools import partial

import pytest
import torch

from hts_lightning import HTSCollector
from hts_lightning.envs import env_factory
from hts_lightning.models import make_actor_critic
from tests.collectors.policies import assert_bitwise_equal, perturb, sampling_policy

NUM_ENVS, SYNC_INTERVAL, BATCHES, STOP_AFTER = 4, 16, 6, 3


def _collector(create_env_fn, policy, num_workers, **kwargs):
    return HTSCollector(
        create_env_fn,
        policy,
        num_envs=kwargs.pop("num_envs", NUM_ENVS),
        num_workers=num_workers,
        sync_interval=SYNC_INTERVAL,
        total_frames=NUM_ENVS * SYNC_INTERVAL * BATCHES,
        seed=3,
        **kwargs,
    )


def _uninterrupted_and_resumed(create_env_fn, make_policy, *, num_workers, **kwargs):
    """Batches of one run, and of a run stopped after STOP_AFTER batches (state and policy
    saved, collector shut down with a batch in flight) and resumed in a new collector."""
    policy, generator = make_policy(), torch.Generator().manual_seed(7)
    with _collector(create_env_fn, policy, num_workers, **kwargs) as collector:
        expected = []
        for batch in collector:
            expected.append(batch)
            perturb(policy, generator)
            collector.update_policy_weights_()

    policy, generator = make_policy(), torch.Generator().manual_seed(7)
    got = []
    with _collector(create_env_fn, policy, num_workers, **kwargs) as collector:
        for batch in collector:
            got.append(batch)
            perturb(policy, generator)
            collector.update_policy_weights_()
            if len(got) == STOP_AFTER:
                saved = pickle.dumps((collector.state_dict(), policy.state_dict()))
                generator_state = generator.get_state()
                break
    state, weights = pickle.loads(saved)
    policy = make_policy()
    policy.load_state_dict(weights)  # the learner's current weights, as a checkpoint has them
    generator.set_state(generator_state)
    with _collector(create_env_fn, policy, num_workers, **kwargs) as collector:
        collector.load_state_dict(state)
        for batch in collector:
            got.append(batch)
            perturb(policy, generator)
            collector.update_policy_weights_()
    return torch.stack(expected), torch.stack(got)


@pytest.mark.parametrize(
    ("num_workers", "inference", "overlap"),
    [(0, "main", True), (2, "main", True), (2, "workers", True), (0, "main", False),
     (2, "workers", False)],
)  # fmt: skip
def test_cartpole_resume_is_bitwise_identical(num_workers, inference, overlap):
    make_policy = partial(sampling_policy, in_features=4, num_actions=2, seed=2)
    expected, got = _uninterrupted_and_resumed(
        env_factory("CartPole-v1"),
        make_policy,
        num_workers=num_workers,
        inference=inference,
        overlap=overlap,
    )
    assert_bitwise_equal(expected, got)
    # Episodes end inside the batches, and the resumed part is not a restart from resets.
    assert expected["next", "done"].sum() > 4
    assert not torch.equal(expected[STOP_AFTER]["step_count"][:, 0], torch.zeros(NUM_ENVS, 1))
    lag = [0, 0, 1, 2, 3, 4] if overlap else [0, 1, 2, 3, 4, 5]
    assert expected["policy_version"][:, 0, 0].tolist() == lag


def _pong_policy():
    env = env_factory("ALE/Pong-v5")()
    torch.manual_seed(0)
    policy = make_actor_critic(env.observation_spec, env.action_spec).get_policy_operator()
    env.close()
    return policy


@pytest.mark.slow
def test_atari_resume_is_bitwise_identical():
    expected, got = _uninterrupted_and_resumed(
        env_factory("ALE/Pong-v5"), _pong_policy, num_workers=2, inference="workers"
    )
    assert_bitwise_equal(expected, got)
    assert expected["next", "reward"].abs().sum() > 0  # points were scored


def test_a_shard_restores_from_the_concatenated_state_of_all_replicas():
    """The states of two ranks' shards concatenate; a shard of another split restores its part."""
    make = env_factory("CartPole-v1")
    policy = sampling_policy(in_features=4, num_actions=2, seed=2)
    states = []
    for rank in range(2):
        shard = _collector(make, copy.deepcopy(policy), 0, num_envs=2, replica_offset=2 * rank)
        with shard:
            next(iter(shard))
            states.append(shard.state_dict())
    whole = HTSCollector.merge_state_dicts(states)
    middle = _collector(make, copy.deepcopy(policy), 0, num_envs=2, replica_offset=1)
    middle.load_state_dict(whole)
    assert middle._start_states[1][0]["observation"].equal(
        pickle.loads(states[1]["replica_states"][0])[0]["observation"]
    )
    message = "holds replicas 0..3; this collector steps replicas 3..4"
    with pytest.raises(ValueError, match=re.escape(message)):
        _collector(make, policy, 0, num_envs=2, replica_offset=3).load_state_dict(whole)


def test_envs_that_cannot_save_state_are_reseeded_deterministically(caplog):
    """A stateful TorchRL transform makes the env unsavable: resume re-seeds, and says so."""
    from torchrl.envs import CatFrames

    def make():
        env = env_factory("CartPole-v1")()
        return env.append_transform(CatFrames(2, dim=-1, in_keys=["observation"]))

    make_policy = partial(sampling_policy, in_features=8, num_actions=2, seed=2)
    runs = []
    for _ in range(2):
        with caplog.at_level(logging.WARNING, logger="hts_lightning.collectors.hts"):
            runs.append(_uninterrupted_and_resumed(make, make_policy, num_workers=0))
    (expected, got), (_, got_again) = runs
    assert_bitwise_equal(got, got_again)  # deterministic
    assert not torch.equal(expected[STOP_AFTER:]["observation"], got[STOP_AFTER:]["observation"])
    assert "replicas [0, 1, 2, 3] cannot save their state" in caplog.text
