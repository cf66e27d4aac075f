"""Every choice of an HTSCollector, resolved and checked once into a frozen
:class:`CollectorConfig`: each check says what was wrong and what to do, before anything
starts."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import os
import pickle
from collections.abc import Callable, Sequence

import torch
from torchrl.envs import EnvBase
from torchrl.envs.utils import ExplorationType

from hts_lightning import choices
from hts_lightning.envs.envpool import EnvpoolFactory

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CollectorConfig:
    """An HTSCollector's arguments (see there), checked, and resolved where a rule decides: no
    ``"auto"`` and no ``None`` left in ``backend``, ``device``, ``inference``,
    ``inference_batch_size`` and ``sync_interval``."""

    create_env_fn: dataclasses.InitVar[Callable[[], EnvBase] | Sequence[Callable[[], EnvBase]]]
    policy: dataclasses.InitVar[Callable]
    num_envs: int
    num_workers: int
    frames_per_batch: dataclasses.InitVar[int | None]
    sync_interval: int | None
    total_frames: int
    device: torch.device | str | None
    inference_batch_size: int | None
    exploration_type: ExplorationType
    inference: str  #: ``"workers"`` or ``"main"``
    replica_offset: int
    num_threads: int | None
    mp_start_method: str
    on_env_error: str
    worker_niceness: int
    backend: str  #: ``"python"`` or ``"envpool"``
    cuda_graph: bool
    overlap: bool
    #: one env factory per replica
    create_env_fns: tuple[Callable[[], EnvBase], ...] = dataclasses.field(init=False)

    def __post_init__(self, create_env_fn, policy, frames_per_batch) -> None:
        resolved = object.__setattr__  # the resolved choices replace the given ones, once
        if not isinstance(self.overlap, bool):
            raise TypeError(f"overlap must be True or False, got {self.overlap!r}")
        resolved(self, "backend", check_backend(self.backend, create_env_fn, self.on_env_error))
        resolved(self, "create_env_fns", tuple(check_env_fns(create_env_fn, self.num_envs)))
        # envpool's threads take any env whenever free: no blocks of replicas to divide.
        blocks = min(self.num_workers, 1) if self.backend == "envpool" else self.num_workers
        interval = check_sizes(self.num_envs, blocks, frames_per_batch, self.sync_interval)
        resolved(self, "sync_interval", interval)
        if self.total_frames != -1 and self.total_frames <= 0:
            raise ValueError(
                f"total_frames must be -1 (no end) or positive, got {self.total_frames}"
            )
        niceness = self.worker_niceness
        if isinstance(niceness, bool) or not isinstance(niceness, int):
            raise TypeError(f"worker_niceness must be an int, got {niceness!r}")
        if not 0 <= niceness <= 19:
            raise ValueError(
                f"worker_niceness must be in 0..19 (added to the workers' niceness; lowering "
                f"it needs privileges), got {niceness}."
            )
        if not callable(policy):
            raise TypeError(f"policy must be a TensorDict module, got {type(policy).__name__}")
        if self.num_workers > 0:
            check_picklable(self.create_env_fns)
        check_thread_count(self.num_threads, "num_threads", "the rule above")
        device = self.device
        if device is None:
            # Worker inference is CPU inference, wherever the learner's copy lives.
            device = "cpu" if self.inference == "workers" else _module_device(policy)
        resolved(self, "device", torch.device(device))
        resolved(self, "inference", check_inference(self.inference, self.device, self.num_workers))
        size = check_inference_batch_size(
            self.inference_batch_size,
            num_envs=self.num_envs,
            num_workers=blocks,
            inference=self.inference,
        )
        resolved(self, "inference_batch_size", size)

    def learner_threads(self, cores: int) -> int:
        """The learner's torch threads once workers start (HTSCollector's ``num_threads``).
        Niced workers need only what the learner leaves; otherwise one core is left to
        collection: a thread per core beside workers of equal priority oversubscribed 2 cores
        (a CartPole PPO update measured 10x slower)."""
        if self.num_threads is not None:
            return self.num_threads
        # envpool's threads are niced with the worker processes that start them; with main
        # inference they run in this process, at the learner's priority.
        pool_here = self.backend == "envpool" and self.inference == "main"
        niced_workers = self.worker_niceness > 0 and not pool_here
        return cores if niced_workers else max(1, cores - 1)


def check_backend(backend: str, create_env_fn, on_env_error: str) -> str:
    choices.check_backend(backend)
    choices.check_on_env_error(on_env_error)
    native = isinstance(create_env_fn, EnvpoolFactory)
    if backend == "auto":
        backend = "envpool" if native else "python"
    if backend == "envpool" and not native:
        raise ValueError(
            "backend='envpool' steps the replicas in one envpool: create_env_fn must be an "
            "EnvpoolFactory (env_factory(env_id, backend='envpool')), got "
            f"{type(create_env_fn).__name__}. Use backend='python' for other envs."
        )
    if backend == "envpool" and on_env_error != "raise":
        raise ValueError(
            f"on_env_error={on_env_error!r} needs backend='python': envpool's C++ envs cannot "
            "be restarted one by one. Use on_env_error='raise' or env_backend 'python'."
        )
    return backend


def check_inference(inference: str, device: torch.device, num_workers: int) -> str:
    choices.check_inference_mode(inference)
    if inference == "workers" and (num_workers == 0 or device.type != "cpu"):
        raise ValueError(
            "inference='workers' runs the policy in the worker processes on the CPU: it needs "
            f"num_workers >= 1 and a CPU device (got num_workers={num_workers}, device={device}). "
            "Use inference='main' for a GPU."
        )
    if inference == "auto":
        return "workers" if num_workers > 0 and device.type == "cpu" else "main"
    return inference


def check_env_fns(create_env_fn, num_envs: int) -> list[Callable[[], EnvBase]]:
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if callable(create_env_fn):
        return [create_env_fn] * num_envs
    fns = list(create_env_fn)
    if len(fns) != num_envs or not all(callable(f) for f in fns):
        raise ValueError(
            f"create_env_fn must be a callable or a list of num_envs={num_envs} callables, "
            f"got a list of {len(fns)}"
        )
    return fns


def check_sizes(num_envs, num_workers, frames_per_batch, sync_interval) -> int:
    choices.check_replicas_per_worker(num_envs, num_workers)
    if frames_per_batch is None and sync_interval is None:
        raise ValueError("Give frames_per_batch (= num_envs * sync_interval) or sync_interval.")
    if sync_interval is None:
        sync_interval = frames_per_batch // num_envs
    if sync_interval < 1 or (
        frames_per_batch is not None and frames_per_batch != num_envs * sync_interval
    ):
        raise ValueError(
            f"frames_per_batch must equal num_envs * sync_interval; got frames_per_batch="
            f"{frames_per_batch}, num_envs={num_envs}, sync_interval={sync_interval}. "
            f"For example frames_per_batch={num_envs * max(sync_interval, 1)}."
        )
    return sync_interval


def available_cores() -> int:
    """The cores this process may run on (its affinity where the OS reports one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return cores or os.cpu_count() or 1


def check_thread_count(value, name: str, fallback: str) -> int | None:
    """``value`` if it is ``None`` or a whole number of torch threads (>= 1), else a
    ``ValueError`` naming ``name`` and what ``None`` means (``fallback``)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(
            f"{name}={value!r}: give a whole number of torch threads (>= 1) for the learner, "
            f"or None for {fallback}."
        )
    return value


def check_picklable(fns) -> None:
    for fn in {id(f): f for f in fns}.values():
        try:
            pickle.dumps(fn)
        except Exception as error:
            raise ValueError(
                f"create_env_fn {fn!r} cannot be pickled, so worker processes cannot build the "
                "env. Use a module-level function or functools.partial instead of a lambda or "
                "closure, or num_workers=0."
            ) from error


#: The default inference shape's upper bound: past 8 rows a CPU call is no cheaper per row.
DEFAULT_INFERENCE_ROWS = 8


def check_inference_batch_size(size, *, num_envs: int, num_workers: int, inference: str) -> int:
    """The run's fixed inference shape (``None``: ``min(num_envs, 8)``; see HTSCollector's
    ``inference_batch_size``). A worker acting for B replicas runs ``ceil(B / size)`` calls of
    ``size`` rows each step: the padded rows are logged once here, never changed silently."""
    if size is None:
        size = min(num_envs, DEFAULT_INFERENCE_ROWS)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"inference_batch_size must be an int >= 1, got {size!r}")
    block = num_envs // num_workers if inference == "workers" and num_workers else num_envs
    padded = -(-block // size) * size - block
    if padded:
        _log.info(
            "Each inference call runs on inference_batch_size=%d rows; a worker acting for %d "
            "replicas computes %d padded rows per step. inference_batch_size=%d (any divisor "
            "of the replicas per worker) avoids them; keep one value when comparing runs, "
            "which are bitwise identical across worker counts at one inference_batch_size.",
            size,
            block,
            padded,
            math.gcd(block, size),
        )
    return size


def _module_device(policy) -> torch.device:
    tensor = next(itertools.chain(policy.parameters(), policy.buffers()), None)
    return torch.device("cpu") if tensor is None else tensor.device
