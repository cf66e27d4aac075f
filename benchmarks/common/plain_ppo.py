"""PPO's update in plain PyTorch: the baseline the module's update is measured against.

No Lightning, no TensorDict, no TorchRL loss: GAE as a loop over time, the clipped surrogate,
the squared value error and the entropy bonus on raw tensors, Adam and gradient clipping, as
a single-file script (CleanRL's ``ppo_atari_envpool.py``) writes them. It takes the networks
of a module's actor-critic (:func:`networks`), so both run the same layers; with the same
batch, initial weights and minibatch order it gives the module's parameters to float rounding
(``tests/modules/test_update_equivalence.py``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class PPOSettings:
    epochs: int
    minibatches: int
    clip_epsilon: float
    entropy_coef: float
    value_coef: float
    max_grad_norm: float
    gamma: float
    gae_lambda: float
    normalize_advantage: bool = True

    @classmethod
    def from_module_args(cls, args: dict) -> PPOSettings:
        """The settings of a PPO module's init arguments (a recipe's ``model.init_args``)."""
        return cls(**{name: args[name] for name in cls.__dataclass_fields__})


@dataclass
class Networks:
    trunk: nn.Module
    actor_head: nn.Module
    critic_head: nn.Module

    def parameters(self):
        for net in (self.trunk, self.actor_head, self.critic_head):
            yield from net.parameters()

    def value(self, observation: torch.Tensor) -> torch.Tensor:
        return self.critic_head(self.trunk(observation)).squeeze(-1)


def networks(actor_critic) -> Networks:
    """Copies of the raw ``nn.Module`` layers of ``make_actor_critic``'s operator."""
    model = copy.deepcopy(actor_critic)
    return Networks(
        trunk=model.module[0].module,
        actor_head=model.get_policy_head().module[0].module,
        critic_head=model.get_value_head().module,
    )


@torch.no_grad()
def advantages(nets: Networks, batch, gamma: float, lmbda: float):
    """GAE over a ``[num_envs, steps]`` batch: bootstraps on truncation, cuts at ``done``."""
    obs, next_obs = batch["observation"], batch["next", "observation"]
    shape = obs.shape[:2]
    value = nets.value(obs.flatten(0, 1)).view(shape)
    next_value = nets.value(next_obs.flatten(0, 1)).view(shape)
    reward = batch["next", "reward"].view(shape)
    not_terminated = (~batch["next", "terminated"].view(shape)).float()
    not_done = (~batch["next", "done"].view(shape)).float()
    delta = reward + gamma * next_value * not_terminated - value
    advantage = torch.zeros_like(delta)
    running = torch.zeros(shape[0])
    for t in reversed(range(shape[1])):
        running = delta[:, t] + gamma * lmbda * not_done[:, t] * running
        advantage[:, t] = running
    return advantage, advantage + value


def update(nets: Networks, optimizer, batch, settings: PPOSettings, generator) -> float:
    """One PPO update on ``batch``: GAE, then ``epochs`` x ``minibatches`` Adam steps.
    Returns the fraction of clipped ratios over all steps."""
    advantage, value_target = advantages(nets, batch, settings.gamma, settings.gae_lambda)
    if settings.normalize_advantage:
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    obs = batch["observation"].flatten(0, 1)
    action = batch["action"].flatten(0, 1).argmax(-1, keepdim=True)
    old_log_prob = batch["action_log_prob"].flatten(0, 1)
    advantage, value_target = advantage.flatten(), value_target.flatten()
    frames = obs.shape[0]
    size = frames // settings.minibatches
    parameters = list(nets.parameters())
    clipped_count = 0
    for _ in range(settings.epochs):
        order = torch.randperm(frames, generator=generator)
        for start in range(0, frames, size):
            index = order[start : start + size]
            features = nets.trunk(obs[index])
            log_probs = torch.log_softmax(nets.actor_head(features), -1)
            value = nets.critic_head(features).squeeze(-1)
            log_ratio = log_probs.gather(-1, action[index]).squeeze(-1) - old_log_prob[index]
            ratio = log_ratio.exp()
            clipped = ratio.clamp(1 - settings.clip_epsilon, 1 + settings.clip_epsilon)
            gain = torch.min(ratio * advantage[index], clipped * advantage[index])
            clipped_count += int((clipped != ratio).sum())
            entropy = -(log_probs.exp() * log_probs).sum(-1)
            loss = (
                -gain.mean()
                + settings.value_coef * (value - value_target[index]).pow(2).mean()
                - settings.entropy_coef * entropy.mean()
            )
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(parameters, settings.max_grad_norm)
            optimizer.step()
    return clipped_count / (frames * settings.epochs)
