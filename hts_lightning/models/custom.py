"""A network a user brings, named by its import path."""

from __future__ import annotations

from torchrl.data import Composite, TensorSpec
from torchrl.modules import ActorValueOperator

from hts_lightning.import_path import import_object

__all__ = ["build_network"]


def build_network(
    path: str, observation_spec: Composite, action_spec: TensorSpec, **network_kwargs
) -> ActorValueOperator:
    """The actor-critic that the callable at ``path`` (``"package.module:build"``) returns for
    ``(observation_spec, action_spec, **network_kwargs)``.

    It must be a TorchRL ``ActorValueOperator`` (a shared ``common`` module, a
    ``ProbabilisticActor`` that writes the env's action keys and ``"action_log_prob"``, and a
    critic head that writes ``"state_value"``): the training modules take its policy, value
    and value-head operators. With no shared layers, ``common`` can be a ``TensorDictModule``
    of ``nn.Identity`` from the observation to ``"features"``.

    Example:
        >>> from torchrl.data import Categorical, Unbounded
        >>> spec = Composite(observation=Unbounded((4,)))
        >>> model = build_network("hts_lightning.models:make_actor_critic", spec, Categorical(2),
        ...                       hidden_sizes=(8,))
        >>> type(model).__name__
        'ActorValueOperator'
    """
    model = import_object(path, what="network")(observation_spec, action_spec, **network_kwargs)
    if not isinstance(model, ActorValueOperator):
        raise TypeError(
            f"The network {path!r} returned a {type(model).__name__}; it must return a TorchRL "
            "ActorValueOperator (common trunk, ProbabilisticActor, critic head): see "
            "hts_lightning.models.make_actor_critic for one."
        )
    return model
