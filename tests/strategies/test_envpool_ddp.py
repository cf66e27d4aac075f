"""hts_ddp over the envpool backend: each rank its own pool over its shard of the replicas."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from hts_lightning import A2C
from tests.conftest import quiet_trainer, require_module
from tests.strategies.ddp_run import _Record, module_kwargs
from tests.strategies.test_delayed_ddp import _run

pytestmark = pytest.mark.distributed
require_module("envpool")


def test_two_envpool_ranks_match_one_rank_with_all_replicas(tmp_path):
    """Replica seeds follow the global replica index, so two ranks with a pool of 4 envs each
    see the episodes and make the updates of one rank with a pool of all 8."""
    rank0, rank1 = _run(tmp_path, "--devices", "2", "--env-backend", "envpool")
    assert rank0["world_size"] == 2 and rank0["updates"] == 6
    assert len(rank0["parameters"]) == len(rank1["parameters"]) == 6
    for step0, step1 in zip(rank0["parameters"], rank1["parameters"], strict=True):
        assert torch.equal(step0, step1)
    args = SimpleNamespace(
        algorithm="a2c",
        num_envs=8,
        num_workers=1,
        sync_interval=16,
        updates=6,
        seed=0,
        lr=3e-3,
        env_backend="envpool",
    )
    module = A2C(**module_kwargs(args))
    record = _Record()
    quiet_trainer(record).fit(module)
    assert rank0["frames"] == module.frames == 8 * 16 * 6
    assert rank0["recent_returns"] == list(module.recent_returns)
    assert len(record.parameters) == 6
    assert (record.parameters[-1] - record.parameters[0]).abs().max() > 1e-3
    for one, two in zip(record.parameters, rank0["parameters"], strict=True):
        torch.testing.assert_close(two, one, rtol=0, atol=1e-5)
