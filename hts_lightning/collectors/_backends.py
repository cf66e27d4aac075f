"""The three ways of collecting, side by side, behind one protocol.

A backend answers one question: given the weights, fill storage ``index`` (one of the two
[num_envs, sync_interval] batch storages) while the consumer works on the other. Everything else
(lag, versions, action noise, the fixed inference shape, storage by (replica, step), state for
resume) is the collector's and the engine's, shared by all:

- :class:`CollectingWorkers`: worker processes each act for, and step, their own block of
  replicas with a shared-memory view of the weights (the CPU choice: no inference in the
  learner's process).
- :class:`MainInference` over TorchRL envs: this process acts for every replica, batched over
  the ready ones, in a collection thread; worker processes (``num_workers >= 1``) or this
  thread (``0``, serial, no overlap) step the envs (the GPU choice).
- the native backend: envpool's C++ threads step every replica, and the policy acts on the
  ready ones either in worker processes that each own a pool of their block of replicas
  (:class:`CollectingWorkers`, the CPU choice: no GIL shared with the learner) or in this
  process (:class:`MainInference` over an envpool, the GPU choice, and ``num_workers=0``).

A fourth (Ray actors across machines, a GPU simulator) is one more class with these calls:
``start()``, ``start_batch(index)``, ``wait()``, ``batch_ends()``, ``stop()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch
import torch.multiprocessing as mp
from tensordict import TensorDictBase

from hts_lightning.collectors._collecting import CollectingWorkers, local_executor
from hts_lightning.collectors._engine import CollectionEngine, InlineRunner, ThreadRunner
from hts_lightning.collectors._workers import ProcessExecutor

if TYPE_CHECKING:
    from hts_lightning.collectors.hts import HTSCollector


class Backend(Protocol):
    def start(self) -> None:
        """Create the envs (and processes) and reset, or restore, every replica."""

    def start_batch(self, index: int) -> None:
        """Begin filling storage ``index``; returns at once (or, serial, at :meth:`wait`)."""

    def wait(self) -> None:
        """Block until that batch is filled; raises the envs' and workers' errors."""

    def batch_ends(self) -> tuple[list, list]:
        """Each replica's (next root, env state or None) at the end of the last batch, and
        the (replica, traceback) of env restarts during it."""

    def stop(self) -> None:
        """End collection, processes and threads; idempotent, safe with a batch in flight."""


class MainInference:
    """The collection engine in this process over an executor that steps the replicas."""

    def __init__(
        self,
        *,
        executor,
        engine: CollectionEngine,
        buffers: list[TensorDictBase],
        uniforms: list[torch.Tensor | None],
        threaded: bool,
    ):
        self._executor = executor
        self._ends: list = [[], []]  # batch_ends

        def collect(index: int) -> None:  # holds no reference to this object or the collector
            engine.collect(buffers[index], uniforms[index])
            ends[:] = executor.batch_ends()

        ends = self._ends
        self._runner = ThreadRunner(collect) if threaded else InlineRunner(collect)

    def start(self) -> None:
        self._executor.start()

    def start_batch(self, index: int) -> None:
        self._runner.start(index)

    def wait(self) -> None:
        self._runner.wait()

    def batch_ends(self) -> tuple[list, list]:
        return tuple(self._ends)

    def stop(self) -> None:
        # Workers end first (the collection thread then sees them gone), the thread is
        # joined, and only then are the pipes (or the pool) closed under it.
        self._runner.request_stop()
        self._executor.stop_workers()
        self._runner.join()
        self._executor.close()


def build_backend(
    collector: HTSCollector,
    *,
    seeds: list[int],
    states: list,
    buffers: list[TensorDictBase],
    uniforms: list[torch.Tensor | None],
) -> Backend:
    """The backend of ``collector``'s choices (checked by ``_checks`` before), filling the
    batch storages ``buffers`` with the action noise ``uniforms``; the replicas start from
    ``seeds`` and ``states`` (``None``: reset)."""
    layout, runner, num_workers = collector._layout, collector._runner_policy, collector.num_workers
    native = collector.backend == "envpool"
    # The replicas, where they start, and what an env error does: the same for every backend.
    replicas = dict(
        create_env_fns=collector._create_env_fns,
        seeds=seeds,
        states=states,
        layout=layout,
        on_env_error=collector.on_env_error,
    )
    if collector.inference == "workers":
        for buffer, uniform in zip(buffers, uniforms, strict=True):
            buffer.share_memory_()
            if uniform is not None:
                uniform.share_memory_()
        return CollectingWorkers(
            **replicas,
            policy=runner.policy,
            exploration_type=runner.exploration_type,
            storages=buffers,
            uniforms=uniforms,
            inference_batch_size=collector.inference_batch_size,
            num_workers=num_workers,
            mp_context=mp_context(collector._mp_start_method),
            first_replica=collector.replica_offset,  # the global index of replica 0
            niceness=collector.worker_niceness,
            native_threads=num_workers if native else None,
        )
    slots = layout.slots(collector.num_envs)
    if native or num_workers == 0:
        executor = local_executor(
            **replicas,
            slots=slots,
            inference_batch_size=collector.inference_batch_size,
            native_threads=max(1, num_workers) if native else None,
        )
    else:
        slots.share_memory_()
        executor = ProcessExecutor(
            **replicas,
            slots=slots,
            num_workers=num_workers,
            mp_context=mp_context(collector._mp_start_method),
            niceness=collector.worker_niceness,
        )
    engine = CollectionEngine(
        executor=executor,
        runner=runner,
        slots=slots,
        layout=layout,
        inference_batch_size=collector.inference_batch_size,
        first_replica=collector.replica_offset,
        should_stop=getattr(executor, "stopping", None),
    )
    return MainInference(
        executor=executor,
        engine=engine,
        buffers=buffers,
        uniforms=uniforms,
        threaded=num_workers > 0,
    )


def mp_context(method: str):
    context = mp.get_context(method)
    if method == "forkserver":
        # The server imports torch and torchrl once; every worker is then a cheap fork of it.
        context.set_forkserver_preload(["hts_lightning.collectors._workers"])
    return context
