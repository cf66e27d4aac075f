"""Gymnasium environments (classic control, MuJoCo, ...) through TorchRL's gym bindings."""

from __future__ import annotations

import torch
from torchrl.envs import DoubleToFloat, GymEnv, TransformedEnv

from hts_lightning.envs._shared import check_env_id, with_episode_stats

__all__ = ["make_gym_env"]


def make_gym_env(env_id: str, *, seed: int | None = None) -> TransformedEnv:
    """A gymnasium environment as a TorchRL env that reports its raw episode return.

    Args:
        env_id: a registered gymnasium id such as ``"CartPole-v1"``.
        seed: seeds the env (and so its whole trajectory given the actions). The HTSCollector
            reseeds every replica from its own seed, so it may be left ``None`` there.

    Returns:
        A ``TransformedEnv`` with ``StepCounter`` and ``RewardSum`` (``"episode_reward"``).

    Example:
        >>> env = make_gym_env("CartPole-v1", seed=0)
        >>> env.rollout(3)["next", "episode_reward"][-1].item()
        3.0
    """
    check_env_id(env_id)
    env = GymEnv(env_id)
    if any(spec.dtype == torch.float64 for spec in env.full_observation_spec.values(True, True)):
        # MuJoCo's float64 observations and actions as the networks' float32.
        env = TransformedEnv(env, DoubleToFloat())
    return with_episode_stats(env, seed=seed)
