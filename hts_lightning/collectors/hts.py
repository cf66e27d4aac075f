"""HTSCollector: a TorchRL collector with HTS-RL overlap, batch sync and determinism."""

from __future__ import annotations

import copy
import logging
import math
import pickle
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn
from torchrl.collectors import BaseCollector
from torchrl.envs import EnvBase
from torchrl.envs.utils import ExplorationType

from hts_lightning._compat import clear_module_hooks
from hts_lightning.choices import Backend, InferenceMode, OnEnvError
from hts_lightning.collectors.backends.table import build_backend
from hts_lightning.collectors.config import CollectorConfig, available_cores
from hts_lightning.collectors.core.layout import Layout
from hts_lightning.collectors.core.policy_runner import PolicyRunner
from hts_lightning.collectors.core.seeding import replica_seeds, resume_seed
from hts_lightning.collectors.errors import EnvReplicaError, WorkerDiedError

__all__ = ["HTSCollector"]

_log = logging.getLogger(__name__)


class HTSCollector(BaseCollector):
    """Collects [num_envs, sync_interval] batches while the consumer learns on the previous one.

    HTS-RL's collector (Liu, Yeh, Schwing, NeurIPS 2020), as a TorchRL collector:

    - **Overlap with exactly one step of policy lag.** When batch k is handed out, batch k+1 starts
      at once with the weights most recently sent by :meth:`update_policy_weights_`. So weights
      sent after batch k is handed out are used from batch k+2 on, and batch k (k >= 1) is
      collected with the weights of update k-1; batches 0 and 1 use the initial weights. Every
      transition carries ``"policy_version"``, the number of weight updates sent before it was
      collected. The collector never runs more than one batch ahead, so a loop that never sends
      weights does not stall, and a slow learner never sees a lag of 2.
    - **Batch synchronization.** Replicas step independently inside a batch; inference runs on
      whichever replicas are ready, never waiting for the slowest one. The only barrier is the
      batch boundary.
    - **Determinism.** For a seed, every batch is bitwise identical whatever ``num_workers`` and
      whatever the env timing: each replica has its own env seed and action-noise generator,
      inference always runs on ``inference_batch_size`` rows, and data is stored by (replica,
      step). See ``core.engine`` for the details.

    Args:
        create_env_fn: a picklable callable returning a TorchRL ``EnvBase`` with an empty batch
            size, or a list of ``num_envs`` such callables.
        policy: a TensorDict module reading the observation and writing ``"action"`` (and, for a
            probabilistic actor, ``"action_log_prob"``). The collector acts with its own copy
            (without module hooks, which belong to the learner);
            :meth:`update_policy_weights_` with no argument copies the weights of this object.

    Keyword Args:
        num_envs: env replicas.
        num_workers: processes stepping the replicas (``num_envs`` must be a multiple; for
            the envpool backend: envpool's threads, any number); 0 runs the same engine in the
            calling thread, without overlap, for debugging.
        frames_per_batch: ``num_envs * sync_interval``.
        sync_interval: steps per replica per batch (alpha in the paper); derived from
            ``frames_per_batch`` when omitted.
        total_frames: frames to collect, -1 for no end.
        seed: the seed of every replica's env and action noise.
        device: where inference runs (default: the policy's device; the CPU for
            ``inference="workers"``).
        inference_batch_size: the fixed number of rows of every inference call, a property of
            the run (default ``min(num_envs, 8)``, whatever ``num_workers``): batches are
            bitwise identical across worker counts at one value. A worker acting for fewer
            replicas pads its calls to this size; with one replica per worker (the
            latency-bound regime) pass 1, and keep it when comparing worker counts.
        exploration_type: ``RANDOM`` samples actions from per-replica noise; other types call
            the policy in that mode.
        inference: where the policy runs. ``"workers"``: every worker acts for its own replicas
            with a shared-memory view of the weights (no inference in the learner's process:
            the choice for CPUs). ``"main"``: one loop in the collector's process acts for all
            replicas, batched across workers (the choice for a GPU). ``"auto"`` (default):
            ``"main"`` when ``device`` is a GPU or ``num_workers`` is 0, else ``"workers"``.
            On the CPU both give bitwise-identical batches (tested).
        replica_offset: global index of the first replica, for a shard of a larger set (one
            rank of many): replica seeds depend on the global index.
        num_threads: torch threads of the calling process (the learner's) once workers start;
            default: ``max(1, usable cores - 1)``, or every usable core beside niced workers
            (``worker_niceness`` > 0, envpool's threads with them but not under
            ``inference="main"``), never following ``num_workers``: a CPU learner's bits
            follow its thread count (docs/concepts/determinism.md).
        mp_start_method: start method of the worker processes.
        on_env_error: what an exception in an env's step does. ``"raise"`` (default): the
            iterator raises :class:`EnvReplicaError` naming the replica and the env's traceback.
            ``"restart"``: the replica's env is created again from its factory, seeded anew
            from its seed and restart count, and reset; the failed step is recorded as a
            truncation (last observation, zero reward, ``done`` and ``truncated`` set) and the
            batch goes on. Each restart is logged with the error and counted in
            :attr:`env_restarts`. That replica's trajectory is no longer the one an error-free
            run would give (the other replicas' are unchanged), and a replica that fails more
            than 100 times raises. Errors in env construction or reset, and dead workers,
            always raise.
        worker_niceness: added to the worker processes' niceness (Unix ``nice``, 0-19).
            Default 0: the workers keep the caller's priority. On a machine of its own, e.g.
            10 gives the learner's update (HTS's critical path) the cores first; beside other
            people's processes niced workers starve. Timing only, never the data; with the
            envpool backend it applies to the envpool threads the worker processes start, not
            under ``inference="main"`` (docs/guides/torchrl-loop.md, "Threads and priority").
        backend: how replicas are stepped. ``"python"``: each replica is a TorchRL env in a
            worker process (or this one). ``"envpool"``: for an
            :class:`~hts_lightning.envs.envpool.EnvpoolFactory`, the replicas are envs of
            envpools stepped by ``num_workers`` C++ threads in all (one for 0, in the caller's
            thread), acted for in worker processes that each own a pool of their replicas
            (``inference="workers"``) or in a thread of this process over one pool
            (``"main"``). Each env gets its replica's seed, so both paths give the same batches
            over the same envs (tested). envpool saves no env state (a resumed collector
            re-seeds every replica, logged) and has no ``on_env_error="restart"``.
            ``"auto"`` (default): ``"envpool"`` for an envpool factory, else ``"python"``.
        overlap: ``True`` (default): HTS-RL, batch k+1 is collected while the consumer learns
            on batch k. ``False``: a batch starts only when the consumer asks for it, with the
            weights sent since the last one (no lag, no overlap): synchronous A2C/PPO on the
            same replicas, seeds and noise, to measure what the overlap and its lag cost.
        cuda_graph: with inference on a CUDA device, capture the policy's step once as a CUDA
            graph and replay it (no per-kernel launches from Python, which shares the GIL with
            the learner); the batches equal those without it (tested). Default off.

    Example:
        >>> from functools import partial
        >>> from hts_lightning import HTSCollector, CountingEnv
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import ProbabilisticActor
        >>> from torchrl.modules.distributions import OneHotCategorical
        >>> net = TensorDictModule(torch.nn.Linear(1, 2), ["observation"], ["logits"])
        >>> policy = ProbabilisticActor(net, ["logits"], distribution_class=OneHotCategorical,
        ...                             return_log_prob=True)
        >>> with HTSCollector(partial(CountingEnv, max_count=4), policy, num_envs=2,
        ...                   num_workers=0, frames_per_batch=6, total_frames=12) as collector:
        ...     for batch in collector:
        ...         collector.update_policy_weights_()
        >>> batch["observation"].squeeze(-1).tolist()
        [[3.0, 0.0, 1.0], [3.0, 0.0, 1.0]]
    """

    def __init__(
        self,
        create_env_fn: Callable[[], EnvBase] | Sequence[Callable[[], EnvBase]],
        policy: TensorDictModuleBase,
        *,
        num_envs: int = 16,
        num_workers: int = 2,
        frames_per_batch: int | None = None,
        sync_interval: int | None = None,
        total_frames: int = -1,
        seed: int = 0,
        device: torch.device | str | None = None,
        inference_batch_size: int | None = None,
        exploration_type: ExplorationType = ExplorationType.RANDOM,
        inference: InferenceMode = "auto",
        replica_offset: int = 0,
        num_threads: int | None = None,
        mp_start_method: str = "forkserver",
        on_env_error: OnEnvError = "raise",
        worker_niceness: int = 0,
        backend: Backend = "auto",
        cuda_graph: bool = False,
        overlap: bool = True,
    ):
        super().__init__()
        self.config = config = CollectorConfig(
            create_env_fn=create_env_fn,
            policy=policy,
            num_envs=num_envs,
            num_workers=num_workers,
            frames_per_batch=frames_per_batch,
            sync_interval=sync_interval,
            total_frames=total_frames,
            device=device,
            inference_batch_size=inference_batch_size,
            exploration_type=exploration_type,
            inference=inference,
            replica_offset=replica_offset,
            num_threads=num_threads,
            mp_start_method=mp_start_method,
            on_env_error=on_env_error,
            worker_niceness=worker_niceness,
            backend=backend,
            cuda_graph=cuda_graph,
            overlap=overlap,
        )
        # The choices as TorchRL's collectors and users read them.
        self.num_envs, self.num_workers = num_envs, num_workers
        self.sync_interval = config.sync_interval
        self.frames_per_batch = self.requested_frames_per_batch = num_envs * self.sync_interval
        self.total_frames, self.replica_offset = total_frames, replica_offset
        self.device, self.inference = config.device, config.inference
        self.inference_batch_size = config.inference_batch_size
        self.backend, self.overlap = config.backend, overlap
        self.on_env_error, self.worker_niceness = on_env_error, worker_niceness
        self.num_threads = num_threads
        self._replicas = range(replica_offset, replica_offset + num_envs)  # global indices
        #: Env restarts after errors so far (``on_env_error="restart"``), over all replicas.
        self.env_restarts = 0
        self._policy = policy
        inference_policy = _without_hooks(copy.deepcopy(policy)).to(self.device)
        inference_policy.requires_grad_(False)
        if self.inference == "workers":
            inference_policy.share_memory()  # the workers' view of the weights
        self._inference_weights = TensorDict.from_module(inference_policy)
        self._policy_runner = PolicyRunner(
            inference_policy,
            device=self.device,
            exploration_type=exploration_type,
            cuda_graph=cuda_graph,
        )
        self._layout = Layout.probe(
            config.create_env_fns[0], self._policy_runner, self.inference_batch_size
        )
        self._seed = seed
        self._policy_version = 0
        self._behaviour_version = 0
        self._staged_weights: TensorDictBase | None = None
        self._batches_yielded = 0
        self._episode_counts = torch.zeros(num_envs, dtype=torch.int64)
        self._noise_states: list[torch.Tensor] | None = None
        # Each replica's (next root, env state) at the start of the batch in flight, where a
        # restored collector starts again (None: from resets).
        self._start_states: list | None = None
        self._resumes_in_flight_batch = False
        # Without overlap, between handing out a batch and the consumer asking for the next.
        self._between_batches = False
        self._started = False
        self._finalizer = None

    # --- TorchRL collector API -------------------------------------------------------------

    def iterator(self) -> Iterator[TensorDictBase]:
        if self._finished:
            return  # a finished collector yields nothing more
        if self._finalizer is not None and not self._finalizer.alive:
            raise RuntimeError("This HTSCollector was shut down; create a new one.")
        self._start()
        while not self._finished:
            if self._between_batches:  # without overlap: the consumer asks for the next one
                self._between_batches = False
                self._take_up_staged_weights()
                self._start_batch(self._batches_yielded % 2)
            try:
                self._backend.wait()
            except (EnvReplicaError, WorkerDiedError) as error:
                # Name the replica by its global index: a rank's shard starts at replica_offset.
                raise error.shifted(self.replica_offset) from None
            end_states, restarts = self._backend.batch_ends()
            self._log_restarts(restarts)
            finished = self._storages[self._batches_yielded % 2]
            self._finish_batch(finished)
            self._batches_yielded += 1
            if not self._finished:
                self._start_states = end_states
            if self.overlap:
                self._take_up_staged_weights()
                if not self._finished:
                    self._start_batch(self._batches_yielded % 2)
                yield finished.clone()
                continue
            # Where the next batch will start, for a checkpoint taken before it does.
            self._noise_states = [g.get_state() for g in self._noise_generators]
            self._between_batches = True
            yield finished.clone()
        self.shutdown()

    def update_policy_weights_(
        self,
        policy_or_weights: TensorDictBase | nn.Module | dict | None = None,
        *,
        weights: TensorDictBase | dict | None = None,
        policy: nn.Module | None = None,
        worker_ids: int | list[int] | torch.device | list[torch.device] | None = None,
        model_id: str | None = None,
        weights_dict: dict | None = None,
        **kwargs,
    ) -> None:
        """Send new weights; they are used from the batch after the one being collected.

        The calling conventions of TorchRL's ``BaseCollector.update_policy_weights_`` (0.14):
        no argument copies the weights of the ``policy`` given at construction (the learner
        optimizes that object in place); a module, a TensorDict of weights (as
        ``TensorDict.from_module`` gives) or a flat state dict may be passed positionally, or
        as ``weights=`` / ``policy=``, or as ``weights_dict={"policy": ...}``. The collector
        has one model, ``model_id="policy"``, and every worker acts with the same weights (a
        batch is collected by one policy version), so other model ids, ``worker_ids`` and
        per-worker weights are refused with a ``ValueError``; unknown keywords with a
        ``TypeError``.
        """
        if kwargs:
            raise TypeError(f"update_policy_weights_ got unexpected arguments {sorted(kwargs)}.")
        if worker_ids is not None:
            raise ValueError(
                f"worker_ids={worker_ids!r}: the HTSCollector's workers all act with the same "
                "weights (one policy version per batch). Call it without worker_ids."
            )
        if model_id not in (None, "policy") or (
            weights_dict is not None and (model_id is not None or set(weights_dict) != {"policy"})
        ):
            raise ValueError(
                f"model_id={model_id!r}, weights_dict keys "
                f"{None if weights_dict is None else sorted(map(str, weights_dict))}: the "
                "HTSCollector has one model, 'policy'. Omit model_id, or pass weights_dict="
                "{'policy': weights} alone."
            )
        from_dict = None if weights_dict is None else weights_dict["policy"]
        given = [s for s in (policy_or_weights, weights, policy, from_dict) if s is not None]
        if len(given) > 1:
            raise ValueError(
                "Give the weights once: positionally, or as weights=, policy= or weights_dict=."
            )
        source = given[0] if given else self._policy
        if isinstance(source, nn.Module):
            staged = TensorDict.from_module(source)
        elif isinstance(source, TensorDictBase):
            staged = source
        elif isinstance(source, dict) and source and all(isinstance(k, int) for k in source):
            raise ValueError(
                "Per-worker weights ({worker index: weights}) are not supported: the "
                "HTSCollector's workers all act with the same weights. Pass one set of weights."
            )
        else:
            staged = _unflat(source)
        self._staged_weights = staged.data.detach().clone()
        self._policy_version += 1

    @property
    def policy_version(self) -> int:
        """How many weight updates have been sent so far."""
        return self._policy_version

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed every replica's env and action noise from ``seed`` (before the first batch).

        Replica ``i`` gets seeds drawn from ``(seed, global index of i)``, so no two replicas
        share a seed; TorchRL's ``static_seed=True`` (every env the same seed) would make them
        identical, and is refused. Returns, as TorchRL's collectors do, the seed of the last
        env.

        Example:
            >>> from functools import partial
            >>> from hts_lightning import CountingEnv
            >>> from tensordict.nn import TensorDictModule
            >>> policy = TensorDictModule(torch.nn.Linear(1, 1), ["observation"], ["action"])
            >>> collector = HTSCollector(partial(CountingEnv, max_count=4), policy,
            ...                          num_envs=2, num_workers=0, sync_interval=2)
            >>> collector.set_seed(1) == collector.set_seed(1)
            True
        """
        if static_seed:
            raise ValueError(
                "static_seed=True would give every replica the same seed; the HTSCollector "
                "seeds each replica from (seed, replica index). Call set_seed(seed)."
            )
        if self._started:
            raise RuntimeError("HTSCollector.set_seed must be called before the first batch.")
        self._seed = seed
        self._noise_states = None
        return replica_seeds(seed, self._replicas[-1:])[0][0]

    def state_dict(self) -> OrderedDict:
        """Everything a new collector needs to go on exactly where this one is.

        Between batches, the batch in flight is described by where it starts: each replica's
        next observation and env state at its start (:func:`~hts_lightning.envs.save_env_state`;
        ``None`` for an env that cannot save one), its action-noise generator states, and the
        weights collecting it. With the weights sent since (used from the next batch), the
        versions, the batch count and the per-replica episode counts, a collector restored by
        :meth:`load_state_dict` yields the same batches, bitwise, as this one would have.
        Per-replica entries are in replica order from ``replica_offset``: the states of the
        shards of several ranks concatenate into the state of all replicas.
        """
        in_flight = self._started and not self._finished and not self._between_batches
        states = self._start_states
        return OrderedDict(
            seed=self._seed,
            replica_offset=self.replica_offset,
            inference_batch_size=self.inference_batch_size,
            policy_version=self._policy_version,
            behaviour_version=self._behaviour_version,
            batches_yielded=self._batches_yielded,
            episode_counts=self._episode_counts.clone(),
            noise_generator_states=self._noise_states,
            replica_states=None if states is None else [pickle.dumps(s) for s in states],
            weights=_flat(self._inference_weights) if in_flight else None,
            staged_weights=None if self._staged_weights is None else _flat(self._staged_weights),
        )

    def load_state_dict(self, state_dict: OrderedDict) -> None:
        """Restore :meth:`state_dict` (of this collector's replicas, or of a range of replicas
        that contains them: the concatenated shards of several ranks)."""
        if self._started:
            raise RuntimeError(
                "HTSCollector.load_state_dict must be called before the first batch."
            )
        first = state_dict.get("replica_offset", 0)
        count = len(state_dict["episode_counts"])
        start = self.replica_offset - first
        if start < 0 or start + self.num_envs > count:
            raise ValueError(
                f"The collector state holds replicas {first}..{first + count - 1}; this "
                f"collector steps replicas {self.replica_offset}.."
                f"{self.replica_offset + self.num_envs - 1}. Restore it into a collector with "
                "the same num_envs (in total over ranks)."
            )
        mine = slice(start, start + self.num_envs)
        saved_size = state_dict.get("inference_batch_size", self.inference_batch_size)
        if saved_size != self.inference_batch_size:
            raise ValueError(
                f"The collector state was collected with inference_batch_size={saved_size}, "
                f"this collector infers on {self.inference_batch_size} rows: its batches would "
                f"differ from the saved run's. Pass inference_batch_size={saved_size}."
            )
        self._seed = state_dict["seed"]
        self._policy_version = state_dict["policy_version"]
        self._behaviour_version = state_dict["behaviour_version"]
        self._batches_yielded = state_dict["batches_yielded"]
        self._episode_counts = state_dict["episode_counts"][mine].clone()
        noise = state_dict["noise_generator_states"]
        self._noise_states = None if noise is None else list(noise[mine])
        replica_states = state_dict.get("replica_states")
        if replica_states is not None:
            self._start_states = [pickle.loads(b) for b in replica_states[mine]]
        weights = state_dict.get("weights")
        self._resumes_in_flight_batch = weights is not None
        if weights is not None:
            self._inference_weights.update_(_unflat(weights))
        staged = state_dict.get("staged_weights")
        self._staged_weights = None if staged is None else _unflat(staged)

    @staticmethod
    def merge_state_dicts(states: Sequence[OrderedDict]) -> OrderedDict:
        """One state of all replicas from the states of consecutive shards (ranks, in order).

        The per-replica entries are concatenated; the rest (seed, versions, batch count,
        weights) is the same on every rank and taken from the first.
        """
        merged = OrderedDict(states[0])
        merged["episode_counts"] = torch.cat([s["episode_counts"] for s in states])
        for key in ("noise_generator_states", "replica_states"):
            if merged[key] is not None:
                merged[key] = [entry for s in states for entry in s[key]]
        return merged

    def shutdown(
        self, timeout: float | None = None, close_env: bool = True, raise_on_error: bool = True
    ) -> None:
        """Stop the collection thread and the worker processes; idempotent.

        TorchRL's arguments: ``raise_on_error=False`` swallows an error while stopping.
        ``timeout`` must be ``None``: the workers get a fixed bound (5 s each to close their
        envs, then they are killed), so shutdown never hangs but its bound cannot be chosen.
        ``close_env`` must be ``True``: the envs live in the processes that shutdown ends.
        """
        if timeout is not None:
            raise ValueError(
                f"timeout={timeout!r}: the HTSCollector stops its workers within a fixed bound "
                "(5 s each, then killed); call shutdown() without a timeout."
            )
        if not close_env:
            raise ValueError(
                "close_env=False: the HTSCollector's envs live in its worker processes, which "
                "shutdown ends. Call shutdown() (close_env=True)."
            )
        if self._finalizer is None:
            return
        try:
            self._finalizer()
        except Exception:
            if raise_on_error:
                raise

    def __len__(self) -> int:
        if self.total_frames > 0:
            return self._num_batches
        raise TypeError("An HTSCollector with total_frames=-1 never ends and has no length.")

    def __enter__(self) -> HTSCollector:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (
            f"HTSCollector(num_envs={self.num_envs}, num_workers={self.num_workers}, "
            f"sync_interval={self.sync_interval}, total_frames={self.total_frames}, "
            f"device={self.device})"
        )

    # --- internals -------------------------------------------------------------------------

    @property
    def _num_batches(self) -> int | None:
        return (
            None if self.total_frames < 0 else math.ceil(self.total_frames / self.frames_per_batch)
        )

    @property
    def _finished(self) -> bool:
        return self._num_batches is not None and self._batches_yielded >= self._num_batches

    def _start(self) -> None:
        if self._started:
            return
        layout = self._layout
        seeds = replica_seeds(self._seed, self._replicas)
        env_seeds = [env_seed for env_seed, _ in seeds]
        start_states = self._replica_start_states(env_seeds)
        self._noise_generators = [torch.Generator().manual_seed(noise) for _, noise in seeds]
        # Only a restored collector has noise states (a fresh one: none, nothing to set).
        restored = self._noise_states or ()
        for generator, state in zip(self._noise_generators, restored, strict=False):
            generator.set_state(state)
        storages = [layout.storage(self.num_envs, self.sync_interval) for _ in range(2)]
        width = layout.noise_width
        uniforms = [
            torch.zeros(self.num_envs, self.sync_interval, width) if width else None
            for _ in range(2)
        ]
        backend = build_backend(
            self.config,
            runner=self._policy_runner,
            layout=layout,
            seeds=env_seeds,
            states=start_states,
            storages=storages,
            uniforms=uniforms,
        )
        try:
            backend.start()
        except BaseException:
            backend.stop()
            raise
        if self.num_workers > 0:
            torch.set_num_threads(self.config.learner_threads(available_cores()))
        self._finalizer = weakref.finalize(self, backend.stop)
        self._backend, self._storages, self._uniforms = backend, storages, uniforms
        self._started = True
        if not self._resumes_in_flight_batch:
            # Weights sent before the first batch collect it; a restored batch in flight
            # keeps its own, and the staged ones wait for the batch after it.
            self._take_up_staged_weights()
        self._start_batch(self._batches_yielded % 2)

    def _replica_start_states(self, env_seeds: list[int]) -> list:
        """Per replica, the state to start from (``None``: reset); a restored replica whose env
        saved no state is re-seeded in ``env_seeds`` (``resume_seed``), as the warning says."""
        if self._start_states is None:
            return [None] * self.num_envs
        # (next root, env state) of each replica: None (a reset) where there is no env state
        states = [None if state[1] is None else state for state in self._start_states]
        lost = [replica for replica, state in enumerate(states) if state is None]
        for replica in lost:
            global_replica = self.replica_offset + replica
            env_seeds[replica] = resume_seed(self._seed, global_replica, self._batches_yielded)
            self._episode_counts[replica] += 1
        if lost:
            _log.warning(
                "Resuming: the envs of replicas %s cannot save their state; they are re-seeded "
                "deterministically and start new episodes, so their data differs from that of "
                "an uninterrupted run.",
                [self.replica_offset + r for r in lost],
            )
        return states

    def _start_batch(self, index: int) -> None:
        """Draw the batch's action noise and set it going (with the weights of
        ``_behaviour_version``, which change only between batches)."""
        uniform = self._uniforms[index]
        # What a restored collector needs to draw the noise of the batch now starting.
        self._noise_states = [g.get_state() for g in self._noise_generators]
        if uniform is not None:
            for replica, generator in enumerate(self._noise_generators):
                uniform[replica] = torch.rand(uniform.shape[1:], generator=generator)
        self._backend.start_batch(index)

    def _log_restarts(self, restarts: list) -> None:
        for local_replica, env_traceback in restarts:
            self.env_restarts += 1
            replica = local_replica + self.replica_offset
            last_line = env_traceback.strip().splitlines()[-1]
            _log.warning(
                "Environment replica %d raised and was restarted (on_env_error='restart'; "
                "restart %d of this collector; batch %d): %s",
                replica,
                self.env_restarts,
                self._batches_yielded,
                last_line,
            )
            _log.debug("Traceback of the env error of replica %d:\n%s", replica, env_traceback)

    def _finish_batch(self, out: TensorDictBase) -> None:
        # The weights that collected it: no batch starts before the last one is finished.
        out.get("policy_version").fill_(self._behaviour_version)
        # Trajectory id = episode number of the replica * num_envs + replica: unique, and a
        # function of the data alone.
        done = out.get(("next", "done")).reshape(*out.batch_size, -1).any(-1).long()
        episodes = self._episode_counts[:, None] + done.cumsum(1) - done
        replica = torch.arange(self.num_envs)[:, None]
        out.get(("collector", "traj_ids")).copy_(episodes * self.num_envs + replica)
        self._episode_counts += done.sum(1)

    def _take_up_staged_weights(self) -> None:
        # Called only while no batch is being collected: between batches, or before the first.
        if self._staged_weights is not None:
            self._inference_weights.update_(self._staged_weights)
            self._staged_weights = None
            self._behaviour_version = self._policy_version


def _flat(weights: TensorDictBase) -> dict[str, torch.Tensor]:
    """Weights as a flat ``{name: tensor}`` dict (checkpoint-friendly)."""
    return {key: value.detach().clone() for key, value in weights.flatten_keys(".").items()}


def _unflat(weights: dict[str, torch.Tensor]) -> TensorDictBase:
    return TensorDict(dict(weights)).unflatten_keys(".")


def _without_hooks(module: nn.Module) -> nn.Module:
    """The inference copy drops the learner's module hooks (K-FAC's statistics, profilers):
    they belong to the learner, and closures in them cannot travel to worker processes."""
    for submodule in module.modules():
        clear_module_hooks(submodule)
    return module
