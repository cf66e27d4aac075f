"""TorchRL's own collectors set up like the HTSCollector, for baselines and comparisons."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from tensordict.nn import TensorDictModuleBase
from torchrl.collectors import BaseCollector, Collector, MultiAsyncCollector, MultiSyncCollector
from torchrl.envs import EnvBase, ParallelEnv, SerialEnv

from hts_lightning.collectors.hts import HTSCollector

__all__ = ["COLLECTOR_KINDS", "make_collector"]

#: hts: HTSCollector; sync: Collector over a ParallelEnv (synchronous at every step, the classic
#: A2C/PPO vectorized setup); multi_sync: MultiSyncCollector (synchronous at batch boundaries,
#: no overlap); multi_async: MultiAsyncCollector (asynchronous, unbounded policy lag).
COLLECTOR_KINDS = ("hts", "sync", "multi_sync", "multi_async")


def make_collector(
    kind: str,
    create_env_fn: Callable[[], EnvBase],
    policy: TensorDictModuleBase,
    *,
    num_envs: int,
    num_workers: int,
    sync_interval: int,
    total_frames: int = -1,
    seed: int = 0,
    device: torch.device | str | None = None,
    inference: str = "auto",
    replica_offset: int = 0,
    on_env_error: str = "raise",
) -> BaseCollector:
    """A collector of ``kind`` over ``num_envs`` replicas in ``num_workers`` processes.

    Every kind yields ``num_envs * sync_interval`` frames per batch from the same env factory
    and policy. The TorchRL baselines hold the process count at ``num_workers`` by giving each
    process a ``SerialEnv`` of ``num_envs / num_workers`` replicas. ``inference`` is the
    HTSCollector's (where its policy runs). ``replica_offset`` is the global index of the first
    replica of a shard (one rank of many): the HTSCollector seeds each replica by its global
    index; the TorchRL collectors, which seed their envs ``seed, seed + 1, ...``, start at
    ``seed + replica_offset``. ``on_env_error`` is the HTSCollector's (TorchRL's collectors
    always raise).
    """
    if kind not in COLLECTOR_KINDS:
        raise ValueError(f"Unknown collector kind {kind!r}; choose one of {COLLECTOR_KINDS}.")
    frames_per_batch = num_envs * sync_interval
    if kind != "hts" and on_env_error != "raise":
        raise ValueError(f"on_env_error={on_env_error!r} needs the HTSCollector, not {kind!r}.")
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
        )
    workers = max(num_workers, 1)
    if num_envs % workers:
        raise ValueError(
            f"num_envs={num_envs} is not divisible by num_workers={num_workers}: choose "
            "num_workers among the divisors of num_envs."
        )
    per_worker = partial(SerialEnv, num_envs // workers, create_env_fn)
    common = dict(
        frames_per_batch=frames_per_batch,
        total_frames=total_frames,
        policy_device=device,
        env_device="cpu",
        storing_device="cpu",
        auto_register_policy_transforms=False,
    )
    if kind == "sync":
        collector = Collector(ParallelEnv(workers, per_worker), policy, **common)
    else:
        cls = MultiSyncCollector if kind == "multi_sync" else MultiAsyncCollector
        collector = cls([per_worker] * workers, policy, **common)
    collector.set_seed(seed + replica_offset)
    return collector
