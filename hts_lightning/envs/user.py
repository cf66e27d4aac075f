"""Environments a user brings: any callable that returns a TorchRL env or a gymnasium env,
named by its import path (``"my_package.envs:make_env"``) so that worker processes can
import it too."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import gymnasium
from torchrl.envs import EnvBase, GymWrapper, TransformedEnv

from hts_lightning.envs._shared import with_episode_stats
from hts_lightning.import_path import import_object

__all__ = ["make_user_env", "user_env_factory"]


def make_user_env(path: str, **env_kwargs) -> EnvBase:
    """``path``'s callable called with ``env_kwargs``, as a TorchRL env reporting
    ``"episode_reward"`` and ``"step_count"``: a gymnasium env is wrapped by ``GymWrapper``
    (with its wrappers); a TorchRL env is taken as it is."""
    env = import_object(path, what="env factory")(**env_kwargs)
    if isinstance(env, gymnasium.Env):
        env = GymWrapper(env)
    if not isinstance(env, EnvBase):
        raise TypeError(
            f"The env factory {path!r} returned a {type(env).__name__}; it must return a "
            "TorchRL EnvBase or a gymnasium.Env."
        )
    keys = env.observation_spec.keys(True, True)
    if isinstance(env, TransformedEnv) and {"episode_reward", "step_count"} <= set(keys):
        return env
    return with_episode_stats(env)


def user_env_factory(path: str, **env_kwargs) -> Callable[[], EnvBase]:
    """A picklable factory of the user's env at ``path``, built once now so that a mistake
    (a module that cannot be imported, a wrong argument, a wrong return type) is named
    before any process starts.

    Example:
        >>> make = user_env_factory("hts_lightning.envs.testing:CountingEnv", max_count=3)
        >>> make().rollout(5)["next", "step_count"][-1].item()
        3
    """
    make_user_env(path, **env_kwargs).close()
    return partial(make_user_env, path, **env_kwargs)
