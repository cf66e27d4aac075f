"""Errors reach the consumer fast, bad input fails before any process starts, nothing leaks."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from functools import partial

import pytest

from hts_lightning import CountingEnv, EnvReplicaError, HTSCollector, WorkerDiedError
from tests.collectors.policies import sampling_policy, weight_readable_policy
from tests.conftest import shm_entries, worker_processes


class _EOFEnv(CountingEnv):
    """Raises EOFError (as a remote env might): an env error, not the pipe closing."""

    def _step(self, tensordict):
        if self._count + 1 >= self.fail_at:
            raise EOFError("the env's own connection ended")
        return super()._step(tensordict)


def _collector(envs, num_workers=2, **kwargs):
    return HTSCollector(
        envs,
        weight_readable_policy(num_actions=2),
        num_envs=len(envs) if isinstance(envs, list) else 4,
        num_workers=num_workers,
        frames_per_batch=kwargs.pop("frames_per_batch", 4 * 16),
        **kwargs,
    )


@pytest.mark.parametrize("num_workers", [0, 2])
def test_env_exception_reaches_consumer_with_replica_and_traceback(num_workers):
    envs = [partial(CountingEnv, max_count=100)] * 4
    envs[3] = partial(CountingEnv, max_count=100, fail_at=5)
    collector = _collector(envs, num_workers=num_workers)
    with pytest.raises(EnvReplicaError) as info:
        next(iter(collector))  # the failure is in the first batch: it is that batch's error
    assert info.value.replica == 3
    assert "failing on purpose at count 5" in str(info.value)
    assert "Traceback" in info.value.env_traceback
    assert worker_processes() == []


def test_errors_of_a_shard_name_global_replica_indices():
    envs = [partial(CountingEnv, max_count=100)] * 4
    envs[1] = partial(CountingEnv, max_count=100, fail_at=3)
    with pytest.raises(EnvReplicaError) as info:
        for _ in _collector(envs, num_workers=2, replica_offset=8):
            pass
    assert info.value.replica == 9  # the second replica of the shard that starts at 8
    assert "Environment replica 9 raised" in str(info.value)
    assert worker_processes() == []


def test_env_that_fails_to_build_names_its_replica():
    envs = [partial(CountingEnv, max_count=0)] * 2  # max_count < 1 raises in the constructor
    with pytest.raises(ValueError, match="max_count must be >= 1"):
        _collector(envs)  # the probe env is built before any process starts


def test_killed_worker_is_detected_at_the_next_batch_boundary():
    collector = _collector([partial(CountingEnv, max_count=100, max_delay=0.01)] * 4)
    iterator = iter(collector)
    next(iterator)
    workers = worker_processes()
    assert len(workers) == 2
    os.kill(workers[1].pid, signal.SIGKILL)
    yielded = 0
    with pytest.raises(WorkerDiedError) as info:
        for _ in range(100):  # bounded: a missed death fails here instead of hanging
            next(iterator)
            yielded += 1
    # At most the batch in flight at the kill, if it was complete, comes out; then the error.
    assert yielded <= 1
    assert info.value.worker == 1 and info.value.replicas == [2, 3]
    assert info.value.exitcode == -signal.SIGKILL
    assert info.value.shifted(4).replicas == [6, 7]
    collector.shutdown()
    assert worker_processes() == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(num_envs=6, num_workers=4, frames_per_batch=12), "not divisible by num_workers"),
        (dict(num_envs=4, num_workers=2, frames_per_batch=10), "num_envs \\* sync_interval"),
        (dict(num_envs=4, num_workers=2, frames_per_batch=8, sync_interval=4), "must equal"),
        (dict(num_envs=4, num_workers=-1, frames_per_batch=8), "num_workers must be >= 0"),
        (dict(num_envs=4, num_workers=2, frames_per_batch=8, total_frames=0), "total_frames"),
        (dict(num_envs=0, num_workers=0, frames_per_batch=8), "num_envs must be >= 1"),
    ],
)
def test_inconsistent_sizes_fail_before_any_process_starts(kwargs, message):
    before = worker_processes()
    with pytest.raises(ValueError, match=message):
        HTSCollector(partial(CountingEnv), sampling_policy(), **kwargs)
    assert worker_processes() == before


def test_unpicklable_env_factory_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"functools\.partial"):
        HTSCollector(
            lambda: CountingEnv(), sampling_policy(), num_envs=2, num_workers=1, frames_per_batch=4
        )
    # Serial mode needs no pickling.
    HTSCollector(
        lambda: CountingEnv(), sampling_policy(), num_envs=2, num_workers=0, frames_per_batch=4
    ).shutdown()


def test_policy_that_writes_no_action_is_refused():
    from tensordict.nn import TensorDictModule
    from torch import nn

    policy = TensorDictModule(nn.Linear(1, 2), in_keys=["observation"], out_keys=["logits"])
    with pytest.raises(ValueError, match=r"action keys.*\['action'\]"):
        HTSCollector(partial(CountingEnv), policy, num_envs=2, num_workers=1, frames_per_batch=4)


def test_shutdown_leaves_no_process_and_no_shared_memory():
    shm_before = shm_entries()
    collector = _collector([partial(CountingEnv, max_count=5)] * 4, total_frames=4 * 16 * 3)
    iterator = iter(collector)
    next(iterator)
    assert len(worker_processes()) == 2
    collector.shutdown()
    collector.shutdown()  # idempotent
    assert worker_processes() == []
    assert shm_entries() <= shm_before


def test_garbage_collection_without_shutdown_cleans_up():
    shm_before = shm_entries()
    collector = _collector([partial(CountingEnv, max_count=5)] * 4)
    iterator = iter(collector)
    next(iterator)
    assert len(worker_processes()) == 2
    del iterator, collector
    gc.collect()
    deadline = time.monotonic() + 10
    while worker_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert worker_processes() == []
    assert shm_entries() <= shm_before


def test_interpreter_exit_without_shutdown_cleans_up(tmp_path):
    # The child reports its process tree and every /dev/shm segment the tree has mapped or
    # open (deleted ones too) just before it exits: what its exit must clean up. Only those,
    # and segments named after the tree's pids (torch_<pid>_*, pym-<pid>-*), are checked, not
    # the whole machine's /dev/shm, where other programs come and go meanwhile.
    script = tmp_path / "leave.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, os, sys
            from functools import partial
            import psutil
            from hts_lightning import CountingEnv, HTSCollector
            from tests.collectors.policies import sampling_policy

            def shm_names(pid):
                paths = []
                with open(f"/proc/{pid}/maps") as maps:
                    paths += [line.split(maxsplit=5)[-1].strip() for line in maps]
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    try:
                        paths.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
                    except OSError:
                        pass
                return {
                    path.removeprefix("/dev/shm/").removesuffix(" (deleted)")
                    for path in paths
                    if path.startswith("/dev/shm/")
                }

            if __name__ == "__main__":
                collector = HTSCollector(partial(CountingEnv), sampling_policy(), num_envs=4,
                                         num_workers=2, frames_per_batch=8)
                next(iter(collector))
                pids = [p.pid for p in psutil.Process().children(recursive=True)]
                shm = set().union(*(shm_names(pid) for pid in [os.getpid(), *pids]))
                report = {"pid": os.getpid(), "children": pids, "shm": sorted(shm)}
                print(json.dumps(report), flush=True)
                sys.exit(0)  # no shutdown()
            """
        )
    )
    path = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path)
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    pids = report["children"]
    assert len(pids) >= 2  # two workers (and the forkserver)
    # The batch storages, slots and weights are shared memory: the check has its object.
    assert any(name.startswith(f"torch_{report['pid']}_") for name in report["shm"])
    deadline = time.monotonic() + 10
    import psutil

    def alive():
        return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]

    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive() == []
    tree = [report["pid"], *pids]
    named_after_tree = {
        name
        for name in shm_entries()
        if any(f"_{pid}_" in name or f"-{pid}-" in name for pid in tree)
    }
    assert shm_entries() & set(report["shm"]) == set()
    assert named_after_tree == set()


def test_iterating_after_shutdown_is_a_clear_error_and_a_finished_collector_is_empty():
    collector = _collector([partial(CountingEnv, max_count=5)] * 4, total_frames=4 * 16 * 3)
    iterator = iter(collector)
    next(iterator)
    collector.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        next(iter(collector))
    finished = _collector([partial(CountingEnv)] * 4, total_frames=4 * 16)
    assert len(list(finished)) == 1
    assert list(finished) == []


def test_env_raising_eoferror_is_reported_not_mistaken_for_a_closed_pipe():
    envs = [partial(CountingEnv, max_count=100)] * 2
    envs[1] = partial(_EOFEnv, max_count=100, fail_at=3)
    collector = _collector(envs, num_workers=2, inference="main")
    with pytest.raises(EnvReplicaError) as info:
        for _ in collector:
            pass
    assert info.value.replica == 1 and "EOFError" in info.value.env_traceback


def test_policy_sampling_inside_a_nested_module_is_refused():
    from tensordict.nn import TensorDictSequential

    with pytest.raises(ValueError, match="nested module"):
        HTSCollector(
            partial(CountingEnv),
            TensorDictSequential(sampling_policy()),
            num_envs=2,
            num_workers=0,
            frames_per_batch=4,
        )
