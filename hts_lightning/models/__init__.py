"""Networks: the Nature CNN trunk, actor-critics for every action spec kind, a user's own
network by import path, a tensor-in policy, and the per-player action distribution of
multi-player football."""

from hts_lightning.models.action_heads import (
    IndependentCategorical,
    IndependentOneHotCategorical,
    StateIndependentScale,
    TanhNormalWithEntropy,
    action_head,
)
from hts_lightning.models.actor_critic import make_actor_critic
from hts_lightning.models.custom import build_network
from hts_lightning.models.nature_cnn import NatureCNN
from hts_lightning.models.players import PlayersOneHotCategorical
from hts_lightning.models.running_norm import RunningNorm
from hts_lightning.models.tensor_policy import TensorPolicy

__all__ = [
    "IndependentCategorical",
    "IndependentOneHotCategorical",
    "NatureCNN",
    "PlayersOneHotCategorical",
    "RunningNorm",
    "StateIndependentScale",
    "TanhNormalWithEntropy",
    "TensorPolicy",
    "action_head",
    "build_network",
    "make_actor_critic",
]
