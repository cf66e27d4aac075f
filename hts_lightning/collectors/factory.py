"""Every collector kind (the HTSCollector and TorchRL's baselines) made, and driven by a
training loop, through one interface: :func:`make_collector` and :data:`KINDS`."""

from __future__ import annotations

import logging
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

__all__ = ["KINDS", "CollectorKindBehaviour", "check_collector_options", "make_collector"]

_log = logging.getLogger(__name__)


class CollectorKindBehaviour:
    """What a training loop needs to know of a collector kind beyond TorchRL's collector API:
    its options, where its state comes from for a checkpoint, and its env restarts. This
    class is TorchRL's collectors' behaviour; the kinds differ where they override it.

    Example:
        >>> KINDS["multi_async"].checkpoint([None])  # its state cannot be asked: start anew
        {'kind': 'new'}
    """

    def __init__(self, name: str):
        self.name = name

    def check_options(self, *, on_env_error: str, worker_niceness: int, overlap: bool) -> None:
        """Refuses the HTSCollector's own options: TorchRL's collectors have none."""
        if not overlap:
            raise ValueError(
                f"overlap=False needs collector='hts' (the HTSCollector without its overlap): "
                f"TorchRL's {self.name!r} collector has no such switch. Use collector='hts', "
                "or drop overlap."
            )
        if on_env_error != "raise":
            raise ValueError(
                f"on_env_error={on_env_error!r} needs collector='hts': TorchRL's collectors "
                f"({self.name!r}) stop at an env error. Use collector='hts' or "
                "on_env_error='raise'."
            )
        if worker_niceness:
            raise ValueError(
                f"worker_niceness={worker_niceness} needs the HTSCollector: TorchRL's collectors "
                f"({self.name!r}) run their workers at the caller's priority. Use "
                "collector='hts' or worker_niceness=0."
            )

    def state_before_wait(self, collector: BaseCollector) -> dict | None:
        """The state to keep before waiting for a batch, for a checkpoint taken if a stop
        signal cuts the wait short (``None``: ask :meth:`state` then)."""
        return None

    def state(self, collector: BaseCollector, *, waiting: bool) -> dict | None:
        """The collector's state for a checkpoint (``None``: it cannot be had now); ``waiting``:
        a wait for a batch was cut short by a stop signal."""
        return collector.state_dict()

    def state_at_end(self, collector: BaseCollector) -> dict | None:
        """The state to keep before the collector shuts down at the end of training, when
        Lightning has yet to save the last checkpoint (``None``: it stays askable)."""
        return collector.state_dict()

    def checkpoint(self, states: list) -> dict:
        """The checkpoint entry from every rank's :meth:`state`."""
        if None in states:
            _log.warning(
                "The %s collector was stopped in a wait for a batch: its state is not saved, "
                "and a run resumed from this checkpoint starts a new collector.",
                self.name,
            )
            return {"kind": "new"}
        return {"kind": "per_rank", "states": states}

    def env_restarts(self, collector: BaseCollector) -> int:
        """Env restarts after errors so far (``on_env_error="restart"``)."""
        return 0

    def policy_version(self, collector: BaseCollector) -> int | None:
        """Weight updates sent so far, where the collector counts them (``None``: not)."""
        return None


class _HTS(CollectorKindBehaviour):
    def check_options(self, *, on_env_error: str, worker_niceness: int, overlap: bool) -> None:
        return None  # every option is the HTSCollector's own

    def state_at_end(self, collector: HTSCollector) -> None:
        return None  # its state outlives its processes

    def checkpoint(self, states: list) -> dict:
        # One state of all replicas: it restores into any number of ranks.
        return {"kind": "hts", "state": HTSCollector.merge_state_dicts(states)}

    def env_restarts(self, collector: HTSCollector) -> int:
        return collector.env_restarts

    def policy_version(self, collector: HTSCollector) -> int:
        return collector.policy_version


class _Sync(CollectorKindBehaviour):
    def state_before_wait(self, collector: BaseCollector) -> dict:
        # Its state_dict() answers through the ParallelEnv's workers, and a stop signal may
        # leave one stalled in its step (asking it then hung for minutes and lost the
        # checkpoint).
        return collector.state_dict()


class _MultiSync(CollectorKindBehaviour):
    def state(self, collector: BaseCollector, *, waiting: bool) -> dict | None:
        # In a wait cut short its workers may be stalled (see _Sync); kept before every wait
        # it would cost 15 of a 220 ms CartPole batch.
        return None if waiting else collector.state_dict()


class _MultiAsync(CollectorKindBehaviour):
    # TorchRL 0.14.1's MultiAsyncCollector.state_dict() asks each worker over its pipe; a
    # worker in the middle of a rollout (one always is, between batches) drops that rollout
    # to answer, then waits for a "continue" that the collector's iterator sends only once
    # that rollout arrives: no batch ever comes again. Its state (frame counters, trajectory
    # ids, the workers' copies of the weights; no env RNG) is not needed to go on: a resumed
    # run starts a new collector.
    def state(self, collector: BaseCollector, *, waiting: bool) -> None:
        return None

    def state_at_end(self, collector: BaseCollector) -> None:
        return None

    def checkpoint(self, states: list) -> dict:
        return {"kind": "new"}


#: Each collector kind (:data:`~hts_lightning.choices.CollectorKind`) -> its behaviour.
KINDS: dict[str, CollectorKindBehaviour] = {
    "hts": _HTS("hts"),
    "sync": _Sync("sync"),
    "multi_sync": _MultiSync("multi_sync"),
    "multi_async": _MultiAsync("multi_async"),
}


def check_collector_options(
    kind: CollectorKind, *, on_env_error: str, worker_niceness: int, overlap: bool = True
) -> None:
    """Refuses a kind that is not one, and the HTSCollector's own options for a TorchRL
    collector, which has none."""
    check_collector_kind(kind)
    KINDS[kind].check_options(
        on_env_error=on_env_error, worker_niceness=worker_niceness, overlap=overlap
    )


def restore_state(collector: BaseCollector, saved: dict, *, rank: int, world_size: int) -> None:
    """Load a checkpoint entry of :meth:`CollectorKindBehaviour.checkpoint` into this rank's
    new ``collector`` (``{"kind": "new"}``: nothing to load)."""
    if saved["kind"] == "hts":
        collector.load_state_dict(saved["state"])
    elif saved["kind"] == "per_rank":
        if len(saved["states"]) != world_size:
            raise ValueError(
                f"The checkpoint holds the collectors of {len(saved['states'])} ranks; resume "
                f"it with the same number of ranks (got {world_size})."
            )
        collector.load_state_dict(saved["states"][rank])


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
    process a ``SerialEnv`` of ``num_envs / num_workers`` replicas, and seed their envs
    ``seed + replica_offset, ...`` (``replica_offset``: the global index of a shard's first
    replica, by which the HTSCollector seeds each). ``inference``, ``on_env_error``,
    ``inference_batch_size``, ``worker_niceness`` and ``overlap`` are the HTSCollector's only
    (``CollectorKindBehaviour.check_options``). ``num_threads``: the calling process's
    torch threads once collection starts (``None``: each collector's own rule; TorchRL's
    leaves one core per worker free).
    """
    check_collector_options(
        kind, on_env_error=on_env_error, worker_niceness=worker_niceness, overlap=overlap
    )
    frames_per_batch = num_envs * sync_interval
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
