"""Replicas as TorchRL envs stepped in worker processes, each at its own pace.

The engine (in this process) sends a worker the replicas to step (their actions are in the
shared slots); the worker steps them and answers each replica's index as it is done. Step
results go straight into the shared slots, indexed by replica; the pipes only carry replica
indices, so arrival order never touches the data.
"""

from __future__ import annotations

import pickle
import struct
import traceback
from collections.abc import Callable

import numpy as np
from tensordict import TensorDictBase
from torchrl.envs import EnvBase

from hts_lightning.collectors.backends.in_process import ReplicaState, ReplicaStepper, Restart
from hts_lightning.collectors.backends.pipes import (
    READY,
    STEPPED,
    WorkerPool,
    prepare_worker_process,
    receive,
    report_error,
    send,
)
from hts_lightning.collectors.backends.protocols import Executor
from hts_lightning.collectors.core.layout import Layout

STATES = b"P"  # parent -> stepping worker: send the states of your replicas


def _stepping_worker(
    block: list[int],
    create_env_fns: list[Callable[[], EnvBase]],
    seeds: list[int],
    states: list[ReplicaState | None],
    conn,
    *,
    slots: TensorDictBase,
    layout: Layout,
    on_env_error: str,
    niceness: int,
) -> None:
    prepare_worker_process(niceness)
    stepper = ReplicaStepper(slots, layout, on_env_error)
    try:
        for replica, create_env_fn, seed, state in zip(
            block, create_env_fns, seeds, states, strict=True
        ):
            stepper.add(replica, create_env_fn, seed, state)
        running = send(conn, READY)
        while running and (message := receive(conn)) is not None:
            if message == STATES:
                reply = {r: stepper.state(r) for r in stepper.envs}
                running = send(conn, STATES + pickle.dumps((reply, stepper.take_restarts())))
                continue
            for replica in np.frombuffer(message, dtype=np.int32).tolist():
                stepper.step(replica)
                running = send(conn, STEPPED + struct.pack("i", replica))
    except Exception:  # the env's own errors, whatever their type, go to the parent
        report_error(conn, stepper.current_replica, traceback.format_exc())
    finally:
        stepper.close()
        conn.close()


class ProcessExecutor(Executor):
    """Steps contiguous blocks of replicas in ``num_workers`` processes, each at its own pace.

    ``worker_options``: the keyword arguments of every worker (``_stepping_worker``'s).
    """

    def __init__(self, *, create_env_fns, seeds, states, num_workers, mp_context, **worker_options):
        blocks = np.array_split(np.arange(len(create_env_fns)), num_workers)
        self._owner = np.concatenate([np.full(len(b), w) for w, b in enumerate(blocks)])
        self._pool = WorkerPool(blocks, mp_context)
        self._replicas = (create_env_fns, seeds, states)
        self._common = worker_options

    def start(self, timeout: float = 300.0) -> None:
        self._pool.start(_stepping_worker, self._replicas, self._common, timeout)
        self._replicas = None  # the states are used once; not kept alive

    def batch_ends(self) -> tuple[list[ReplicaState], list[Restart]]:
        """Asked of the workers between batches: no step is outstanding then, so the only
        replies are the states."""
        for worker in range(len(self._pool.blocks)):
            self._pool.send(worker, STATES)
        states: dict[int, ReplicaState] = {}
        restarts: list[Restart] = []
        while len(states) < len(self._owner):
            for _, message in self._pool.wait():
                block_states, block_restarts = pickle.loads(message[1:])
                states.update(block_states)
                restarts.extend(block_restarts)
        return [states[r] for r in range(len(self._owner))], sorted(restarts)

    def send(self, replicas: np.ndarray) -> None:
        owners = self._owner[replicas]
        for worker in np.unique(owners).tolist():
            self._pool.send(worker, replicas[owners == worker].astype(np.int32).tobytes())

    def wait_ready(self) -> np.ndarray:
        messages = self._pool.wait()
        return np.asarray([struct.unpack("i", m[1:])[0] for _, m in messages], dtype=np.int64)

    def stop_workers(self, timeout: float = 5.0) -> None:
        self._pool.stop(timeout)

    def close(self, timeout: float = 5.0) -> None:
        self._pool.close(timeout)
