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

_HOMES = {
    "A2C": "hts_lightning.modules",
    "ACKTR": "hts_lightning.modules",
    "PPO": "hts_lightning.modules",
    "OnPolicyModule": "hts_lightning.modules",
    "CountingEnv": "hts_lightning.envs",
    "VariableLatencyEnv": "hts_lightning.envs",
    "make_atari_env": "hts_lightning.envs",
    "make_football_env": "hts_lightning.envs",
    "make_gym_env": "hts_lightning.envs",
    "DelayedGradientDDPStrategy": "hts_lightning.strategies",
    "EnvReplicaError": "hts_lightning.collectors",
    "HTSCollector": "hts_lightning.collectors",
    "WorkerDiedError": "hts_lightning.collectors",
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
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'hts_lightning' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
