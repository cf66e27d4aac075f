"""hts_lightning: High-Throughput Synchronous deep RL on PyTorch Lightning and TorchRL.

The names below load on first use (PEP 562): a collector's worker process imports
``hts_lightning.collectors`` and the env factories, not Lightning and the training modules
(2-3 s of imports on a 2-core machine, once per forkserver).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hts_lightning.collectors import EnvReplicaError, HTSCollector, WorkerDiedError
    from hts_lightning.envs import (
        CountingEnv,
        VariableLatencyEnv,
        make_atari_env,
        make_football_env,
        make_gym_env,
    )
    from hts_lightning.modules import A2C, ACKTR, PPO, OnPolicyModule
    from hts_lightning.strategies import DelayedGradientDDPStrategy

# Where each lazily loaded name lives.
_HOMES = {
    "hts_lightning.collectors": ("EnvReplicaError", "HTSCollector", "WorkerDiedError"),
    "hts_lightning.envs": (
        "CountingEnv",
        "VariableLatencyEnv",
        "make_atari_env",
        "make_football_env",
        "make_gym_env",
    ),
    "hts_lightning.modules": ("A2C", "ACKTR", "PPO", "OnPolicyModule"),
    "hts_lightning.strategies": ("DelayedGradientDDPStrategy",),
}

__all__ = [
    "A2C",
    "ACKTR",
    "PPO",
    "CountingEnv",
    "DelayedGradientDDPStrategy",
    "EnvReplicaError",
    "HTSCollector",
    "OnPolicyModule",
    "VariableLatencyEnv",
    "WorkerDiedError",
    "make_atari_env",
    "make_football_env",
    "make_gym_env",
]


def __getattr__(name: str):
    home = next((home for home, names in _HOMES.items() if name in names), None)
    if home is None:
        raise AttributeError(f"module 'hts_lightning' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
