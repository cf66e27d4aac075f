"""TorchRL's A2CLoss with the critic reading the actor's pass: a shared trunk learns from the
value loss too."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.objectives import A2CLoss

__all__ = ["SharedTrunkA2CLoss"]


class SharedTrunkA2CLoss(A2CLoss):
    """:class:`~torchrl.objectives.A2CLoss` whose terms are taken on one shallow copy of the
    input that the actor writes into, so that a critic head reading the actor's outputs (the
    shared trunk's ``"features"``, TorchRL's advice for a shared trunk: one trunk pass) reads
    them with their gradient.

    Why: TorchRL 0.14.1's A2CLoss runs the actor on a copy of its input keys and the critic on
    the input itself, so a critic head read the batch's stored, detached features and the
    value loss never reached the trunk: Pong A2C's and ACKTR's explained variance stayed at 0
    and their policies uniform up to 2M agent steps (benchmarks/results/learning/pong_a2c_2m).
    The terms, their order and reduction are A2CLoss's (``forward`` without a stored
    advantage or its normalization: the on-policy skeleton computes and scales it); for an
    actor and a critic that share nothing the numbers are bitwise A2CLoss's (tested).

    Example:
        >>> from hts_lightning import make_gym_env
        >>> from hts_lightning.models import make_actor_critic
        >>> env = make_gym_env("CartPole-v1")
        >>> model = make_actor_critic(env.observation_spec, env.action_spec)
        >>> loss = SharedTrunkA2CLoss(model.get_policy_operator(), model.get_value_head())
        >>> data = model.get_policy_operator()(env.reset()).expand(3).clone().detach()
        >>> data["advantage"], data["value_target"] = torch.ones(3, 1), torch.zeros(3, 1)
        >>> loss(data)["loss_critic"].backward()  # reaches the shared trunk
        >>> model.module[0].module[0].weight.grad.abs().sum() > 0
        tensor(True)
    """

    def __init__(self, actor_network, critic_network, **kwargs):
        # Its modules' own parameters: the actor must write into the copy the critic reads.
        kwargs.setdefault("functional", False)
        super().__init__(actor_network, critic_network, **kwargs)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return TensorDict(self.lean_loss(tensordict))

    def lean_loss(self, tensordict: TensorDictBase) -> dict[str, torch.Tensor]:
        """:meth:`forward`'s terms as a dict (no output TensorDict), in A2CLoss's order."""
        advantage = tensordict.get(self.tensor_keys.advantage, None)
        if advantage is None:
            raise KeyError(
                f"SharedTrunkA2CLoss needs {self.tensor_keys.advantage!r} in its input: "
                "compute it first (loss.value_estimator(batch))."
            )
        data = tensordict.clone(False)
        dist = self.actor_network.get_dist(data)  # writes the trunk's outputs into data
        log_prob = dist.log_prob(data.get(self.tensor_keys.action)).unsqueeze(-1)
        terms = {"loss_objective": (-(log_prob * advantage)).mean()}
        if self.entropy_bonus:
            entropy = self.get_entropy_bonus(dist)
            terms["entropy"] = entropy.detach().mean()
            terms["loss_entropy"] = (-self.entropy_coeff * entropy).mean()
        if self.critic_coeff is not None:
            terms["loss_critic"] = self.loss_critic(data)[0].mean()
        return terms
