"""TorchRL's own collectors set up like the HTSCollector, for baselines and comparisons."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from tensordict.nn import TensorDictModuleBase
from torchrl.collectors import BaseCollector, Collector, MultiAsyncCollector, MultiSyncCollector
from torchrl.envs import EnvBase, ParallelEnv, SerialEnv

from hts_lightning.choices import (
    CollectorKind,
    InferenceMode,
    OnEnvError,
    check_collector_kind,
    check_replicas_per_worker,
)
from hts_lightning.collectors.hts import HTSCollector

__all__ = ["check_hts_options", "make_collector"]


def check_hts_options(
    kind: CollectorKind, *, on_env_error: str, worker_niceness: int, overlap: bool = True
) -> None:
    """Refuses the HTSCollector's own options for a TorchRL collector, which has none."""
    if kind != "hts" and not overlap:
        raise ValueError(
            f"overlap=False needs collector='hts' (the HTSCollector without its overlap): "
            f"TorchRL's {kind!r} collector has no such switch. Use collector='hts', or drop "
            "overlap."
        )
    if kind != "hts" and on_env_error != "raise":
        raise ValueError(
            f"on_env_error={on_env_error!r} needs collector='hts': TorchRL's collectors "
            f"({kind!r}) stop at an env error. Use collector='hts' or on_env_error='raise'."
        )
    if kind != "hts" and worker_niceness:
        raise ValueError(
            f"worker_niceness={worker_niceness} needs the HTSCollector: TorchRL's collectors "
            f"({kind!r}) run their workers at the caller's priority. Use collector='hts' or "
            "worker_niceness=0."
        )


def make_collector(
    kind: CollectorKind,
    create_env_fn: Callable[[], EnvBase],
    policy: TensorDictModuleBase,
    *,
    num_envs: int,
    num_workers: int,
    sync_interval: int,
    total_frames: int = -1,
    seed: int = 0,
    device: torch.device | str | None = None,
    inference: InferenceMode = "auto",
    replica_offset: int = 0,
    on_env_error: OnEnvError = "raise",
    num_threads: int | None = None,
    inference_batch_size: int | None = None,
    worker_niceness: int = 0,
    overlap: bool = True,
) -> BaseCollector:
    """A collector of ``kind`` over ``num_envs`` replicas in ``num_workers`` processes.

    ``kind`` (:data:`~hts_lightning.choices.CollectorKind`): ``"hts"``, the HTSCollector;
    ``"sync"``, TorchRL's ``Collector`` over a ``ParallelEnv`` (synchronous at every step, the
    classic A2C/PPO vectorized setup); ``"multi_sync"``, ``MultiSyncCollector`` (synchronous at
    batch boundaries, no overlap); ``"multi_async"``, ``MultiAsyncCollector`` (asynchronous,
    unbounded policy lag).

    Every kind yields ``num_envs * sync_interval`` frames per batch from the same env factory
    and policy. The TorchRL baselines hold the process count at ``num_workers`` by giving each
    process a ``SerialEnv`` of ``num_envs / num_workers`` replicas. ``inference`` is the
    HTSCollector's (where its policy runs). ``replica_offset`` is the global index of the first
    replica of a shard (one rank of many): the HTSCollector seeds each replica by its global
    index; the TorchRL collectors, which seed their envs ``seed, seed + 1, ...``, start at
    ``seed + replica_offset``. ``on_env_error``, ``inference_batch_size``,
    ``worker_niceness`` and ``overlap`` are the HTSCollector's (TorchRL's collectors always
    raise, run their workers at the caller's priority, and overlap or not by their kind).
    ``num_threads``: the torch threads of the calling process once collection starts; ``None``
    leaves each collector its own rule (the HTSCollector's ``num_threads``; TorchRL's: one
    core per worker left free).
    """
    check_collector_kind(kind)
    frames_per_batch = num_envs * sync_interval
    check_hts_options(
        kind, on_env_error=on_env_error, worker_niceness=worker_niceness, overlap=overlap
    )
    if kind == "hts":
        return HTSCollector(
            create_env_fn,
            policy,
            num_envs=num_envs,
            num_workers=num_workers,
            frames_per_batch=frames_per_batch,
            total_frames=total_frames,
            seed=seed,
            device=device,
            inference=inference,
            replica_offset=replica_offset,
            on_env_error=on_env_error,
            num_threads=num_threads,
            inference_batch_size=inference_batch_size,
            worker_niceness=worker_niceness,
            overlap=overlap,
        )
    workers = max(num_workers, 1)
    per_worker = partial(SerialEnv, check_replicas_per_worker(num_envs, workers), create_env_fn)
    common = dict(
        frames_per_batch=frames_per_batch,
        total_frames=total_frames,
        policy_device=device,
        env_device="cpu",
        storing_device="cpu",
        auto_register_policy_transforms=False,
    )
    if kind == "sync":
        env = ParallelEnv(workers, per_worker, num_threads=num_threads)
        collector = Collector(env, policy, **common)
    else:
        cls = MultiSyncCollector if kind == "multi_sync" else MultiAsyncCollector
        collector = cls([per_worker] * workers, policy, num_threads=num_threads, **common)
    collector.set_seed(seed + replica_offset)
    return collector
