"""Lightning modules: the on-policy skeleton and the algorithms on it."""

# The strategies register "hts_ddp" with Lightning: a Trainer of these modules can name it.
import hts_lightning.strategies  # noqa: F401
from hts_lightning.modules.a2c import A2C
from hts_lightning.modules.acktr import ACKTR
from hts_lightning.modules.on_policy import OnPolicyModule
from hts_lightning.modules.ppo import PPO

__all__ = ["A2C", "ACKTR", "PPO", "OnPolicyModule"]
