"""Per-replica seeds: a replica's randomness is a function of (seed, global replica index)."""

from __future__ import annotations

import numpy as np


def replica_seeds(seed: int, replicas: range) -> list[tuple[int, int]]:
    """(env seed, action-noise seed) for each global replica index in ``replicas``.

    The seeds come from numpy's ``SeedSequence`` keyed by the replica's global index, so a shard
    of replicas (one rank of many) gets exactly the seeds those replicas would have had in one
    process holding them all.
    """
    seeds = []
    for replica in replicas:
        state = np.random.SeedSequence(seed, spawn_key=(replica,)).generate_state(2)
        seeds.append((int(state[0]) & 0x7FFFFFFF, int(state[1])))
    return seeds


def resume_seed(seed: int, replica: int, batch: int) -> int:
    """A fresh env seed for a replica restarted at ``batch`` of a resumed run (for envs that
    cannot save their state): a function of the seed, the global replica index and the batch."""
    state = np.random.SeedSequence(seed, spawn_key=(replica, batch + 1)).generate_state(1)
    return int(state[0]) & 0x7FFFFFFF


def restart_seed(env_seed: int, restart: int) -> int:
    """The env seed of a replica's ``restart``-th re-creation after an env error (with
    ``on_env_error="restart"``): a function of its own seed and the restart count."""
    state = np.random.SeedSequence(env_seed, spawn_key=(restart,)).generate_state(1)
    return int(state[0]) & 0x7FFFFFFF
