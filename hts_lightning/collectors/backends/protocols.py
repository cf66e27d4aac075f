"""What the HTSCollector asks of a backend (where the policy acts and how replicas step), and
what the collection engine asks of an executor (whatever steps the replicas)."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class CollectingBackend(Protocol):
    """Given the weights, fills storage ``index`` (one of the two [num_envs, sync_interval]
    batch storages) while the consumer works on the other. The rest (lag, versions, noise, the
    fixed inference shape, storage by (replica, step), state for resume) is the collector's and
    the engine's, shared by all backends."""

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


class Executor(Protocol):
    """Steps replicas through the shared slots (one row per replica: its root, its last step,
    its action): the engine writes an action, :meth:`send` s the replica, and reads the step
    once :meth:`wait_ready` returns it. Executors subclass this class: the optional abilities
    below have defaults that an executor without them keeps."""

    #: Root keys no step changes: the engine writes them once a batch, not per chunk.
    constant_root_keys: tuple = ()
    #: Next keys the executor writes straight into a batch's storage (see
    #: :meth:`write_steps_into`); the engine copies the others from the slots.
    next_keys_written: tuple = ()

    def start(self) -> None:
        """Create the replicas' envs and put every replica's first observation in its slot."""

    def send(self, replicas: np.ndarray) -> None:
        """Step each of ``replicas`` with the action in its slot; returns at once."""

    def wait_ready(self) -> np.ndarray:
        """Block until at least one sent replica has stepped; every replica that has."""

    def batch_ends(self) -> tuple[list, list]:
        """Between batches: as :meth:`CollectingBackend.batch_ends`, since the last call."""

    def write_steps_into(self, next_: dict, row: np.ndarray) -> None:
        """For :attr:`next_keys_written`: write replica r's next step at row ``row[r]`` of
        ``next_`` (numpy views of a batch storage's next keys)."""
        raise NotImplementedError

    def stopping(self) -> bool:
        """Whether a stop was asked: the engine then leaves its batch unfinished."""
        return False

    def stop_workers(self, timeout: float = 5.0) -> None:
        """End the processes or threads that step (the envs close with them)."""

    def close(self, timeout: float = 5.0) -> None:
        """End everything; idempotent."""
