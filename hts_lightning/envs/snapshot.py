"""Env snapshots: the internal state exact resume needs to put a replica back where it was.

A checkpoint taken between updates must let a resumed run collect the batch in flight again,
bitwise. The observation to act on next travels in the TensorDict; what lives inside the env
(the emulator, the physics state, the env's RNG, a wrapper's frame buffers, an episode-step
counter) is what :func:`save_env_state` captures:

- TorchRL envs that implement ``snapshot()`` (a picklable state) and ``restore(snapshot)``:
  ours, and any of yours that does (see tests/collectors/spec_envs.py for one);
- gymnasium envs behind TorchRL's gym wrappers: every gymnasium wrapper's attributes (pure
  Python: frame stacks, max-pool buffers, elapsed steps, our Atari wrappers' lives and game
  statistics), the unwrapped env's attributes for
  classic-control and toy-text envs, and for ALE the emulator state with its RNG
  (``clone_state(include_rng=True)``) plus the env's own numpy RNG (no-op starts);
- TorchRL transforms must be stateless ones (their state is in the TensorDict).

Anything else (Google Research Football's engine, MuJoCo, Box2D, stateful transforms) cannot be
saved: :func:`save_env_state` returns ``None`` and the collector re-seeds such replicas on resume.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec
from torchrl.envs import (
    Compose,
    EnvBase,
    RewardClipping,
    RewardSum,
    StepCounter,
    TransformedEnv,
)
from torchrl.envs.gym_like import GymLikeEnv

from hts_lightning._compat import gym_like_env
from hts_lightning.envs.transforms import ClipActions

__all__ = ["load_env_state", "save_env_state"]

# Transforms whose state is the TensorDict itself: nothing to save.
_STATELESS_TRANSFORMS = (Compose, StepCounter, RewardSum, RewardClipping, ClipActions)
# gymnasium wrappers whose attributes are their whole state: gymnasium's and ours (Atari's
# episodic life and FIRE reset).
_PURE_PYTHON_WRAPPERS = ("gymnasium.wrappers", "hts_lightning.envs.atari")
# Unwrapped gymnasium envs whose attributes are their whole state (pure Python and numpy).
_PURE_PYTHON_ENV_PACKAGES = ("gymnasium.envs.classic_control.", "gymnasium.envs.toy_text.")
# Attributes that are handles or fixed configuration, not state: the wrapped env, the emulator
# (saved separately), the arguments the env was built with.
_NOT_STATE = ("env", "ale", "_saved_kwargs", "_ezpickle_args", "_ezpickle_kwargs")


def save_env_state(env: EnvBase) -> Any | None:
    """A picklable copy of ``env``'s internal state, or ``None`` if it cannot save one.

    Example:
        >>> import torch
        >>> from hts_lightning.envs.classic import make_gym_env
        >>> env = make_gym_env("CartPole-v1", seed=0)
        >>> push_left = env.reset().set("action", torch.tensor([1, 0]))
        >>> state = save_env_state(env)
        >>> first = env.step(push_left.clone())["next", "observation"]
        >>> load_env_state(env, state)
        >>> torch.equal(env.step(push_left.clone())["next", "observation"], first)
        True
    """
    base = env
    while isinstance(base, TransformedEnv):
        if not _stateless(base.transform):
            return None
        base = base.base_env
    if callable(getattr(base, "snapshot", None)):
        return ("own", base.snapshot())
    if isinstance(base, GymLikeEnv) and _gymnasium_supported(gym_like_env(base)):
        return ("gymnasium", [_layer_state(layer) for layer in _layers(gym_like_env(base))])
    return None


def load_env_state(env: EnvBase, state: Any) -> None:
    """Put ``env`` (built by the same factory) in the state :func:`save_env_state` returned."""
    base = env
    while isinstance(base, TransformedEnv):
        base = base.base_env
    kind, payload = state
    if kind == "own":
        base.restore(payload)
        return
    layers = _layers(gym_like_env(base))
    if len(layers) != len(payload):
        raise ValueError(
            f"The env state has {len(payload)} gymnasium layers, this env {len(layers)}: it was "
            "saved from an env built differently."
        )
    for layer, layer_state in zip(layers, payload, strict=True):
        for key, value in layer_state.items():
            if key == "ale":
                layer.restore_state(value)
            else:
                setattr(layer, key, copy.deepcopy(value))


def _stateless(transform) -> bool:
    if isinstance(transform, Compose):
        return all(_stateless(t) for t in transform.transforms)
    return isinstance(transform, _STATELESS_TRANSFORMS)


def _layers(env: gym.Env) -> list[gym.Env]:
    layers = [env]
    while isinstance(layers[-1], gym.Wrapper):
        layers.append(layers[-1].env)
    return layers


def _gymnasium_supported(env: gym.Env) -> bool:
    *wrappers, inner = _layers(env)
    wrappers_ok = all(type(w).__module__.startswith(_PURE_PYTHON_WRAPPERS) for w in wrappers)
    return wrappers_ok and (
        _is_ale(inner) or type(inner).__module__.startswith(_PURE_PYTHON_ENV_PACKAGES)
    )


def _is_ale(env: gym.Env) -> bool:
    return type(env).__module__ == "ale_py.env" and hasattr(env, "clone_state")


def _layer_state(layer: gym.Env) -> dict[str, Any]:
    state = {
        key: copy.deepcopy(value)
        for key, value in vars(layer).items()
        # Spaces and specs are fixed at construction (and large for pixel observations).
        if key not in _NOT_STATE and not isinstance(value, (gym.Space, EnvSpec))
    }
    if _is_ale(layer):
        state["ale"] = layer.clone_state(include_rng=True)
    return state
