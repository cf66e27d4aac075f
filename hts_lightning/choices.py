"""The package's choice sets, each a ``Literal`` type checked by one function.

This is the one place where a set is spelled out: the modules, the collectors and the
benchmarks' command lines (``choices=get_args(CollectorKind)``) take it from here. Each check
names the bad value, the allowed ones and what to do.
"""

from __future__ import annotations

from typing import Literal, get_args

#: ``"hts"``: the HTSCollector; TorchRL's own: ``"sync"`` (``Collector`` over a ``ParallelEnv``),
#: ``"multi_sync"``, ``"multi_async"`` (see :mod:`hts_lightning.collectors.baselines`).
CollectorKind = Literal["hts", "sync", "multi_sync", "multi_async"]
#: Where the HTSCollector runs the policy (``"auto"``: main on a GPU or without workers).
InferenceMode = Literal["auto", "workers", "main"]
#: How the HTSCollector steps replicas (``"auto"``: from the env factory).
Backend = Literal["auto", "python", "envpool"]
#: How the training modules' envs are stepped (:func:`~hts_lightning.envs.env_factory`).
EnvBackend = Literal["python", "envpool"]
#: What an env error does in the HTSCollector.
OnEnvError = Literal["raise", "restart"]
#: Where the training modules take the gradient.
GradientMode = Literal["delayed", "current"]
#: The training modules' learning-rate schedule.
LrSchedule = Literal["constant", "linear"]


def _check(name: str, value, choices, fix: str):
    allowed = get_args(choices)
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}. {fix}")
    return value


def check_collector_kind(kind: str) -> CollectorKind:
    """``kind`` if it is a :data:`CollectorKind`, else a ``ValueError`` naming the choices.

    Example:
        >>> check_collector_kind("multi_sync")
        'multi_sync'
    """
    return _check(
        "collector",
        kind,
        CollectorKind,
        "'hts' is the HTSCollector; the others are TorchRL's collectors, for comparisons.",
    )


def check_inference_mode(inference: str) -> InferenceMode:
    """``inference`` if it is an :data:`InferenceMode`, else a ``ValueError``."""
    return _check(
        "inference",
        inference,
        InferenceMode,
        "Use 'workers' (CPU: workers act for their replicas), 'main' (one batched loop, for a "
        "GPU) or 'auto'.",
    )


def check_backend(backend: str) -> Backend:
    """``backend`` if it is a :data:`Backend`, else a ``ValueError``."""
    return _check(
        "backend",
        backend,
        Backend,
        "Use 'python' (TorchRL envs in worker processes), 'envpool' (an EnvpoolFactory's "
        "native pool) or 'auto' (from the env factory).",
    )


def check_env_backend(backend: str) -> EnvBackend:
    """``backend`` if it is an :data:`EnvBackend`, else a ``ValueError``."""
    return _check(
        "env backend",
        backend,
        EnvBackend,
        "Use 'python' (TorchRL envs) or 'envpool' (envpool's C++ envs; Linux x86-64).",
    )


def check_on_env_error(on_env_error: str) -> OnEnvError:
    """``on_env_error`` if it is an :data:`OnEnvError`, else a ``ValueError``."""
    return _check(
        "on_env_error",
        on_env_error,
        OnEnvError,
        "Use 'raise' (stop at an env error) or 'restart' (re-create the replica's env).",
    )


def check_gradient_mode(gradient_mode: str) -> GradientMode:
    """``gradient_mode`` if it is a :data:`GradientMode`, else a ``ValueError``."""
    return _check(
        "gradient_mode",
        gradient_mode,
        GradientMode,
        "Use 'delayed' (at the behaviour parameters) or 'current' (at the current ones).",
    )


def check_lr_schedule(lr_schedule: str) -> LrSchedule:
    """``lr_schedule`` if it is an :data:`LrSchedule`, else a ``ValueError``."""
    return _check(
        "lr_schedule",
        lr_schedule,
        LrSchedule,
        "Use 'constant' or 'linear' (decay to 0 over total_frames).",
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
