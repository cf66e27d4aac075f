"""The learner's process leaves collection a core (a convolutional learner takes every core),
whatever the worker count; workers run at the priority asked for (the caller's by default),
under Linux's batch scheduling policy."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import psutil
import pytest
import torch
from lightning import Callback

from hts_lightning import PPO, CountingEnv, HTSCollector
from hts_lightning.modules.collection import CollectionBinding
from tests.collectors.policies import sampling_policy
from tests.conftest import quiet_trainer, worker_processes


def _first_batch_threads(num_envs: int = 2, **kwargs) -> int:
    with HTSCollector(
        partial(CountingEnv), sampling_policy(), num_envs=num_envs, sync_interval=4, **kwargs
    ) as collector:
        next(iter(collector))
        return torch.get_num_threads()


def test_worker_processes_take_their_cores_from_the_learner():
    before = torch.get_num_threads()
    try:
        cores = len(os.sched_getaffinity(0))
        torch.set_num_threads(1)
        # Workers at a lower priority take what the learner leaves.
        assert _first_batch_threads(num_workers=1, worker_niceness=10) == cores
        torch.set_num_threads(cores)
        # Workers at the learner's priority (the default) get one core, however many they
        # are: a CPU learner's bits depend on its thread count, and runs with 1 and 2 workers
        # must stay bitwise equal.
        assert _first_batch_threads(num_workers=1) == max(1, cores - 1)
        assert _first_batch_threads(num_workers=2) == max(1, cores - 1)
        assert _first_batch_threads(num_workers=1, worker_niceness=0) == max(1, cores - 1)
        assert _first_batch_threads(num_workers=2, num_threads=3) == 3
        torch.set_num_threads(5)
        assert _first_batch_threads(num_workers=0) == 5  # serial mode: left alone
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize(
    ("inference", "niceness"), [("main", 10), ("workers", 10), ("main", 0), ("workers", None)]
)
def test_workers_run_at_the_priority_asked_for(inference, niceness):
    asked = {} if niceness is None else {"worker_niceness": niceness}
    with HTSCollector(
        partial(CountingEnv),
        sampling_policy(),
        num_envs=2,
        num_workers=2,
        sync_interval=4,
        inference=inference,
        **asked,
    ) as collector:
        next(iter(collector))
        workers = worker_processes()
        assert len(workers) == 2
        # By default (None) the workers keep the caller's priority: beside other people's
        # processes, niced workers got a few percent of a core.
        added = niceness or 0
        assert [w.nice() for w in workers] == [min(19, psutil.Process().nice() + added)] * 2
        # Linux's batch policy: a worker woken from an env's sleep does not preempt another
        # mid-step (more workers than cores switch less); the learner keeps the normal one.
        assert [os.sched_getscheduler(w.pid) for w in workers] == [os.SCHED_BATCH] * 2
        assert os.sched_getscheduler(0) == os.SCHED_OTHER


@pytest.mark.parametrize(("value", "error"), [(20, ValueError), (-1, ValueError), (1.5, TypeError)])
def test_a_bad_worker_niceness_is_named(value, error):
    with pytest.raises(error, match="worker_niceness"):
        HTSCollector(
            CountingEnv, sampling_policy(), num_envs=2, sync_interval=4, worker_niceness=value
        )


def test_the_learner_threads_do_not_follow_the_worker_count(monkeypatch):
    """On a machine of 8 cores (the count the collector reads, as reported by the OS), runs
    with 1, 2 and 4 workers give the learner the same 7 threads, so its bits are the same."""
    before = torch.get_num_threads()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    try:
        seen = [_first_batch_threads(num_workers=n, num_envs=4) for n in (1, 2, 4)]
    finally:
        torch.set_num_threads(before)
    assert seen == [7, 7, 7]


class _Threads(Callback):
    def __init__(self):
        self.seen: list[int] = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.seen.append(torch.get_num_threads())


def test_the_module_gives_the_learner_the_threads_asked_for():
    before = torch.get_num_threads()
    threads = _Threads()
    try:
        module = PPO(
            env_id="CartPole-v1",
            num_envs=2,
            num_workers=1,
            sync_interval=8,
            total_frames=2 * 16,
            learner_threads=3,
        )
        quiet_trainer(threads).fit(module)
    finally:
        torch.set_num_threads(before)
    assert threads.seen == [3, 3]


@pytest.mark.parametrize("value", [0, 1.5, True])
def test_a_bad_learner_threads_is_named(value):
    with pytest.raises(ValueError, match="learner_threads"):
        PPO(env_id="CartPole-v1", num_envs=2, num_workers=1, sync_interval=8, learner_threads=value)


@pytest.mark.parametrize("value", [0, -2, 2.0, False])
def test_a_bad_collector_num_threads_is_named(value):
    # 0 used to fall through `num_threads or <rule>` to the default, silently.
    with pytest.raises(ValueError, match=r"num_threads=.*whole number of torch threads"):
        HTSCollector(
            partial(CountingEnv),
            sampling_policy(),
            num_envs=2,
            num_workers=1,
            sync_interval=4,
            num_threads=value,
        )


class _WorkerNiceness(Callback):
    def __init__(self):
        self.seen: list[list[int]] = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.seen.append([w.nice() for w in worker_processes()])


def test_a_module_runs_its_workers_at_the_niceness_asked_for():
    niceness = _WorkerNiceness()
    module = PPO(
        env_id="CartPole-v1",
        num_envs=2,
        num_workers=2,
        sync_interval=8,
        total_frames=2 * 16,
        worker_niceness=5,
    )
    quiet_trainer(niceness).fit(module)
    assert niceness.seen == [[min(19, psutil.Process().nice() + 5)] * 2] * 2


def test_worker_niceness_is_refused_for_torchrls_collectors():
    with pytest.raises(ValueError, match="worker_niceness=5 needs the HTSCollector"):
        PPO(env_id="CartPole-v1", num_envs=2, num_workers=1, collector="sync", worker_niceness=5)


@pytest.mark.parametrize(
    ("takes_every_core", "expected"), [(False, [3, 7]), (True, [4, 8])], ids=["mlp", "cnn"]
)
def test_ddp_ranks_on_one_machine_split_its_cores_between_their_learners(
    monkeypatch, takes_every_core, expected
):
    """Two ranks on a machine of 8 cores: each learner takes 3 threads (its 4 less one for its
    collection), not the 7 each that oversubscribed the machine twice; one rank keeps 7. A
    learner that takes every core (a CNN's) gets its whole share: 4 and 8."""
    before = torch.get_num_threads()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    seen = []
    try:
        for ranks_here in (2, 1):
            binding = CollectionBinding(
                kind="hts",
                create_env=partial(CountingEnv),
                policy=sampling_policy(),
                num_envs=4,
                num_workers=1,
                sync_interval=4,
                seed=0,
                learner_takes_every_core=takes_every_core,
            )
            loader = binding.start(
                batches=1, updates=0, world_size=2, rank=0, ranks_here=ranks_here
            )
            next(iter(loader))
            seen.append(torch.get_num_threads())
            binding.shutdown()
    finally:
        torch.set_num_threads(before)
    assert seen == expected


@pytest.mark.parametrize(
    ("env_id", "takes_every_core"), [("ALE/Pong-v5", True), ("CartPole-v1", False)]
)
def test_a_convolutional_learner_takes_every_core_and_an_mlp_leaves_one(
    monkeypatch, env_id, takes_every_core
):
    """Pixels get the Nature CNN, whose update is the critical path: it takes all 8 reported
    cores; an MLP leaves one to collection. An explicit learner_threads still wins."""
    before = torch.get_num_threads()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    seen = []
    try:
        for learner_threads in (None, 2):
            threads = _Threads()
            module = PPO(
                env_id=env_id,
                num_envs=2,
                num_workers=1,
                sync_interval=4,
                total_frames=2 * 4,
                epochs=1,
                minibatches=1,
                learner_threads=learner_threads,
            )
            quiet_trainer(threads).fit(module)
            seen.append(threads.seen)
    finally:
        torch.set_num_threads(before)
    assert seen == [[8 if takes_every_core else 7], [2]]


def _nice(stat: Path) -> int:
    """A task's nice value: field 19 of its stat line (counted after the command's ")")."""
    return int(stat.read_text().rsplit(")", 1)[1].split()[16])


@pytest.mark.parametrize("inference", ["workers", "main"])
def test_envpools_threads_run_at_the_priority_of_the_process_that_starts_them(inference):
    """In niced worker processes envpool's threads are niced too (threads inherit their
    creator's niceness), so the learner takes every core; with main inference the pool runs
    in the learner's process and the learner leaves collection a core."""
    from hts_lightning.envs import env_factory

    make = env_factory("CartPole-v1", backend="envpool")
    before = torch.get_num_threads()
    try:
        with HTSCollector(make, sampling_policy(in_features=4), num_envs=4, num_workers=2,
                          sync_interval=4, inference=inference,
                          worker_niceness=10) as collector:  # fmt: skip
            next(iter(collector))
            threads = torch.get_num_threads()
            workers = worker_processes()
            niced = [
                _nice(Path(f"/proc/{w.pid}/task/{task}/stat"))
                for w in workers
                for task in os.listdir(f"/proc/{w.pid}/task")
            ]
    finally:
        torch.set_num_threads(before)
    cores = len(os.sched_getaffinity(0))
    if inference == "workers":
        base = psutil.Process().nice()
        assert len(niced) > len(workers)  # the pools' threads beside the processes' own
        assert set(niced) == {min(19, base + 10)}
        assert threads == cores
    else:
        assert threads == max(1, cores - 1)
