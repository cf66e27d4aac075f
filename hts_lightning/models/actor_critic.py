"""Actor-critic networks with a shared trunk, as TorchRL modules."""

from __future__ import annotations

from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Composite, OneHot, TensorSpec
from torchrl.modules import MLP, ActorValueOperator, ProbabilisticActor, ValueOperator
from torchrl.modules.distributions import OneHotCategorical

from hts_lightning.models.nature_cnn import NatureCNN

__all__ = ["make_actor_critic"]


def make_actor_critic(
    observation_spec: Composite,
    action_spec: TensorSpec,
    *,
    observation_key: str = "observation",
    hidden_sizes: tuple[int, ...] = (64, 64),
) -> ActorValueOperator:
    """A shared-trunk actor-critic for a discrete (one-hot) action space.

    Pixel observations (``[C, H, W]``) get the Nature CNN trunk, vectors an MLP with
    ``hidden_sizes`` and tanh. The actor writes ``"logits"``, ``"action"`` and
    ``"action_log_prob"``; the critic writes ``"state_value"``. Use ``.get_policy_operator()``
    for the collector and ``.get_value_operator()`` for the loss.

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
    if len(obs_shape) == 3:
        trunk: nn.Module = NatureCNN(in_channels=obs_shape[0], image_size=obs_shape[-1])
        features = trunk.out_features
    elif len(obs_shape) == 1:
        trunk = MLP(
            in_features=obs_shape[0],
            out_features=hidden_sizes[-1],
            num_cells=list(hidden_sizes[:-1]),
            activation_class=nn.Tanh,
            activate_last_layer=True,
        )
        features = hidden_sizes[-1]
    else:
        raise ValueError(
            f"observation {observation_key!r} has unsupported shape {tuple(obs_shape)}"
        )
    num_actions = action_spec.shape[-1]
    common = TensorDictModule(trunk, in_keys=[observation_key], out_keys=["features"])
    actor = ProbabilisticActor(
        TensorDictModule(nn.Linear(features, num_actions), ["features"], ["logits"]),
        in_keys=["logits"],
        distribution_class=OneHotCategorical,
        return_log_prob=True,
        spec=action_spec,
    )
    critic = ValueOperator(nn.Linear(features, 1), in_keys=["features"])
    return ActorValueOperator(common, actor, critic)
