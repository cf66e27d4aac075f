"""hts_lightning: High-Throughput Synchronous deep RL on PyTorch Lightning and TorchRL."""

from hts_lightning.collectors import EnvReplicaError, HTSCollector, WorkerDiedError
from hts_lightning.envs import CountingEnv, VariableLatencyEnv, make_atari_env, make_gym_env

__all__ = [
    "CountingEnv",
    "EnvReplicaError",
    "HTSCollector",
    "VariableLatencyEnv",
    "WorkerDiedError",
    "make_atari_env",
    "make_gym_env",
]
