"""hts_lightning: High-Throughput Synchronous deep RL on PyTorch Lightning and TorchRL."""

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
