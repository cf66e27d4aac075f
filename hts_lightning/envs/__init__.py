"""Environment factories: each returns a TorchRL ``EnvBase`` seeded per replica."""

from hts_lightning.envs import _quiet_gym  # noqa: F401  (before any GymEnv is built)

# TorchRL 0.14.1 keeps the ImportError of the legacy `gym` package (absent unless the football
# extra is installed), traceback and all, in torchrl.envs.libs.utils.IMPORT_ERROR. Imported
# lazily mid-run, that traceback pinned the run's frames (the module, its collector, ale_py's
# envs) until the interpreter's exit, where nanobind printed "leaked instance" warnings.
# Imported now, it pins only this import's frames.
import torchrl.envs.libs.utils  # noqa: F401  isort: skip
from hts_lightning.envs._shared import episode_ends
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
    "episode_ends",
    "load_env_state",
    "make_atari_env",
    "make_football_env",
    "make_gym_env",
    "save_env_state",
]
