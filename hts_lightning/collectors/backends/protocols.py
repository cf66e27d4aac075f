"""What the HTSCollector asks of a backend (where the policy acts and how replicas step)."""

from __future__ import annotations

from typing import Protocol


class CollectingBackend(Protocol):
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
