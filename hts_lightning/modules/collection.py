"""The training modules' binding to their collector: built, sharded, versioned, checkpointed."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from functools import partial

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torchrl.collectors import BaseCollector
from torchrl.envs import EnvBase

from hts_lightning.callbacks.stop_on_signal import stop_at_once_while
from hts_lightning.choices import CollectorKind, InferenceMode, OnEnvError, check_collector_kind
from hts_lightning.collectors.config import available_cores, check_thread_count
from hts_lightning.collectors.errors import BatchTimeoutError
from hts_lightning.collectors.factory import KINDS, make_collector, restore_state
from hts_lightning.modules._deadline import deadline

__all__ = ["CollectionBinding"]


class CollectionBinding:
    """The collector a training module learns from, and all the module needs of it, so that
    the module never needs to know which collector (:data:`~hts_lightning.choices.
    CollectorKind`, built by :func:`~hts_lightning.collectors.make_collector`) it
    drives: this rank's shard, policy versions mapped onto the module's updates, weights sent,
    env restarts, checkpoint state of every rank.

    Every wait for a batch is bounded by ``batch_timeout`` seconds (``None``: unbounded): past
    it, :class:`~hts_lightning.collectors.BatchTimeoutError` names the collector and the batch
    it was collecting. A stop signal during the wait ends the run at once (see
    :class:`~hts_lightning.callbacks.StopOnSignal`). ``learner_threads`` (``None``: the
    collector's rule) sets the learner's torch threads; ``learner_takes_every_core`` makes the
    default every core (under DDP, the rank's share of the machine) instead.

    Example:
        >>> from hts_lightning.envs import env_factory
        >>> from hts_lightning.models import make_actor_critic
        >>> create_env = env_factory("Counting")
        >>> probe = create_env()
        >>> model = make_actor_critic(probe.observation_spec, probe.action_spec)
        >>> actor = model.get_policy_operator()
        >>> binding = CollectionBinding(kind="hts", create_env=create_env, policy=actor,
        ...     num_envs=2, num_workers=0, sync_interval=4, seed=0)
        >>> loader = binding.start(batches=2, updates=0, world_size=1, rank=0)
        >>> [binding.behaviour_version(batch, updates=0) for batch in loader]
        [0, 0]
    """

    def __init__(
        self,
        *,
        kind: CollectorKind,
        create_env: Callable[[], EnvBase],
        policy: TensorDictModuleBase,
        num_envs: int,
        num_workers: int,
        sync_interval: int,
        seed: int,
        device: str | None = None,
        inference: InferenceMode = "auto",
        on_env_error: OnEnvError = "raise",
        batch_timeout: float | None = 600.0,
        learner_threads: int | None = None,
        learner_takes_every_core: bool = False,
        worker_niceness: int = 0,
        overlap: bool = True,
    ):
        check_thread_count(learner_threads, "learner_threads", "the collector's rule")
        if batch_timeout is not None and not batch_timeout > 0:
            raise ValueError(
                f"batch_timeout={batch_timeout!r}: give the seconds a batch may take (> 0), "
                "or None for no bound."
            )
        self.kind = kind
        self._behaviour = KINDS[check_collector_kind(kind)]
        self.batch_timeout = batch_timeout
        self.learner_takes_every_core = learner_takes_every_core
        self._make = dict(
            create_env_fn=create_env,
            policy=policy,
            num_workers=num_workers,
            sync_interval=sync_interval,
            seed=seed,
            device=device,
            inference=inference,
            on_env_error=on_env_error,
            num_threads=learner_threads,
            worker_niceness=worker_niceness,
            overlap=overlap,
        )
        self.num_envs = num_envs
        self.collector: BaseCollector | None = None
        self._local_envs = num_envs
        # A new collector counts policy versions from 0 with the weights it is given (the
        # trained ones on a second fit): the module's update count then is the offset.
        self._version_offset = 0
        self._state_to_load: dict | None = None
        # The collector's state kept for a checkpoint when the collector cannot give it: a
        # sync collector's from before the wait for a batch in progress (a stop signal may cut
        # that wait short), a TorchRL collector's from before its shutdown.
        self._kept_state: dict | None = None
        self._waiting = False  # in a wait for a batch (still so when a stop ended the wait)

    def check_ranks(self, world_size: int) -> None:
        """Every rank collects ``num_envs / world_size`` replicas: refuse a remainder."""
        if self.num_envs % world_size:
            raise ValueError(
                f"num_envs={self.num_envs} is not divisible by the {world_size} ranks "
                "(devices x num_nodes): every rank collects num_envs / ranks replicas. Choose "
                "num_envs as a multiple of the number of ranks."
            )

    def start(
        self, *, batches: int, updates: int, world_size: int, rank: int, ranks_here: int = 1
    ) -> _CollectorLoader:
        """This rank's collector for ``batches`` batches, ``updates`` updates into training
        (restored from :meth:`load_state_dict`'s state), as Lightning's train dataloader.
        ``ranks_here``: the ranks on this machine, which share its cores."""
        self.check_ranks(world_size)
        local = self._local_envs = self.num_envs // world_size
        self._version_offset = updates
        self._kept_state = None
        self._waiting = False
        make = self._make
        if make["num_threads"] is None and (ranks_here > 1 or self.learner_takes_every_core):
            # Each rank's learner gets its share of the cores, less one for its collection
            # unless it takes every core: every rank taking the collector's cores - 1
            # oversubscribed the machine.
            share = available_cores() // ranks_here
            spare = 0 if self.learner_takes_every_core else 1
            make = {**make, "num_threads": max(1, share - spare)}
        self.collector = make_collector(
            self.kind,
            num_envs=local,
            total_frames=batches * local * make["sync_interval"],
            replica_offset=rank * local,
            **make,
        )
        saved, self._state_to_load = self._state_to_load, None
        if saved is not None:
            restore_state(self.collector, saved, rank=rank, world_size=world_size)
        return _CollectorLoader(self)

    def _batches(self) -> Iterator[TensorDictBase]:
        """The collector's batches, each wait for one bounded by ``batch_timeout``."""
        batches = iter(self.collector)
        for batch_number in itertools.count(1):
            self._kept_state = self._behaviour.state_before_wait(self.collector)
            # Between updates, nothing half done: a stop signal may end the run in this wait.
            self._waiting = True
            with (
                stop_at_once_while(),
                deadline(self.batch_timeout, partial(self._timed_out, batch_number)),
            ):
                batch = next(batches, None)
            self._waiting = False
            self._kept_state = None
            if batch is None:
                return
            yield batch

    def _timed_out(self, batch: int) -> BatchTimeoutError:
        return BatchTimeoutError(
            f"No batch from the {self.kind!r} collector within batch_timeout="
            f"{self.batch_timeout:g} s: it was collecting its batch {batch} ({self._local_envs} "
            f"env replicas x {self._make['sync_interval']} steps, in "
            f"{self._make['num_workers']} worker processes). "
            "An env step that never returns, or workers starved of CPU, hold a batch back. If "
            "a batch can take that long here (slow envs, a loaded machine), raise batch_timeout "
            "(model.init_args.batch_timeout, seconds; null for no bound)."
        )

    def behaviour_version(self, batch: TensorDictBase, *, updates: int) -> int | None:
        """The module's update count whose weights collected ``batch``; ``None`` when the
        collector records no policy version (TorchRL's)."""
        if "policy_version" not in batch:
            return None
        versions = batch["policy_version"]
        low, high = int(versions.min()), int(versions.max())
        if low != high:
            raise RuntimeError(f"A batch mixes policy versions {low}..{high}; expected one.")
        # Collector and module both count one per update: their difference maps versions (for
        # a fresh collector and for one restored on resume alike).
        sent = self._behaviour.policy_version(self.collector)
        return low + (self._version_offset if sent is None else updates - sent)

    def send_weights(self) -> None:
        """Hand the policy's weights to the collector (for the batch after the one in flight)."""
        if self.collector is not None:
            self.collector.update_policy_weights_()

    @property
    def env_restarts(self) -> int:
        """Env restarts after errors so far (``on_env_error="restart"``; 0 for TorchRL's)."""
        return self._behaviour.env_restarts(self.collector) if self.collector else 0

    def state_dict(self, world_size: int) -> dict | None:
        """The collector's state; under DDP, of every rank (saving runs on every rank)."""
        if self.collector is None:
            return None
        # A wait cut short by a stop signal: the state kept before it, or none.
        if self._kept_state is not None:
            state = self._kept_state
        else:
            state = self._behaviour.state(self.collector, waiting=self._waiting)
        states: list = [state]
        if world_size > 1:
            states = [None] * world_size
            torch.distributed.all_gather_object(states, state)
        return self._behaviour.checkpoint(states)

    def load_state_dict(self, saved: dict | None) -> None:
        """Restore :meth:`state_dict` into the next collector :meth:`start` builds."""
        self._state_to_load = saved

    def shutdown(self, *, keep_state: bool = False) -> None:
        """Stop the collector; with ``keep_state`` (the end of training) keep its state first:
        Lightning saves the last checkpoint after training ends (a run stopped by
        ``max_steps``), when TorchRL's collectors, shut down, can no longer give it."""
        if self.collector is None:
            return
        if keep_state and self._kept_state is None:
            self._kept_state = self._behaviour.state_at_end(self.collector)
        self.collector.shutdown()


class _CollectorLoader:
    """The collector as Lightning's train dataloader: a sized iterable over its batches.

    Its state lives in the module's checkpoint (every rank's collector, see
    :meth:`CollectionBinding.state_dict`), not in Lightning's loop state, which holds rank 0's
    only; it is "stateful" to Lightning with nothing to save, so that Lightning knows the run
    resumes mid-epoch correctly.
    """

    def __init__(self, binding: CollectionBinding):
        self._binding = binding

    def __iter__(self) -> Iterator[TensorDictBase]:
        return self._binding._batches()

    def __len__(self) -> int:
        return len(self._binding.collector)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        return None
