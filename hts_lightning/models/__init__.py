"""Networks: the Nature CNN trunk, shared-trunk actor-critics, a tensor-in policy."""

from hts_lightning.models.actor_critic import make_actor_critic
from hts_lightning.models.nature_cnn import NatureCNN
from hts_lightning.models.tensor_policy import TensorPolicy

__all__ = ["NatureCNN", "TensorPolicy", "make_actor_critic"]
