"""Environment factories: each returns a TorchRL ``EnvBase`` seeded per replica."""

from hts_lightning.envs import _quiet_gym  # noqa: F401  (before any GymEnv is built)
from hts_lightning.envs.atari import make_atari_env
from hts_lightning.envs.classic import make_gym_env
from hts_lightning.envs.envpool import EnvpoolFactory, envpool_available
from hts_lightning.envs.factory import env_factory
from hts_lightning.envs.football import make_football_env
from hts_lightning.envs.latency import VariableLatencyEnv
from hts_lightning.envs.snapshot import load_env_state, save_env_state
from hts_lightning.envs.testing import CountingEnv

__all__ = [
    "CountingEnv",
    "EnvpoolFactory",
    "VariableLatencyEnv",
    "env_factory",
    "envpool_available",
    "load_env_state",
    "make_atari_env",
    "make_football_env",
    "make_gym_env",
    "save_env_state",
]
