"""Per-replica seeds: a replica's randomness is a function of (seed, global replica index)."""

from __future__ import annotations

import numpy as np


def replica_seeds(seed: int, replicas: range) -> list[tuple[int, int]]:
    """(env seed, action-noise seed) for each global replica index in ``replicas``.

    The seeds come from numpy's ``SeedSequence`` keyed by the replica's global index, so a shard
    of replicas (one rank of many) gets exactly the seeds those replicas would have had in one
    process holding them all.
    """
    states = [_state(seed, (replica,), 2) for replica in replicas]
    return [(int(env) & 0x7FFFFFFF, int(noise)) for env, noise in states]


def resume_seed(seed: int, replica: int, batch: int) -> int:
    """A fresh env seed for a replica restarted at ``batch`` of a resumed run (for envs that
    cannot save their state): a function of the seed, the global replica index and the batch."""
    return int(_state(seed, (replica, batch + 1), 1)[0]) & 0x7FFFFFFF


def restart_seed(env_seed: int, restart: int) -> int:
    """The env seed of a replica's ``restart``-th re-creation after an env error (with
    ``on_env_error="restart"``): a function of its own seed and the restart count."""
    return int(_state(env_seed, (restart,), 1)[0]) & 0x7FFFFFFF


def _state(entropy: int, key: tuple, words: int) -> np.ndarray:
    """``words`` 32-bit words of numpy's ``SeedSequence`` of ``entropy`` at ``key``."""
    return np.random.SeedSequence(entropy, spawn_key=key).generate_state(words)
