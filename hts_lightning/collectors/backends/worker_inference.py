"""Inference in the workers: each worker process acts for, and steps, its own replicas.

On a CPU-only machine the main process is busy learning; one central inference loop there
competes with the learner for the GIL and a core. Here every worker runs the same collection
engine as the serial mode over its block of replicas, with its own view of the policy: the
parameters live in shared memory and the collector writes new weights into them between
batches, when no worker is collecting. Results go straight into the shared batch storage
(rows of the worker's replicas); the pipes carry only "collect into buffer i" and "done".
"""

from __future__ import annotations

import pickle
import traceback

import numpy as np
import torch

from hts_lightning.collectors.backends.in_process import local_executor
from hts_lightning.collectors.backends.pipes import (
    DONE,
    READY,
    WorkerPool,
    prepare_worker_process,
    receive,
    report_error,
    send,
)
from hts_lightning.collectors.backends.protocols import CollectingBackend
from hts_lightning.collectors.core.engine import CollectionEngine
from hts_lightning.collectors.core.layout import Layout
from hts_lightning.collectors.core.policy_runner import PolicyRunner
from hts_lightning.collectors.errors import EnvReplicaError

_BATCH = b"B"


def _collecting_worker(
    block: list[int],
    create_env_fns: list,
    seeds: list[int],
    states: list,
    conn,
    *,
    policy,
    exploration_type,
    storages: list,
    uniforms: list,
    layout: Layout,
    inference_batch_size: int,
    first_replica: int,
    stop_flag: torch.Tensor,
    on_env_error: str,
    niceness: int,
    native_threads: int | None,
) -> None:
    # envpool's threads keep the normal policy: only the Python step path was measured.
    prepare_worker_process(niceness, batch_scheduling=not native_threads)
    slots = layout.slots(len(block))
    # The envpool backend: this worker's pool steps its block of replicas in native_threads
    # threads (one worker process per block that fills whole inference chunks).
    executor = local_executor(
        create_env_fns=create_env_fns,
        seeds=seeds,
        states=states,
        slots=slots,
        layout=layout,
        on_env_error=on_env_error,
        inference_batch_size=inference_batch_size,
        native_threads=native_threads,
    )
    rows = slice(block[0], block[-1] + 1)
    try:
        executor.start()
        runner = PolicyRunner(policy, device=torch.device("cpu"), exploration_type=exploration_type)
        stop = stop_flag.numpy()  # read once a step: a numpy read costs a tenth of torch's
        engine = CollectionEngine(
            executor=executor,
            runner=runner,
            slots=slots,
            layout=layout,
            inference_batch_size=inference_batch_size,
            first_replica=first_replica + block[0],
            should_stop=lambda: bool(stop[0]),
        )
        running = send(conn, READY)
        while running and (message := receive(conn)) is not None:
            index = message[1]
            uniform = None if uniforms[index] is None else uniforms[index][rows]
            engine.collect(storages[index][rows], uniform)
            # The replicas' states at the batch end, where the next batch starts: what a
            # checkpoint needs to collect that batch again on resume.
            states, restarts = executor.batch_ends()
            restarts = [(block[r], tb) for r, tb in restarts]
            running = send(conn, DONE + pickle.dumps((states, restarts)))
    except EnvReplicaError as error:
        report_error(conn, block[error.replica], error.env_traceback)
    except Exception:
        report_error(conn, None, traceback.format_exc())
    finally:
        executor.close()
        conn.close()


class CollectingWorkers(CollectingBackend):
    """``num_workers`` processes that each collect their block of every batch.

    With ``native_threads`` = W (the envpool backend) each process's envpool steps its block
    of replicas in C++ threads, W threads in all. There are as many processes as the replicas
    fill whole inference chunks (at most W; 16 replicas in chunks of 8: two), so that the
    Python work of acting runs on up to W cores at once and no process pays for padded rows;
    the inference never competes with the learner for the GIL (see benchmarks/RESULTS.md).
    ``worker_options``: the other keyword arguments of every worker (``_collecting_worker``'s).
    """

    def __init__(
        self,
        *,
        create_env_fns,
        seeds,
        states,
        inference_batch_size: int,
        num_workers: int,
        mp_context,
        native_threads: int | None = None,
        **worker_options,
    ):
        processes = num_workers
        if native_threads:  # envpool: W threads over processes that each fill a whole chunk
            processes = max(1, min(native_threads, len(create_env_fns) // inference_batch_size))
            native_threads = max(1, native_threads // processes)
        blocks = np.array_split(np.arange(len(create_env_fns)), processes)
        self._pool = WorkerPool(blocks, mp_context)
        # Set by stop: a worker abandons the batch in flight and reads its CLOSE, so
        # its envs are closed properly instead of the process being killed mid-batch.
        self._stop_flag = torch.zeros(1, dtype=torch.bool).share_memory_()

        self._replicas = (create_env_fns, seeds, states)
        self._common = dict(
            worker_options,
            inference_batch_size=inference_batch_size,
            stop_flag=self._stop_flag,
            native_threads=native_threads,
        )
        self._pending: set[int] = set()
        self._end_states: list[list] = [[] for _ in blocks]
        self._restarts: list = []

    def start(self, timeout: float = 300.0) -> None:
        self._pool.start(_collecting_worker, self._replicas, self._common, timeout)
        self._replicas = None  # the start states are used once; not kept alive

    def start_batch(self, index: int) -> None:
        for worker in range(len(self._pool.blocks)):
            self._pool.send(worker, _BATCH + bytes([index]))
        self._pending = set(range(len(self._pool.blocks)))

    def wait(self) -> None:
        while self._pending:
            for worker, message in self._pool.wait():
                if message[:1] == DONE:
                    self._end_states[worker], restarts = pickle.loads(message[1:])
                    self._restarts.extend(restarts)
                    self._pending.discard(worker)

    def batch_ends(self) -> tuple[list, list]:
        restarts, self._restarts = sorted(self._restarts), []
        return [state for block in self._end_states for state in block], restarts

    def stop(self, timeout: float = 5.0) -> None:
        self._pending = set()
        self._stop_flag.fill_(True)
        self._pool.close(timeout)
