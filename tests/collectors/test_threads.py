"""The learner's process keeps the cores the workers do not use."""

from __future__ import annotations

import os
from functools import partial

import torch

from hts_lightning import CountingEnv, HTSCollector
from tests.collectors.policies import sampling_policy


def _first_batch_threads(**kwargs) -> int:
    with HTSCollector(
        partial(CountingEnv), sampling_policy(), num_envs=2, sync_interval=4, **kwargs
    ) as collector:
        next(iter(collector))
        return torch.get_num_threads()


def test_worker_processes_take_their_cores_from_the_learner():
    before = torch.get_num_threads()
    try:
        cores = len(os.sched_getaffinity(0))
        torch.set_num_threads(cores)
        assert _first_batch_threads(num_workers=1) == max(1, cores - 1)
        assert _first_batch_threads(num_workers=1) == max(1, cores - 1)  # not cumulative
        assert _first_batch_threads(num_workers=2, num_threads=3) == 3
        torch.set_num_threads(5)
        assert _first_batch_threads(num_workers=0) == 5  # serial mode: left alone
    finally:
        torch.set_num_threads(before)
