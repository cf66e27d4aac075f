"""Every wait for a batch is bounded, whichever collector the module drives."""

from __future__ import annotations

import pytest

from hts_lightning.collectors import BatchTimeoutError
from hts_lightning.envs import env_factory
from hts_lightning.models import make_actor_critic
from hts_lightning.modules.collection import CollectionBinding
from tests.conftest import worker_processes


def _binding(kind: str, *, batch_timeout: float | None, **env_kwargs) -> CollectionBinding:
    create_env = env_factory("Counting", max_count=1000, **env_kwargs)
    probe = create_env()
    actor = make_actor_critic(probe.observation_spec, probe.action_spec).get_policy_operator()
    probe.close()
    return CollectionBinding(
        kind=kind,
        create_env=create_env,
        policy=actor,
        num_envs=2,
        num_workers=1,
        sync_interval=8,
        seed=0,
        batch_timeout=batch_timeout,
    )


# The bound is the loader's, the same for every kind: ours and a TorchRL one (sync and multi_sync
# pass too, at 20-40 s each here, most of it their shutdown of the stalled worker).
@pytest.mark.parametrize("kind", ["hts", "multi_async"])
def test_a_batch_that_never_comes_ends_the_wait_with_an_error_naming_the_collector(kind):
    # Both replicas' third step never returns: the first batch never comes.
    binding = _binding(kind, batch_timeout=2, stall_at=3)
    loader = binding.start(batches=3, updates=0, world_size=1, rank=0)
    expected = (
        rf"No batch from the '{kind}' collector within batch_timeout=2 s: it was collecting "
        r"its batch 1 \(2 env replicas x 8 steps, in 1 worker processes\)\. An env step that "
        r"never returns.*raise batch_timeout \(model\.init_args\.batch_timeout"
    )
    try:
        with pytest.raises(BatchTimeoutError, match=expected):
            next(iter(loader))
    finally:
        binding.shutdown()  # bounded too: the stalled worker is killed
    assert worker_processes() == []


def test_batch_timeout_must_be_positive():
    with pytest.raises(ValueError, match="batch_timeout=0: give the seconds a batch may take"):
        _binding("hts", batch_timeout=0)
