"""What the env factories share: early, friendly checks of environment ids (before any
process starts), and the transforms every factory's env ends with."""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path

import gymnasium as gym
import torch
from tensordict import TensorDictBase
from torchrl.envs import Compose, EnvBase, RewardClipping, RewardSum, StepCounter, TransformedEnv


def did_you_mean(name: str, known: list[str], *, cutoff: float = 0.5, prefix: str = "") -> str:
    """The hint of an unknown-name error: the closest ``known`` names (with ``prefix``)."""
    close = difflib.get_close_matches(name, known, n=5, cutoff=cutoff)
    return f" Did you mean one of: {', '.join(prefix + c for c in close)}?" if close else ""


def check_env_id(env_id: str) -> None:
    """Raise a ValueError naming an unknown gymnasium id and the closest registered ones."""
    import ale_py  # here, not at import: env worker processes need not load it

    gym.register_envs(ale_py)
    ids = sorted(gym.registry.keys())
    if env_id not in ids:
        raise ValueError(f"Unknown environment id {env_id!r}.{did_you_mean(env_id, ids)}")


GFOOTBALL_VERSION = "2.10.2"
FOOTBALL_INSTALL_COMMAND = "scripts/install_football.sh .venv"
#: The env-id prefix of Google Research Football scenarios: "GFootball/<scenario>".
FOOTBALL_PREFIX = "GFootball/"


class MissingDependencyError(ValueError, ImportError):
    """An optional dependency is not installed (a ``ValueError``: ``hts-rl`` exits with 2)."""


def check_football_installed() -> None:
    """Raise :class:`MissingDependencyError` saying how to install the ``football`` extra."""
    missing = [m for m in ("gfootball", "gym", "six") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependencyError(
            f"Google Research Football needs the `football` extra, and {', '.join(missing)} "
            f"is not installed. gfootball {GFOOTBALL_VERSION} has no wheels: it is built from "
            "source (about 6 minutes on 2 cores; apt packages, so run as root). From the "
            f"repository root run\n    {FOOTBALL_INSTALL_COMMAND}\n(its argument is the venv "
            "to install into; see docs/guides/football.md)."
        )


def check_football_scenario(scenario: str) -> None:
    """Raise a ValueError naming an unknown gfootball scenario and the closest ones (the
    installed gfootball's scenarios, read from its files, not imported)."""
    check_football_installed()
    package = importlib.util.find_spec("gfootball").submodule_search_locations[0]
    folder = Path(package) / "scenarios"
    scenarios = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    if scenario not in scenarios:
        raise ValueError(
            f"Unknown Google Research Football scenario {scenario!r}."
            f"{did_you_mean(scenario, scenarios)} Known: {', '.join(scenarios)}."
        )


#: An Atari env with episodic life ends its training episode at a life loss but reports its
#: statistics (``"episode_reward"``, ``"step_count"``) over the whole game: this key marks where
#: a game ended (all lives lost, or truncated), and the reported episodes are the games.
GAME_OVER = "game_over"


def episode_ends(next_: TensorDictBase) -> torch.Tensor:
    """Where a reported episode ended in ``next_`` (a batch's ``"next"``), as its done's shape
    without the trailing 1: at the game's end where the env reports games (its
    ``"game_over"`` key: Atari with episodic life), else wherever it was done."""
    return next_.get(GAME_OVER if GAME_OVER in next_ else "done").squeeze(-1)


def with_episode_stats(
    env: EnvBase, *, seed: int | None = None, clip_rewards: bool = False, counted: bool = False
) -> TransformedEnv:
    """``env`` reporting ``"step_count"`` and the raw return ``"episode_reward"`` (``counted``:
    the env reports them itself), its training reward clipped to [-1, 1] when
    ``clip_rewards``; seeded when ``seed`` is given."""
    transforms = [] if counted else [StepCounter(), RewardSum()]
    if clip_rewards:
        # After RewardSum, so that "episode_reward" keeps the raw game score.
        transforms.append(RewardClipping(-1.0, 1.0))
    env = TransformedEnv(env, Compose(*transforms))
    if seed is not None:
        env.set_seed(seed)
    return env
