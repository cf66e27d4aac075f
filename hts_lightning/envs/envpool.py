"""envpool environments: the same games, stepped by envpool's C++ thread pool.

:func:`envpool_factory` turns an env id and the keyword arguments of :func:`make_atari_env` /
:func:`make_gym_env` into an :class:`EnvpoolFactory`. The factory does two jobs:

- called with no argument, it returns one replica as a TorchRL env (an envpool of one env
  behind ``StepCounter``/``RewardSum``/``RewardClipping``, as the Python path has): for
  probing specs, for evaluation and for any TorchRL collector;
- :meth:`EnvpoolFactory.make_pool` builds the asynchronous pool of many replicas that the
  HTSCollector's native backend steps (see ``collectors/backends/envpool.py``).

Google Research Football ids (``"GFootball/<scenario>"``) take envpool's native C++ port of
the engine; the port returns one channel-last frame a step, so both paths stack and transpose
its frames as the gfootball package's ``stacked`` observation (``envs/frame_stack.py``).

Both step the envs the same way (a finished episode is reset by envpool's auto-reset, the next
``send`` of that env) and seed each env by itself (envpool's per-env seeds), so a replica gives
the same trajectory on either, given its seed and actions (tested).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import warnings
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, OneHot, Unbounded
from torchrl.envs import EnvBase, TransformedEnv

from hts_lightning.envs._shared import (
    FOOTBALL_PREFIX,
    GAME_OVER,
    MissingDependencyError,
    did_you_mean,
    with_episode_stats,
)
from hts_lightning.envs.atari import make_atari_env
from hts_lightning.envs.frame_stack import FrameStack

__all__ = ["ENVPOOL_INSTALL", "EnvpoolFactory", "envpool_available", "envpool_factory"]

# envpool builds its float32 observation boxes from float64 bounds and gymnasium warns about
# it in every process that reads the spaces; our specs are float32 either way.
warnings.filterwarnings("ignore", message=".*precision lowered by casting to float32")

ENVPOOL_VERSION = "1.2.5"
ENVPOOL_INSTALL = (
    f"envpool {ENVPOOL_VERSION} has wheels for Linux x86-64 only (CPython 3.11); the README's "
    "install commands add it there. Elsewhere use the Python env stack: set "
    "`env_backend: python` (the default) in the recipe's model init_args."
)

_DONE_KEYS = ("done", "terminated", "truncated")

# make_atari_env's options and their defaults, which the envpool path keeps.
_ATARI_DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(make_atari_env).parameters.items()
    if parameter.kind is parameter.KEYWORD_ONLY and name != "seed"
}


def envpool_available() -> bool:
    """Whether envpool can be imported here."""
    return importlib.util.find_spec("envpool") is not None


# make_football_env's options that envpool's football port offers, with the values it has.
_FOOTBALL_OPTIONS = {
    "rewards": ("scoring",),
    "representation": ("extracted",),
    "num_controlled_players": (1,),
    "channels_first": (True,),
    "stacked": (True, False),
}


def _task_id(env_id: str) -> str:
    """envpool's id of ``env_id``: ``"ALE/Pong-v5"`` is ``"Pong-v5"``,
    ``"GFootball/academy_corner"`` is ``"gfootball/academy_corner-v1"``, classic-control and
    MuJoCo ids (``"HalfCheetah-v4"``) are the same. Only envpool's Atari, football,
    classic-control and gym-MuJoCo families are served (the keys and preprocessing of the
    others are not the Python path's)."""
    from envpool.registration import registry

    if env_id.startswith(FOOTBALL_PREFIX):
        families = ("envpool.gfootball",)
        task_id = f"gfootball/{env_id.removeprefix(FOOTBALL_PREFIX)}-v1"
    elif env_id.startswith("ALE/"):
        families, task_id = ("envpool.atari",), env_id.removeprefix("ALE/")
    else:
        families, task_id = ("envpool.classic_control", "envpool.mujoco.gym"), env_id
    known = sorted(t for t, (path, _, _) in registry.specs.items() if path in families)
    if task_id in known:
        return task_id
    # The suggestions are spelt as the id was ("ALE/Pong-v5", "GFootball/academy_corner").
    spelt = {
        "envpool.gfootball": lambda t: FOOTBALL_PREFIX + t.split("/")[1].removesuffix("-v1"),
        "envpool.atari": lambda t: "ALE/" + t,
    }.get(families[0], str)
    hint = did_you_mean(env_id, [spelt(t) for t in known], cutoff=0.6)
    raise ValueError(
        f"env_backend 'envpool' serves envpool's Atari ('ALE/<Game>-v5'), football "
        f"('GFootball/<scenario>'), classic-control and MuJoCo ('HalfCheetah-v4', ...) envs; "
        f"{env_id!r} is not one of them (looked for {task_id!r}).{hint} Use "
        "`env_backend: python` for other environments."
    )


@dataclasses.dataclass(frozen=True)
class EnvpoolFactory:
    """A picklable recipe of an envpool env: its id, envpool options and reward clipping.

    Attributes:
        env_id: the project's id (``"ALE/Pong-v5"``, ``"CartPole-v1"``).
        task_id: envpool's id (``"Pong-v5"``).
        options: keyword arguments of ``envpool.make`` (the preprocessing), as sorted pairs.
        clip_rewards: clip the training reward to [-1, 1] (``"episode_reward"`` stays raw).
        frame_stack: stack the last this many frames, channels first (the football port's
            frames, see ``envs/frame_stack.py``); 0 keeps envpool's observations as they are.

    Example:
        >>> make = envpool_factory("CartPole-v1")
        >>> make.task_id, make.clip_rewards
        ('CartPole-v1', False)
        >>> pool = make.make_pool(seeds=[3, 4], num_threads=1)
        >>> pool.config["num_envs"]
        2
    """

    env_id: str
    task_id: str
    options: tuple[tuple[str, Any], ...] = ()
    clip_rewards: bool = False
    frame_stack: int = 0

    @property
    def reports_games(self) -> bool:
        """Whether the replicas report games, not episodes (Atari with episodic life). A life
        loss ends the training episode, while the statistics (``"episode_reward"``,
        ``"step_count"``) run over the game and ``"game_over"`` marks its end, as OpenAI
        baselines and CleanRL report scores."""
        return bool(dict(self.options).get("episodic_life"))

    def frames(self, num_envs: int, space) -> FrameStack | None:
        """The frame stack of ``num_envs`` envs of observation ``space`` (``None``: none)."""
        if not self.frame_stack:
            return None
        return FrameStack(
            num_envs=num_envs, frame_shape=space.shape, depth=self.frame_stack, dtype=space.dtype
        )

    def __call__(self) -> TransformedEnv:
        """One replica as a TorchRL env, with the keys and transforms of the Python path."""
        return with_episode_stats(
            EnvpoolReplica(self), clip_rewards=self.clip_rewards, counted=self.reports_games
        )

    def make_pool(self, *, seeds: list[int], num_threads: int, batch_size: int = 1):
        """An envpool of ``len(seeds)`` envs (env ``i`` seeded ``seeds[i]``) whose ``recv``
        returns ``batch_size`` envs at a time (asynchronous when fewer than all; the default, 1,
        never waits for more envs than are stepping, whatever is held back)."""
        import envpool

        return envpool.make(
            self.task_id,
            env_type="gymnasium",
            num_envs=len(seeds),
            batch_size=batch_size,
            seed=[int(s) for s in seeds],
            num_threads=num_threads,
            **dict(self.options),
        )


class EnvpoolReplica(EnvBase):
    """One envpool env as a TorchRL env with an empty batch size (raw reward; no transforms).

    ``set_seed(s)`` seeds it as a native pool seeds a replica of seed ``s``. An episode that
    ended is reset the way the native backend resets it (envpool's auto-reset on the next
    ``send``), so that with ``episodic_life`` a life loss continues the game in both; then
    the replica keeps the game's statistics itself (see :attr:`EnvpoolFactory.reports_games`).
    """

    def __init__(self, factory: EnvpoolFactory, seed: int = 0):
        super().__init__(batch_size=torch.Size([]))
        self._factory = factory
        self._seed = seed
        self._pool = None
        self._seeded_observation = None
        self._done = False
        self._games = factory.reports_games
        self._game = (0.0, 0)  # the game's raw return and steps so far (with games)
        probe = factory.make_pool(seeds=[seed], num_threads=1)
        self._frames = factory.frames(1, probe.observation_space)
        self.observation_spec = Composite(
            observation=_box_spec(probe.observation_space, stack=factory.frame_stack)
        )
        if self._games:  # the keys StepCounter and RewardSum would add, and the game's end
            self.observation_spec["episode_reward"] = Unbounded(shape=(1,), dtype=torch.float32)
            self.observation_spec["step_count"] = Unbounded(shape=(1,), dtype=torch.int64)
            self.observation_spec[GAME_OVER] = Categorical(2, shape=(1,), dtype=torch.bool)
        space = probe.action_space
        self._discrete = hasattr(space, "n")
        self._bounds = None if self._discrete else (space.low, space.high)
        self.action_spec = (
            OneHot(int(space.n), dtype=torch.int64) if self._discrete else _box_spec(space)
        )
        self.reward_spec = Unbounded(shape=(1,), dtype=torch.float32)
        self.full_done_spec = Composite(
            {key: Categorical(2, shape=(1,), dtype=torch.bool) for key in _DONE_KEYS}
        )
        self._action_dtype = probe.spec.action_array_spec["action"].dtype
        del probe

    def _set_seed(self, seed: int | None) -> None:
        # TorchRL's collectors seed after their first reset and step on (gym envs reset when
        # seeded): the new pool is reset here and the next reset takes that first observation.
        # envpool takes int32 seeds; TorchRL's batched envs chain seeds over the uint32 range.
        self._seed = 0 if seed is None else int(seed) % (2**31 - 1)
        self._pool = self._factory.make_pool(seeds=[self._seed], num_threads=1)
        self._seeded_observation, _ = self._pool.reset()
        self._done = False
        self._game = (0.0, 0)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        if self._seeded_observation is not None:
            observation, self._seeded_observation = self._seeded_observation, None
        elif self._pool is None:
            self._pool = self._factory.make_pool(seeds=[self._seed], num_threads=1)
            observation, _ = self._pool.reset()
        elif self._done:  # envpool's auto-reset: the action is ignored
            self._pool.send(np.zeros(1, dtype=self._action_dtype), np.zeros(1, dtype=np.int32))
            observation = self._pool.recv()[0]
        else:
            observation, _ = self._pool.reset()
            self._game = (0.0, 0)
        self._done = False
        if self._frames is not None:
            observation = self._frames.reset(_ENV_0, observation)
        out = TensorDict(observation=self._observation(observation), **self.full_done_spec.zero())
        if self._games:  # a life lost goes on with the game's statistics
            out.update(self._game_stats(game_over=False))
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get("action")
        action = action.numpy()
        action = action.argmax(-1) if self._discrete else np.clip(action, *self._bounds)
        action = action.astype(self._action_dtype).reshape(1, *action.shape)
        self._seeded_observation = None
        observation, reward, terminated, truncated, info = self._pool.step(
            action, np.zeros(1, dtype=np.int32)
        )
        self._done = bool(terminated[0] or truncated[0])
        if self._frames is not None:
            observation = self._frames.step(_ENV_0, observation)
        out = TensorDict(
            observation=self._observation(observation),
            reward=torch.as_tensor(reward, dtype=torch.float32).reshape(1),
            done=torch.tensor([self._done]),
            terminated=torch.as_tensor(terminated).reshape(1),
            truncated=torch.as_tensor(truncated).reshape(1),
        )
        if self._games:
            game_return, game_steps = self._game
            # float32 sums, as RewardSum's and the native backend's
            self._game = (float(np.float32(game_return) + np.float32(reward[0])), game_steps + 1)
            game_over = bool(info["terminated"][0] or truncated[0])
            out.update(self._game_stats(game_over=game_over))
            if game_over:
                self._game = (0.0, 0)
        return out

    def _game_stats(self, *, game_over: bool) -> dict:
        game_return, game_steps = self._game
        return {
            "episode_reward": torch.tensor([game_return], dtype=torch.float32),
            "step_count": torch.tensor([game_steps], dtype=torch.int64),
            GAME_OVER: torch.tensor([game_over]),
        }

    def _observation(self, observations: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(observations[0]).to(self.observation_spec["observation"].dtype)

    def _close(self, *args, **kwargs) -> None:
        self._pool = self._seeded_observation = None


_ENV_0 = np.zeros(1, dtype=np.int64)


def _box_spec(space, *, stack: int = 0) -> Bounded:
    """The spec of a box space (of ``stack`` stacked frames of it, see ``FrameStack``);
    float64 (MuJoCo's) becomes float32, as the networks are."""
    low, high = space.low, space.high
    if stack:
        low, high = (np.tile(np.moveaxis(b, -1, 0), (stack, 1, 1)) for b in (low, high))
    low, high = torch.as_tensor(low), torch.as_tensor(high)
    if low.dtype == torch.float64:
        low, high = low.float(), high.float()
    return Bounded(low=low, high=high, shape=low.shape, dtype=low.dtype)


def envpool_factory(env_id: str, **env_kwargs) -> EnvpoolFactory:
    """The envpool version of ``env_factory(env_id, **env_kwargs)``, checked now.

    ``"ALE/..."`` ids take :func:`make_atari_env`'s keyword arguments, mapped onto envpool's
    options (the differences are listed in docs/guides/envpool.md). ``"GFootball/..."`` ids
    take :func:`~hts_lightning.envs.football.make_football_env`'s as far as envpool's port
    offers them: one player's super-mini-map, stacked or not, and the scoring reward, which
    must be asked for (``rewards="scoring"``). Other ids are envpool's classic-control and
    MuJoCo envs and take none.

    Example:
        >>> make = envpool_factory("CartPole-v1")
        >>> make().action_spec.shape
        torch.Size([2])
    """
    if not envpool_available():
        raise MissingDependencyError(f"env_backend 'envpool' needs envpool. {ENVPOOL_INSTALL}")
    task_id = _task_id(env_id)
    if env_id.startswith(FOOTBALL_PREFIX):
        return EnvpoolFactory(env_id, task_id, frame_stack=_football_frames(env_kwargs))
    if not env_id.startswith("ALE/"):
        if env_kwargs:
            raise ValueError(
                f"envpool's {task_id} takes no env_kwargs, got {sorted(env_kwargs)}. Remove "
                "them, or use `env_backend: python`."
            )
        return EnvpoolFactory(env_id, task_id)
    unknown = sorted(set(env_kwargs) - set(_ATARI_DEFAULTS))
    if unknown:
        raise ValueError(
            f"Unknown Atari env_kwargs {unknown} for env_backend 'envpool'; known: "
            f"{sorted(_ATARI_DEFAULTS)}."
        )
    settings = {**_ATARI_DEFAULTS, **env_kwargs}
    if settings["max_episode_frames"] % settings["frame_skip"]:
        raise ValueError(
            "envpool truncates Atari episodes after a number of agent steps: max_episode_frames "
            f"({settings['max_episode_frames']}) must be a multiple of frame_skip "
            f"({settings['frame_skip']})."
        )
    options = dict(
        frame_skip=settings["frame_skip"],
        stack_num=settings["frame_stack"],
        img_height=settings["screen_size"],
        img_width=settings["screen_size"],
        noop_max=settings["noop_max"],
        repeat_action_probability=float(settings["repeat_action_probability"]),
        episodic_life=settings["episodic_life"],
        max_episode_steps=settings["max_episode_frames"] // settings["frame_skip"],
        # As gymnasium's AtariPreprocessing: grayscale, area resize; rewards are clipped by
        # RewardClipping after RewardSum, so envpool's stay raw.
        use_fire_reset=settings["fire_reset"],
        gray_scale=True,
        use_inter_area_resize=True,
        reward_clip=False,
    )
    return EnvpoolFactory(env_id, task_id, tuple(sorted(options.items())), settings["clip_rewards"])


def _football_frames(env_kwargs: dict) -> int:
    """The frame stack of a football scenario on envpool's port for ``make_football_env``'s
    ``env_kwargs``: 4 frames (``stacked``, the default) or 1. The port gives the super-mini-map
    ("extracted") of one player with the scoring reward only; other options are refused with
    the way out, and ``rewards`` must be given, since the Python path's default
    (``"scoring,checkpoints"``) would silently become another training reward."""
    unknown = sorted(set(env_kwargs) - set(_FOOTBALL_OPTIONS))
    if unknown:
        raise ValueError(
            f"Unknown football env_kwargs {unknown} for env_backend 'envpool'; known: "
            f"{sorted(_FOOTBALL_OPTIONS)}."
        )
    if env_kwargs.get("rewards") != "scoring":
        raise ValueError(
            "envpool's football port gives the scoring reward only (+1 a goal for, -1 against), "
            f"not {env_kwargs.get('rewards', 'scoring,checkpoints')!r}: set env_kwargs "
            "{rewards: scoring} to train on it, or use `env_backend: python` for gfootball's "
            "checkpoint rewards."
        )
    for name, values in _FOOTBALL_OPTIONS.items():
        if name in env_kwargs and env_kwargs[name] not in values:
            raise ValueError(
                f"envpool's football port offers {name}={values[0]!r} only, got "
                f"{env_kwargs[name]!r}: leave it out, or use `env_backend: python`."
            )
    return 4 if env_kwargs.get("stacked", True) else 1
