"""The table that builds the backend an HTSCollector's config chooses: where the policy acts
(``inference``) picks the backend (:class:`CollectingWorkers` or :class:`MainInference`, each
file says how it collects), and under main inference how replicas step (``backend``) picks the
executor. A new backend is one file with the calls of :class:`CollectingBackend` (or of
:class:`Executor`), one row below and one choice in :mod:`hts_lightning.choices`.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from hts_lightning.collectors.backends.in_process import local_executor
from hts_lightning.collectors.backends.main_inference import MainInference
from hts_lightning.collectors.backends.pipes import mp_context
from hts_lightning.collectors.backends.process_pool import ProcessExecutor
from hts_lightning.collectors.backends.protocols import CollectingBackend, Executor
from hts_lightning.collectors.backends.worker_inference import CollectingWorkers
from hts_lightning.collectors.config import CollectorConfig
from hts_lightning.collectors.core.engine import CollectionEngine
from hts_lightning.collectors.core.layout import Layout
from hts_lightning.collectors.core.policy_runner import PolicyRunner


def _worker_inference(config: CollectorConfig, runner, layout, replicas, storages, uniforms):
    for storage, uniform in zip(storages, uniforms, strict=True):
        storage.share_memory_()
        if uniform is not None:
            uniform.share_memory_()
    return CollectingWorkers(
        **replicas,
        policy=runner.policy,
        exploration_type=runner.exploration_type,
        storages=storages,
        uniforms=uniforms,
        inference_batch_size=config.inference_batch_size,
        num_workers=config.num_workers,
        mp_context=mp_context(config.mp_start_method),
        first_replica=config.replica_offset,  # the global index of replica 0
        niceness=config.worker_niceness,
        native_threads=config.num_workers if config.backend == "envpool" else None,
    )


def _main_inference(config: CollectorConfig, runner, layout, replicas, storages, uniforms):
    slots = layout.slots(config.num_envs)
    serial = config.backend == "python" and not config.num_workers
    executor = EXECUTORS["serial" if serial else config.backend](config, replicas, slots)
    engine = CollectionEngine(
        executor=executor,
        runner=runner,
        slots=slots,
        layout=layout,
        inference_batch_size=config.inference_batch_size,
        first_replica=config.replica_offset,
    )
    return MainInference(
        executor=executor,
        engine=engine,
        storages=storages,
        uniforms=uniforms,
        threaded=config.num_workers > 0,
    )


def _in_process(config: CollectorConfig, replicas, slots) -> Executor:
    # An envpool's C++ threads (one at least) or TorchRL envs one after another.
    native = max(1, config.num_workers) if config.backend == "envpool" else None
    return local_executor(
        **replicas,
        slots=slots,
        inference_batch_size=config.inference_batch_size,
        native_threads=native,
    )


def _process_pool(config: CollectorConfig, replicas, slots) -> Executor:
    slots.share_memory_()
    return ProcessExecutor(
        **replicas,
        slots=slots,
        num_workers=config.num_workers,
        mp_context=mp_context(config.mp_start_method),
        niceness=config.worker_niceness,
    )


#: Where the policy acts (the config's ``inference``) -> the backend.
BACKENDS = {"workers": _worker_inference, "main": _main_inference}
#: How replicas step under main inference (the config's ``backend``; ``"serial"``: the
#: Python envs in this thread) -> the executor.
EXECUTORS = {"python": _process_pool, "serial": _in_process, "envpool": _in_process}


def build_backend(
    config: CollectorConfig,
    *,
    runner: PolicyRunner,
    layout: Layout,
    seeds: list[int],
    states: list,
    storages: list[TensorDictBase],
    uniforms: list[torch.Tensor | None],
) -> CollectingBackend:
    """The backend of ``config``, filling the batch storages ``storages`` with the action
    noise ``uniforms``; the replicas start from ``seeds`` and ``states`` (``None``: reset)."""
    # The replicas, where they start, and what an env error does: the same for every backend.
    replicas = dict(
        create_env_fns=list(config.create_env_fns),
        seeds=seeds,
        states=states,
        layout=layout,
        on_env_error=config.on_env_error,
    )
    return BACKENDS[config.inference](config, runner, layout, replicas, storages, uniforms)
