"""Networks: the Nature CNN trunk, shared-trunk actor-critics, a tensor-in policy, and the
per-player action distribution of multi-player football."""

from hts_lightning.models.actor_critic import make_actor_critic
from hts_lightning.models.nature_cnn import NatureCNN
from hts_lightning.models.players import PlayersOneHotCategorical
from hts_lightning.models.tensor_policy import TensorPolicy

__all__ = ["NatureCNN", "PlayersOneHotCategorical", "TensorPolicy", "make_actor_critic"]
