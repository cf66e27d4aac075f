"""Networks: the Nature CNN trunk and shared-trunk actor-critics."""

from hts_lightning.models.actor_critic import make_actor_critic
from hts_lightning.models.nature_cnn import NatureCNN

__all__ = ["NatureCNN", "make_actor_critic"]
