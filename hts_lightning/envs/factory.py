"""One entry point from an env id to a picklable replica factory."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from torchrl.data import Bounded, TensorSpec
from torchrl.envs import EnvBase, TransformedEnv

from hts_lightning.choices import check_env_backend
from hts_lightning.envs._shared import (
    FOOTBALL_PREFIX,
    check_env_id,
    check_football_scenario,
    with_episode_stats,
)
from hts_lightning.envs.atari import make_atari_env
from hts_lightning.envs.classic import make_gym_env
from hts_lightning.envs.envpool import EnvpoolFactory, envpool_factory
from hts_lightning.envs.football import make_football_env
from hts_lightning.envs.latency import VariableLatencyEnv
from hts_lightning.envs.testing import CountingEnv
from hts_lightning.envs.transforms import ClipActions
from hts_lightning.envs.user import user_env_factory
from hts_lightning.import_path import is_import_path

__all__ = ["env_factory", "with_clipped_actions"]

# The package's own envs (CountingEnv for tests and fault drills), by id.
_OWN_ENVS = {"VariableLatency": VariableLatencyEnv, "Counting": CountingEnv}


def make_own_env(env_class: type[EnvBase], **env_kwargs) -> TransformedEnv:
    """``env_class(**env_kwargs)`` reporting ``"episode_reward"`` and ``"step_count"``."""
    return with_episode_stats(env_class(**env_kwargs))


def make_clipped(create_env: Callable[[], EnvBase]) -> EnvBase:
    """``create_env()`` whose box actions reach it clipped to the action spec's bounds; the
    action in the caller's TensorDict (the policy's sample, and its log-probability) stays
    as it was."""
    env = create_env()
    spec = env.action_spec
    if isinstance(spec, Bounded) and spec.dtype.is_floating_point:
        env = TransformedEnv(env, ClipActions(low=spec.space.low, high=spec.space.high))
    return env


def with_clipped_actions(
    create_env: Callable[[], EnvBase], action_spec: TensorSpec
) -> Callable[[], EnvBase]:
    """A picklable factory of :func:`make_clipped` envs (a Gaussian policy's samples, as
    Stable-Baselines3 and CleanRL clip them) when ``action_spec`` (the env's) is a float
    ``Bounded`` box; otherwise, and for envpool factories (which clip in the pool),
    ``create_env`` itself.

    Example:
        >>> import torch
        >>> make = env_factory("Pendulum-v1")
        >>> env = with_clipped_actions(make, make().action_spec)()
        >>> td = env.reset().set("action", torch.tensor([5.0]))
        >>> env.step(td)["action"]  # the env was stepped with 2.0, its bound
        tensor([5.])
    """
    box = isinstance(action_spec, Bounded) and action_spec.dtype.is_floating_point
    if not box or isinstance(create_env, EnvpoolFactory):
        return create_env
    return partial(make_clipped, create_env)


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

    Your own env: ``env_id`` is the import path of a callable returning a TorchRL env or a
    gymnasium env (wrappers and all), ``"package.module:make_env"`` (a class works too);
    ``env_kwargs`` are its keyword arguments (:func:`~hts_lightning.envs.user.make_user_env`).

    Example:
        >>> make = env_factory("CartPole-v1")
        >>> make().action_spec.shape
        torch.Size([2])
    """
    check_env_backend(backend)
    if is_import_path(env_id):
        if backend != "python":
            raise ValueError(
                f"{env_id!r} is your own env: it is stepped by the Python env stack. Use "
                "env_backend 'python' (envpool steps its own registered envs only)."
            )
        return user_env_factory(env_id, **env_kwargs)
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
