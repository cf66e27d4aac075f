"""Bitwise-identical batches whatever the number of workers and the env timing."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch

from hts_lightning import CountingEnv, HTSCollector, VariableLatencyEnv, make_atari_env
from hts_lightning.models import make_actor_critic
from tests.collectors.policies import assert_bitwise_equal, collect, sampling_policy


def test_counting_env_identical_across_worker_counts_with_random_sleeps():
    env = partial(CountingEnv, max_count=7, max_delay=0.003)
    runs = {
        w: collect(env, sampling_policy(), num_workers=w, num_envs=8, sync_interval=12, batches=4)
        for w in (0, 1, 2, 4)
    }
    for w in (1, 2, 4):
        assert_bitwise_equal(runs[0], runs[w])
    # The updates really changed the actions, so equality is not vacuous.
    actions = runs[0]["action"].argmax(-1)
    assert not torch.equal(actions[0], actions[2])
    assert runs[0]["policy_version"][:, 0, 0].tolist() == [0, 0, 1, 2]


def test_latency_env_identical_across_worker_counts_with_random_step_times():
    env = partial(VariableLatencyEnv, distribution="exponential", mean=0.001, episode_length=20)
    runs = {
        w: collect(
            env,
            sampling_policy(in_features=8, num_actions=4, seed=1),
            num_workers=w,
            num_envs=4,
            sync_interval=16,
            batches=3,
            seed=11,
        )
        for w in (0, 2, 4)
    }
    assert_bitwise_equal(runs[0], runs[2])
    assert_bitwise_equal(runs[0], runs[4])


def test_inference_in_workers_or_in_main_process_gives_the_same_batches():
    env = partial(CountingEnv, max_count=5, max_delay=0.002)
    runs = [
        collect(
            env,
            sampling_policy(),
            num_workers=2,
            num_envs=4,
            sync_interval=10,
            batches=3,
            inference=inference,
        )
        for inference in ("workers", "main")
    ]
    assert_bitwise_equal(*runs)


@pytest.mark.parametrize("inference_batch_size", [6, 4])
def test_a_replica_acts_from_its_own_row_whatever_the_layout_and_timing(inference_batch_size):
    """6 replicas over 1, 2 and 3 workers start workers at replicas 0, 3 and 2, and
    main-process inference acts on whichever replicas timing makes ready (at 4 rows, replicas
    0 and 4 then share row 0 and take two calls). With the CartPole recipe's shapes (4 inputs,
    two 64-cell layers, 2 actions) MKL's AVX-512 kernels round a row by its place in the call
    (an Intel Xeon, benchmarks/row_place.py): these runs differed there while a replica's row
    followed its worker's block or the timing. A CPU without such kernels passes either way."""
    env = partial(
        VariableLatencyEnv,
        distribution="exponential",
        mean=0.001,
        obs_dim=4,
        num_actions=2,
        episode_length=15,
    )
    policy = partial(sampling_policy, in_features=4, num_actions=2, num_cells=(64, 64), seed=4)
    runs = [
        collect(
            env,
            policy(),
            num_workers=workers,
            num_envs=6,
            sync_interval=10,
            batches=2,
            seed=5,
            inference=inference,
            inference_batch_size=inference_batch_size,
        )
        for workers, inference in [(1, "workers"), (2, "workers"), (3, "workers"), (2, "main")]
    ]
    for run in runs[1:]:
        assert_bitwise_equal(runs[0], run)


def test_ready_replicas_that_share_a_row_take_separate_calls():
    from hts_lightning.collectors.core.engine import _calls

    def calls(replicas, first_replica=0):
        return [c.tolist() for c in _calls(np.array(replicas), 8, first_replica)]

    assert calls([0, 3, 4, 8, 11, 16]) == [[0, 3, 4], [8, 11], [16]]
    assert calls(list(range(2, 10))) == [list(range(2, 10))]  # rows 2..7, 0, 1: one call
    # A shard from global replica 5: its replicas 3 and 11 are global 8 and 16, both row 0.
    assert calls([3, 5, 11], first_replica=5) == [[3, 5], [11]]


def test_inference_in_workers_needs_workers_and_a_cpu():
    with pytest.raises(ValueError, match="inference='workers'"):
        HTSCollector(
            partial(CountingEnv),
            sampling_policy(),
            num_envs=2,
            num_workers=0,
            frames_per_batch=4,
            inference="workers",
        )


def test_different_seeds_give_different_batches():
    env = partial(VariableLatencyEnv, mean=0.0, distribution="constant")
    policy = partial(sampling_policy, in_features=8, num_actions=4)
    a = collect(env, policy(), num_workers=0, num_envs=2, sync_interval=8, batches=1, seed=0)
    b = collect(env, policy(), num_workers=0, num_envs=2, sync_interval=8, batches=1, seed=1)
    assert not torch.equal(a["observation"], b["observation"])
    assert not torch.equal(a["action"], b["action"])


def test_a_shard_of_replicas_matches_the_same_replicas_in_one_collector():
    """Replica seeds depend on the global index: rank shards reproduce one big collector."""
    env = partial(VariableLatencyEnv, mean=0.0, distribution="constant")
    policy = partial(sampling_policy, in_features=8, num_actions=4)
    both = collect(env, policy(), num_workers=0, num_envs=4, sync_interval=6, batches=2)
    with HTSCollector(
        env,
        policy(),
        num_envs=2,
        num_workers=0,
        frames_per_batch=12,
        total_frames=12,
        replica_offset=2,
        inference_batch_size=4,
    ) as shard:
        second_half = next(iter(shard))
    assert torch.equal(second_half["observation"], both[0]["observation"][2:])
    assert torch.equal(second_half["action"], both[0]["action"][2:])


@pytest.mark.slow
def test_pong_nature_cnn_identical_across_worker_counts():
    env = partial(make_atari_env, "ALE/Pong-v5")
    probe = env()

    def policy():
        torch.manual_seed(0)
        model = make_actor_critic(probe.observation_spec, probe.action_spec)
        return model.get_policy_operator()

    runs = [
        collect(env, policy(), num_workers=w, num_envs=4, sync_interval=32, batches=2)
        for w in (0, 2)
    ]
    probe.close()
    assert_bitwise_equal(*runs)


@pytest.mark.parametrize("inference_batch_size", [1, 2])
def test_small_inference_shape_identical_across_worker_counts(inference_batch_size):
    """A run's inference shape below the default (no padded rows for 2 or 1 replicas per
    worker) keeps batches bitwise identical across 1, 2 and 4 workers."""
    env = partial(VariableLatencyEnv, mean=0.0, distribution="constant", episode_length=9)
    policy = partial(sampling_policy, in_features=8, num_actions=4, seed=2)
    common = dict(num_envs=4, sync_interval=10, batches=2, seed=3)
    runs = {
        w: collect(
            env, policy(), num_workers=w, inference_batch_size=inference_batch_size, **common
        )
        for w in (1, 2, 4)
    }
    assert_bitwise_equal(runs[1], runs[2])
    assert_bitwise_equal(runs[1], runs[4])
    assert runs[4]["policy_version"][:, 0, 0].tolist() == [0, 0]
    # The chunks really act per row: every replica's actions are its own (not vacuous).
    actions = runs[1]["action"].argmax(-1)
    assert not torch.equal(actions[:, 0], actions[:, 1])


def test_inference_batch_size_is_checked_and_kept_by_the_collector_state():
    env = partial(VariableLatencyEnv, mean=0.0, distribution="constant")
    policy = partial(sampling_policy, in_features=8, num_actions=4)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="inference_batch_size must be an int >= 1"):
            HTSCollector(
                env, policy(), num_envs=2, num_workers=0, sync_interval=4, inference_batch_size=bad
            )
    source = HTSCollector(
        env,
        policy(),
        num_envs=2,
        num_workers=0,
        sync_interval=4,
        total_frames=16,
        inference_batch_size=1,
    )
    with source:
        next(iter(source))
        state = source.state_dict()
    assert state["inference_batch_size"] == 1
    other = HTSCollector(env, policy(), num_envs=2, num_workers=0, sync_interval=4)
    assert other.inference_batch_size == 2
    with pytest.raises(ValueError, match="Pass inference_batch_size=1"):
        other.load_state_dict(state)
    other.shutdown()


def test_cuda_graph_needs_a_cuda_device():
    with pytest.raises(ValueError, match=r"cuda_graph=True .* needs inference on a CUDA device"):
        HTSCollector(
            partial(CountingEnv),
            sampling_policy(),
            num_envs=2,
            num_workers=0,
            frames_per_batch=4,
            cuda_graph=True,
        )
