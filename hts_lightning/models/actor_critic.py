"""Actor-critic networks with a shared trunk, as TorchRL modules."""

from __future__ import annotations

from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Composite, OneHot, TensorSpec
from torchrl.modules import MLP, ActorValueOperator, ProbabilisticActor, ValueOperator
from torchrl.modules.distributions import OneHotCategorical

from hts_lightning.models.nature_cnn import NatureCNN

__all__ = ["make_actor_critic"]


def _mlp(in_features: int, hidden_sizes: tuple[int, ...], out_features: int, last: bool):
    return MLP(
        in_features=in_features,
        out_features=out_features,
        num_cells=list(hidden_sizes),
        activation_class=nn.Tanh,
        activate_last_layer=last,
    )


def make_actor_critic(
    observation_spec: Composite,
    action_spec: TensorSpec,
    *,
    observation_key: str = "observation",
    hidden_sizes: tuple[int, ...] = (64, 64),
    shared_trunk: bool = True,
) -> ActorValueOperator:
    """An actor-critic for a discrete (one-hot) action space, as TorchRL operators.

    Pixel observations (``[C, H, W]``) get the Nature CNN trunk shared by both heads. Vectors
    get tanh MLPs of ``hidden_sizes``: one shared trunk with linear heads, or, with
    ``shared_trunk=False``, separate actor and critic MLPs (as Stable-Baselines3 does for
    vectors; the critic's gradient then cannot swamp the actor's). The actor writes
    ``"logits"``, ``"action"`` and ``"action_log_prob"``; the critic writes ``"state_value"``.
    Use ``.get_policy_operator()`` for the collector and ``.get_value_operator()`` for the loss.

    Example:
        >>> from hts_lightning import make_gym_env
        >>> env = make_gym_env("CartPole-v1")
        >>> model = make_actor_critic(env.observation_spec, env.action_spec)
        >>> model(env.reset())["state_value"].shape
        torch.Size([1])
    """
    if not isinstance(action_spec, OneHot):
        raise ValueError(
            f"make_actor_critic supports one-hot discrete actions, got {type(action_spec).__name__}"
        )
    obs_shape = observation_spec[observation_key].shape
    num_actions = action_spec.shape[-1]
    if len(obs_shape) == 3:
        trunk: nn.Module = NatureCNN(in_channels=obs_shape[0], image_size=obs_shape[-1])
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
            "expected [C, H, W] pixels or a vector"
        )
    common = TensorDictModule(trunk, in_keys=[observation_key], out_keys=["features"])
    actor = ProbabilisticActor(
        TensorDictModule(actor_head, ["features"], ["logits"]),
        in_keys=["logits"],
        distribution_class=OneHotCategorical,
        return_log_prob=True,
        spec=action_spec,
    )
    critic = ValueOperator(critic_head, in_keys=["features"])
    return ActorValueOperator(common, actor, critic)
