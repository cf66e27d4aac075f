"""Every use of another library's private attributes, in one place.

Each adapter names the attribute it reads or sets, the version it was checked against and why
no public API serves; ``tests/test_compat.py`` checks each one on the real library, so an
upgrade that moves one fails there, named, instead of somewhere downstream.

Checked against: torch 2.13.0, lightning 2.6.6, tensordict 0.14.3, torchrl 0.14.1, envpool
1.2.5, gfootball 2.10.2.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = [
    "clear_module_hooks",
    "default_validate_args",
    "envpool_recv",
    "envpool_send",
    "flatten_params",
    "football_config",
    "gym_like_env",
    "has_forward_hooks",
    "module_kwargs",
    "optimizer_step_callbacks",
    "request_stop_after_batch",
    "strategy_model_averager",
]


# --- Lightning -------------------------------------------------------------------------------


def request_stop_after_batch(trainer) -> None:
    """Set Lightning's SIGTERM flag (``trainer._signal_connector.received_sigterm``): after
    this batch every rank raises ``SIGTERMException``. ``Trainer.received_sigterm`` is public
    but read-only, and no public setter exists."""
    trainer._signal_connector.received_sigterm = True


def optimizer_step_callbacks(optimizer) -> tuple[Any, Any]:
    """A ``LightningOptimizer``'s ``(_on_before_step, _on_after_step)`` (``None`` where
    missing): what its ``step`` runs around the wrapped optimizer's, called directly to skip
    its closure handling on the manual-optimization path."""
    return getattr(optimizer, "_on_before_step", None), getattr(optimizer, "_on_after_step", None)


def strategy_model_averager(strategy) -> Any:
    """A DDP strategy's ``_model_averager`` (post-local SGD; ``None`` when unused): its
    ``optimizer_step`` is then more than the optimizer's step."""
    return getattr(strategy, "_model_averager", None)


def flatten_params(params: dict) -> dict:
    """Hyperparameters as Lightning's loggers flatten them (``_convert_params`` then
    ``_flatten_dict`` of ``lightning.fabric.utilities.logger``), so MLflow's params read as
    every Lightning logger's."""
    from lightning.fabric.utilities.logger import _convert_params, _flatten_dict

    return _flatten_dict(_convert_params(params))


# --- torch and tensordict --------------------------------------------------------------------


def has_forward_hooks(module: nn.Module) -> bool:
    """Whether ``module`` has forward or forward-pre hooks (``_forward_hooks``,
    ``_forward_pre_hooks``: torch offers registration, not inspection)."""
    return bool(module._forward_hooks or module._forward_pre_hooks)


def clear_module_hooks(module: nn.Module) -> None:
    """Drop every forward, forward-pre, backward and backward-pre hook of ``module`` (torch
    removes a hook only through the handle its registration returned)."""
    module._forward_hooks.clear()
    module._forward_pre_hooks.clear()
    module._backward_hooks.clear()
    module._backward_pre_hooks.clear()


def default_validate_args() -> bool:
    """The default in force of ``torch.distributions``' argument validation
    (``Distribution._validate_args``; only its setter is public)."""
    return torch.distributions.Distribution._validate_args


def module_kwargs(module) -> Any:
    """A ``TensorDictModule``'s keyword-argument mapping of its in-keys (``_kwargs``; ``None``
    when its in-keys are positional)."""
    return module._kwargs


# --- TorchRL, envpool, gfootball ----------------------------------------------------------------


def gym_like_env(env) -> Any:
    """The gymnasium env a TorchRL ``GymLikeEnv`` wraps (``_env``), whose state the env
    snapshots save."""
    return env._env


def envpool_send(pool, arrays: list) -> None:
    """envpool's raw ``_send`` of its action arrays, in the order of its spec: the public
    ``send`` builds a dict and checks it on every call."""
    pool._send(arrays)


def envpool_recv(pool) -> list:
    """envpool's raw ``_recv``: its state arrays, without the public ``recv``'s dict of infos."""
    return pool._recv()


def football_config(env) -> Any:
    """gfootball's scenario config of an env (``env.unwrapped._config``), which has no public
    reader."""
    return env.unwrapped._config
