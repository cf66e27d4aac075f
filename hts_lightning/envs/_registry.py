"""Early, friendly checks of environment ids (before any process starts)."""

from __future__ import annotations

import difflib

import gymnasium as gym


def _registered_ids() -> list[str]:
    try:
        import ale_py

        gym.register_envs(ale_py)
    except ImportError:  # pragma: no cover - ale-py is a core dependency
        pass
    return sorted(gym.registry.keys())


def check_env_id(env_id: str) -> None:
    """Raise a ValueError naming an unknown gymnasium id and the closest registered ones."""
    ids = _registered_ids()
    if env_id in ids:
        return
    close = difflib.get_close_matches(env_id, ids, n=5, cutoff=0.5)
    hint = f" Did you mean one of: {', '.join(close)}?" if close else ""
    raise ValueError(f"Unknown environment id {env_id!r}.{hint}")
