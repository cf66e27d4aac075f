"""One entry point from an env id to a picklable replica factory."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from torchrl.envs import EnvBase, TransformedEnv

from hts_lightning.choices import check_env_backend
from hts_lightning.envs._registry import check_env_id, check_football_scenario, with_episode_stats
from hts_lightning.envs.atari import make_atari_env
from hts_lightning.envs.classic import make_gym_env
from hts_lightning.envs.envpool import envpool_factory
from hts_lightning.envs.football import make_football_env
from hts_lightning.envs.latency import VariableLatencyEnv
from hts_lightning.envs.testing import CountingEnv

__all__ = ["env_factory"]

FOOTBALL_PREFIX = "GFootball/"


# The package's own envs (CountingEnv for tests and fault drills), by id.
_OWN_ENVS = {"VariableLatency": VariableLatencyEnv, "Counting": CountingEnv}


def make_own_env(env_class: type[EnvBase], **env_kwargs) -> TransformedEnv:
    """``env_class(**env_kwargs)`` reporting ``"episode_reward"`` and ``"step_count"``."""
    return with_episode_stats(env_class(**env_kwargs))


def env_factory(env_id: str, *, backend: str = "python", **env_kwargs) -> Callable[[], EnvBase]:
    """A picklable factory for ``env_id``, checked now (before any process starts).

    ``"ALE/..."`` ids get the Atari preprocessing (``make_atari_env``), ``"VariableLatency"``
    the variable-latency env, ``"Counting"`` the :class:`CountingEnv` of the tests (its
    ``fail_at`` drills the fault paths), ``"GFootball/<scenario>"`` a Google Research Football
    scenario (``make_football_env``; needs the ``football`` extra, and says how to install it
    when it is missing), any other gymnasium id ``make_gym_env``; each reports
    the raw ``"episode_reward"`` and ``"step_count"`` that the training modules log. ``env_kwargs``
    go to the factory (e.g. ``repeat_action_probability`` for Atari, ``std`` for latency).
    ``backend="envpool"`` gives the same ALE or classic-control env stepped by envpool (an
    :class:`~hts_lightning.envs.envpool.EnvpoolFactory`, which the HTSCollector steps with its
    native backend); it stops here, naming the fallback, where envpool is not installed.

    Example:
        >>> make = env_factory("CartPole-v1")
        >>> make().action_spec.shape
        torch.Size([2])
    """
    check_env_backend(backend)
    if backend == "envpool":
        return envpool_factory(env_id, **env_kwargs)
    if env_id in _OWN_ENVS:
        _OWN_ENVS[env_id](**env_kwargs)  # validates the arguments here
        return partial(make_own_env, _OWN_ENVS[env_id], **env_kwargs)
    if env_id.startswith(FOOTBALL_PREFIX):
        scenario = env_id.removeprefix(FOOTBALL_PREFIX)
        check_football_scenario(scenario)
        return partial(make_football_env, scenario, **env_kwargs)
    check_env_id(env_id)
    make = make_atari_env if env_id.startswith("ALE/") else make_gym_env
    return partial(make, env_id, **env_kwargs)
