"""on_env_error="restart": a replica whose env raises is re-created and collection goes on."""

from __future__ import annotations

import logging
from functools import partial

import pytest
import torch

from hts_lightning import CountingEnv, EnvReplicaError, HTSCollector
from hts_lightning.collectors.backends import in_process
from tests.collectors.policies import assert_bitwise_equal, sampling_policy
from tests.conftest import worker_processes

NUM_ENVS, SYNC_INTERVAL, BATCHES, FAIL_AT = 4, 16, 2, 5
MODES = [(0, "main"), (2, "main"), (2, "workers")]


def _batches(envs, num_workers, inference, **kwargs) -> tuple[torch.Tensor, int]:
    with HTSCollector(
        envs,
        sampling_policy(in_features=1, num_actions=2, seed=4),
        num_envs=NUM_ENVS,
        num_workers=num_workers,
        inference=inference,
        sync_interval=SYNC_INTERVAL,
        total_frames=NUM_ENVS * SYNC_INTERVAL * BATCHES,
        seed=1,
        **kwargs,
    ) as collector:
        batches = [batch for batch in collector]
        return torch.stack(batches), collector.env_restarts


@pytest.mark.parametrize(("num_workers", "inference"), MODES)
def test_a_failing_replica_restarts_and_the_others_are_untouched(num_workers, inference, caplog):
    clean = [partial(CountingEnv, max_count=100)] * NUM_ENVS
    failing = [*clean[:3], partial(CountingEnv, max_count=100, fail_at=FAIL_AT)]
    expected, no_restarts = _batches(clean, num_workers, inference)
    with caplog.at_level(logging.WARNING, logger="hts_lightning.collectors.hts"):
        got, restarts = _batches(failing, num_workers, inference, on_env_error="restart")
    assert no_restarts == 0
    # Replicas 0-2 collect exactly what they collect without the failing neighbour.
    assert_bitwise_equal(got[:, :3], expected[:, :3])
    # Replica 3 fails at every 5th step of an episode (its count reaching 5), 32 steps: 6 times.
    replica = torch.cat(list(got[:, 3]))  # [BATCHES * SYNC_INTERVAL] in time order
    steps = torch.arange(BATCHES * SYNC_INTERVAL)
    failed = steps % FAIL_AT == FAIL_AT - 1
    assert restarts == int(failed.sum()) == 6
    assert replica["observation"].squeeze(-1).tolist() == (steps % FAIL_AT).float().tolist()
    # The failed step is a truncation: the last observation again, no reward, done.
    nxt = replica["next"]
    assert nxt["truncated"].squeeze(-1).tolist() == failed.tolist()
    assert nxt["done"].squeeze(-1).tolist() == failed.tolist()
    assert not nxt["terminated"].any()
    assert nxt["observation"][failed].squeeze(-1).tolist() == [FAIL_AT - 1.0] * 6
    assert (nxt["reward"][failed] == 0).all()
    # Each restart began a new trajectory.
    assert replica["collector", "traj_ids"].unique().numel() == 7
    logged = [r.getMessage() for r in caplog.records if "restarted" in r.getMessage()]
    assert len(logged) == 6
    assert logged[0].startswith("Environment replica 3 raised and was restarted")
    assert "CountingEnv failing on purpose at count 5" in logged[0]
    assert worker_processes() == []


def test_restarts_are_named_by_global_replica_index(caplog):
    envs = [partial(CountingEnv, max_count=100)] * NUM_ENVS
    envs[1] = partial(CountingEnv, max_count=100, fail_at=FAIL_AT)
    with caplog.at_level(logging.WARNING, logger="hts_lightning.collectors.hts"):
        _, restarts = _batches(envs, 2, "workers", on_env_error="restart", replica_offset=8)
    assert restarts == 6
    assert "Environment replica 9 raised and was restarted" in caplog.text


def test_a_replica_that_keeps_failing_raises(monkeypatch):
    monkeypatch.setattr(in_process, "MAX_RESTARTS_PER_REPLICA", 2)
    envs = [partial(CountingEnv, max_count=100)] * NUM_ENVS
    envs[2] = partial(CountingEnv, max_count=100, fail_at=1)  # every step fails
    with pytest.raises(EnvReplicaError) as info:
        _batches(envs, 0, "main", on_env_error="restart")
    assert info.value.replica == 2
    assert "failed again after 2 restarts" in str(info.value)
    assert "failing on purpose at count 1" in str(info.value)


def test_a_bad_on_env_error_is_named():
    with pytest.raises(ValueError, match=r"on_env_error must be one of \('raise', 'restart'\)"):
        _batches([CountingEnv] * NUM_ENVS, 0, "main", on_env_error="retry")
