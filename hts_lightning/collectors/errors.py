"""Errors raised to the collectors' consumer: the HTSCollector's, carrying the replica they
concern, and the bound on the wait for a batch from any collector."""

from __future__ import annotations

__all__ = ["BatchTimeoutError", "EnvReplicaError", "WorkerDiedError"]


class BatchTimeoutError(RuntimeError):
    """No batch came from a collector within the training module's ``batch_timeout``.

    Not a ``TimeoutError``: the collectors' own wait loops catch those and wait on.
    """


class EnvReplicaError(RuntimeError):
    """An env replica raised; ``replica`` is its index, the message holds its traceback."""

    def __init__(self, replica: int, env_traceback: str):
        self.replica = replica
        self.env_traceback = env_traceback
        super().__init__(f"Environment replica {replica} raised an exception:\n{env_traceback}")

    def shifted(self, offset: int) -> EnvReplicaError:
        """The same error with the replica's global index (a shard's first is ``offset``)."""
        return EnvReplicaError(self.replica + offset, self.env_traceback)


class WorkerDiedError(RuntimeError):
    """A worker process ended without being asked to (killed, crashed, out of memory)."""

    def __init__(
        self, worker: int, replicas: list[int], exitcode: int | None, cause: str | None = None
    ):
        self.worker = worker
        self.replicas = replicas
        self.exitcode = exitcode
        #: What made it die, when the parent could tell (else the memory hint is given).
        self.cause = cause
        hint = cause or "If it was killed for memory, use fewer envs per worker."
        super().__init__(
            f"Collector worker {worker} (env replicas {replicas[0]}..{replicas[-1]}) died "
            f"with exit code {exitcode}. {hint}"
        )

    def shifted(self, offset: int) -> WorkerDiedError:
        """The same error with the replicas' global indices (a shard's first is ``offset``)."""
        replicas = [r + offset for r in self.replicas]
        return WorkerDiedError(self.worker, replicas, self.exitcode, self.cause)
