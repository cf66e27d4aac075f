"""A trained policy as a plain module: observation tensor in, greedy action out."""

from __future__ import annotations

import copy

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModuleBase
from torch import nn
from torchrl.envs.utils import ExplorationType, set_exploration_type

__all__ = ["TensorPolicy"]


class TensorPolicy(nn.Module):
    """Greedy actions from an actor-critic's policy, tensor in and tensor out.

    TorchRL's operators read and write TensorDicts; MLflow models, serving and most user code
    pass tensors. ``forward`` takes observations ``[*batch, *observation_shape]`` (any number
    of batch dims, none included) and returns the greedy action: for a categorical policy the
    indices of the most likely actions (int64; ``[*batch]``, or ``[*batch, heads]`` for
    several heads or players), for a Gaussian one its mean (the TanhNormal's squashed mean)
    ``[*batch, action_dims]``. :meth:`logits` returns a categorical policy's logits, to sample
    from. The actor is copied (to CPU, in eval mode), so later training does not change this
    policy.

    Args:
        actor: the policy operator (``make_actor_critic(...).get_policy_operator()``, or a
            module's ``.actor``).
        observation_ndim: number of dims of one observation (1 for vectors, 3 for pixels).
        observation_key: the key the actor reads.

    Example:
        >>> from hts_lightning import make_gym_env
        >>> from hts_lightning.models import make_actor_critic
        >>> env = make_gym_env("CartPole-v1")
        >>> actor = make_actor_critic(env.observation_spec, env.action_spec).get_policy_operator()
        >>> policy = TensorPolicy(actor, observation_ndim=1)
        >>> policy(torch.zeros(5, 4)).shape, policy(torch.zeros(5, 4)).dtype
        (torch.Size([5]), torch.int64)
        >>> int(policy(torch.zeros(4))) in (0, 1)
        True
    """

    def __init__(
        self,
        actor: TensorDictModuleBase,
        *,
        observation_ndim: int,
        observation_key: str = "observation",
    ):
        super().__init__()
        if observation_ndim < 1:
            raise ValueError(f"observation_ndim must be >= 1, got {observation_ndim}")
        self.actor = copy.deepcopy(actor).cpu().eval()
        self.observation_ndim = observation_ndim
        self.observation_key = observation_key

    @classmethod
    def from_env(cls, actor: TensorDictModuleBase, create_env) -> TensorPolicy:
        """The policy of ``actor`` for the env ``create_env()`` makes: one observation of a
        reset tells the observation's number of dims, and is kept as ``example_observation``
        (an input example for exports and model signatures)."""
        probe = create_env()
        try:
            observation = probe.reset()["observation"].cpu()
        finally:
            probe.close()
        policy = cls(actor, observation_ndim=observation.dim())
        policy.example_observation = observation
        return policy

    @property
    def categorical(self) -> bool:
        """Whether the actor's distribution is categorical (it writes ``"logits"``)."""
        return "logits" in self.actor.out_keys

    @torch.no_grad()
    def logits(self, observation: torch.Tensor) -> torch.Tensor:
        """Action logits ``[*batch, num_actions]`` for observations ``[*batch, *obs_shape]``."""
        if not self.categorical:
            raise ValueError(
                "This policy is not categorical (a Gaussian over box actions): it has no "
                "logits. Its greedy action is the mean, policy(observation)."
            )
        return self._act(observation)["logits"]

    def _act(self, observation: torch.Tensor):
        observation = torch.as_tensor(observation)
        if observation.dim() < self.observation_ndim:
            raise ValueError(
                f"observation has shape {tuple(observation.shape)}, fewer dims than one "
                f"observation ({self.observation_ndim}); pass [*batch, *observation_shape]."
            )
        batch = observation.shape[: observation.dim() - self.observation_ndim]
        data = TensorDict({self.observation_key: observation}, batch_size=batch)
        # Deterministic: the actor writes the mode as its action and draws no random numbers.
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            return self.actor(data)

    @torch.no_grad()
    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """The greedy action: indices (int64) for a categorical policy, else the mean."""
        if self.categorical:
            # The most likely action per categorical (one-hot, index or per head/player).
            return self.logits(observation).argmax(-1)
        return self._act(observation)["action"]
