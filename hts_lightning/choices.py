"""The package's choice sets, each a ``Literal`` type checked by one function.

This is the one place where a set is spelled out: the modules, the collectors and the
benchmarks' command lines (``choices=get_args(CollectorKind)``) take it from here. Each check
names the bad value, the allowed ones and what to do.

Example:
    >>> check_collector_kind("multi_sync")
    'multi_sync'
"""

from __future__ import annotations

from typing import Literal, get_args

#: The training modules' collector, ``"hts"`` (the HTSCollector) or one of TorchRL's:
#: ``"sync"`` (``Collector`` over a ``ParallelEnv``), ``"multi_sync"``, ``"multi_async"`` (see
#: :func:`hts_lightning.collectors.make_collector`).
CollectorKind = Literal["hts", "sync", "multi_sync", "multi_async"]
#: Where the HTSCollector runs the policy (``"auto"`` is main on a GPU or without workers).
InferenceMode = Literal["auto", "workers", "main"]
#: How the HTSCollector steps replicas (``"auto"`` decides from the env factory).
Backend = Literal["auto", "python", "envpool"]
#: How the training modules' envs are stepped (:func:`~hts_lightning.envs.env_factory`).
EnvBackend = Literal["python", "envpool"]
#: What an env error does in the HTSCollector.
OnEnvError = Literal["raise", "restart"]
#: Where the training modules take the gradient.
GradientMode = Literal["delayed", "current", "decoupled"]
#: The training modules' learning-rate schedule.
LrSchedule = Literal["constant", "linear"]
#: The training modules' optimizer (ACKTR's is K-FAC).
OptimizerName = Literal["adam", "rmsprop", "rmsprop_tf"]


def _checker(name: str, choices, fix: str):
    """The check of one choice set: the value, else a ``ValueError`` naming it, the allowed
    values and ``fix``."""
    allowed = get_args(choices)

    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}. {fix}")
        return value

    check.__name__ = check.__qualname__ = f"check_{name.replace(' ', '_')}"
    check.__doc__ = f"``value`` if it is one of {allowed}, else a ``ValueError`` naming them."
    return check


check_collector_kind = _checker(
    "collector",
    CollectorKind,
    "'hts' is the HTSCollector; the others are TorchRL's collectors, for comparisons.",
)
check_inference_mode = _checker(
    "inference",
    InferenceMode,
    "Use 'workers' (CPU: workers act for their replicas), 'main' (one batched loop, for a GPU) "
    "or 'auto'.",
)
check_backend = _checker(
    "backend",
    Backend,
    "Use 'python' (TorchRL envs in worker processes), 'envpool' (an EnvpoolFactory's native "
    "pool) or 'auto' (from the env factory).",
)
check_env_backend = _checker(
    "env backend",
    EnvBackend,
    "Use 'python' (TorchRL envs) or 'envpool' (envpool's C++ envs; Linux x86-64).",
)
check_on_env_error = _checker(
    "on_env_error",
    OnEnvError,
    "Use 'raise' (stop at an env error) or 'restart' (re-create the replica's env).",
)
check_gradient_mode = _checker(
    "gradient_mode",
    GradientMode,
    "Use 'delayed' (at the behaviour parameters), 'current' (at the current ones) or, for "
    "PPO, 'decoupled' (the trust region around the current policy).",
)
check_optimizer = _checker(
    "optimizer",
    OptimizerName,
    "Use 'adam', 'rmsprop' (PyTorch's, alpha 0.99, eps 1e-5: Stable-Baselines3's A2C) or "
    "'rmsprop_tf' (TensorFlow's, as OpenAI baselines' A2C and RL Zoo's Atari A2C train).",
)
check_lr_schedule = _checker(
    "lr_schedule", LrSchedule, "Use 'constant' or 'linear' (decay to 0 over total_frames)."
)


def check_replicas_per_worker(num_envs: int, num_workers: int) -> int:
    """Replicas per worker process (``num_envs`` for none), or a ``ValueError`` when the
    workers cannot all step the same number.

    Example:
        >>> check_replicas_per_worker(8, 2)
        4
    """
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    if num_workers and num_envs % num_workers:
        raise ValueError(
            f"num_envs={num_envs} is not divisible by num_workers={num_workers}: every worker "
            "process steps the same number of replicas. Choose num_workers among the divisors "
            "of num_envs."
        )
    return num_envs // num_workers if num_workers else num_envs
