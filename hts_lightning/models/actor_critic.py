"""Actor-critic networks with a shared trunk, as TorchRL modules."""

from __future__ import annotations

import math

from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Composite, OneHot, TensorSpec
from torchrl.modules import MLP, ActorValueOperator, ProbabilisticActor, ValueOperator

from hts_lightning.models.action_heads import ContinuousDistribution, action_head
from hts_lightning.models.nature_cnn import NatureCNN
from hts_lightning.models.players import PlayersOneHotCategorical
from hts_lightning.models.running_norm import RunningNorm

__all__ = ["make_actor_critic"]


def _mlp(in_features: int, hidden_sizes: tuple[int, ...], out_features: int, last: bool):
    return MLP(
        in_features=in_features,
        out_features=out_features,
        num_cells=list(hidden_sizes),
        activation_class=nn.Tanh,
        activate_last_layer=last,
    )


def _orthogonal(module: nn.Module, last_gain: float) -> None:
    """Orthogonal weights and zero biases in every layer of ``module``: gain sqrt(2) (for the
    ReLU/tanh layers), ``last_gain`` for its last layer (the output)."""
    layers = [m for m in module.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    for layer in layers:
        nn.init.orthogonal_(layer.weight, gain=last_gain if layer is layers[-1] else math.sqrt(2))
        nn.init.zeros_(layer.bias)


class _MeanOverPlayers(nn.Module):
    """The team's value: the mean of the per-player values ``[..., players, 1]``."""

    def forward(self, values):
        return values.mean(-2)


def make_actor_critic(
    observation_spec: Composite,
    action_spec: TensorSpec,
    *,
    observation_key: str = "observation",
    hidden_sizes: tuple[int, ...] = (64, 64),
    shared_trunk: bool = True,
    orthogonal_init: bool = False,
    continuous: ContinuousDistribution = "normal",
    normalize_observations: bool = False,
) -> ActorValueOperator:
    """An actor-critic for any action spec :func:`action_head` takes, as TorchRL operators:
    one-hot, index (``Categorical``) and multi-discrete (``MultiCategorical``) actions from
    logits; box actions from a diagonal Gaussian with a state-independent scale
    (``continuous="tanh_normal"``: squashed into the bounds).

    Pixel observations (``[C, H, W]``) get the Nature CNN trunk shared by both heads. Vectors
    get tanh MLPs of ``hidden_sizes``: one shared trunk with linear heads, or, with
    ``shared_trunk=False``, separate actor and critic MLPs (as Stable-Baselines3 does for
    vectors; the critic's gradient then cannot swamp the actor's). The actor writes
    ``"logits"`` (``"loc"`` and ``"scale"`` for box actions), ``"action"`` and
    ``"action_log_prob"``; the critic writes ``"state_value"``.
    Use ``.get_policy_operator()`` for the collector and ``.get_value_operator()`` for the loss.

    Several players (a one-hot action spec ``[players, actions]``, as Google Research Football
    gives with several controlled players): the observation has a leading player dimension
    and one shared network acts for every player. The actor's distribution is
    :class:`PlayersOneHotCategorical` (one action per player, log-probability and entropy
    summed over the team) and the critic's value is the mean of the per-player values, so the
    team has one value, one reward and one advantage, as a single player has.

    ``orthogonal_init`` initializes as OpenAI baselines, CleanRL and Stable-Baselines3 do:
    orthogonal weights with gain sqrt(2) in the hidden layers, 0.01 in the policy's output
    (a near-uniform first policy) and 1 in the value's, zero biases. Without it the layers
    keep torch's default initialization.

    ``normalize_observations`` puts a :class:`RunningNorm` of the observation vector first
    (the running statistics that the training module updates after each update, as
    MuJoCo's PPO runs in Stable-Baselines3 and CleanRL normalize observations).

    Example:
        >>> from hts_lightning import make_gym_env
        >>> env = make_gym_env("CartPole-v1")
        >>> model = make_actor_critic(env.observation_spec, env.action_spec)
        >>> model(env.reset())["state_value"].shape
        torch.Size([1])
    """
    obs_shape = observation_spec[observation_key].shape
    players = (
        action_spec.shape[0]
        if isinstance(action_spec, OneHot) and len(action_spec.shape) == 2
        else None
    )
    if players is not None:
        if obs_shape[:1] != (players,):
            raise ValueError(
                f"the action spec has {players} players ({tuple(action_spec.shape)}) but the "
                f"observation {observation_key!r} has shape {tuple(obs_shape)}: expected a "
                f"leading player dimension of {players}"
            )
        obs_shape = obs_shape[1:]
    elif isinstance(action_spec, OneHot) and len(action_spec.shape) != 1:
        raise ValueError(f"unsupported one-hot action shape {tuple(action_spec.shape)}")
    head = action_head(action_spec, continuous=continuous)
    num_actions = head.out_features
    if len(obs_shape) == 3:
        trunk: nn.Module = NatureCNN(in_channels=obs_shape[0], image_size=tuple(obs_shape[-2:]))
        actor_head = nn.Linear(trunk.out_features, num_actions)
        critic_head = nn.Linear(trunk.out_features, 1)
    elif len(obs_shape) == 1 and shared_trunk:
        trunk = _mlp(obs_shape[0], hidden_sizes[:-1], hidden_sizes[-1], last=True)
        actor_head = nn.Linear(hidden_sizes[-1], num_actions)
        critic_head = nn.Linear(hidden_sizes[-1], 1)
    elif len(obs_shape) == 1:
        trunk = nn.Identity()
        actor_head = _mlp(obs_shape[0], hidden_sizes, num_actions, last=False)
        critic_head = _mlp(obs_shape[0], hidden_sizes, 1, last=False)
    else:
        raise ValueError(
            f"observation {observation_key!r} has unsupported shape {tuple(obs_shape)}: "
            "expected [C, H, W] pixels or a vector (after a leading player dimension, if any)"
        )
    if orthogonal_init:
        _orthogonal(trunk, last_gain=math.sqrt(2))
        _orthogonal(actor_head, last_gain=0.01)
        _orthogonal(critic_head, last_gain=1.0)
    if normalize_observations:
        if len(obs_shape) != 1:
            raise ValueError(
                "normalize_observations standardizes vector observations; "
                f"{observation_key!r} has shape {tuple(obs_shape)} (pixels are scaled to [0, 1] "
                "by the CNN already)."
            )
        trunk = nn.Sequential(RunningNorm(tuple(obs_shape)), trunk)
    if head.after:  # grouped logits, or the Gaussian's scale
        actor_head = nn.Sequential(actor_head, *head.after)
    if players is not None:
        critic_head = nn.Sequential(critic_head, _MeanOverPlayers())
    common = TensorDictModule(trunk, in_keys=[observation_key], out_keys=["features"])
    actor = ProbabilisticActor(
        TensorDictModule(actor_head, ["features"], head.out_keys),
        in_keys=head.out_keys,
        distribution_class=head.distribution_class if players is None else PlayersOneHotCategorical,
        distribution_kwargs=head.distribution_kwargs,
        return_log_prob=True,
        spec=action_spec,
    )
    critic = ValueOperator(critic_head, in_keys=["features"])
    return ActorValueOperator(common, actor, critic)
