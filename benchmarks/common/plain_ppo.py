"""PPO in plain PyTorch: the baseline the module's update and the HTS engine's data are
measured against.

No Lightning, no TensorDict, no TorchRL loss: GAE as a loop over time, the clipped surrogate,
the squared value error and the entropy bonus on raw tensors, Adam and gradient clipping, as
a single-file script (CleanRL's ``ppo_atari_envpool.py``) writes them. It takes the networks
of a module's actor-critic (:func:`networks`), so both run the same layers; with the same
batch, initial weights and minibatch order it gives the module's parameters to float rounding
(``tests/modules/test_update_equivalence.py``). :func:`train` is the whole single-file loop
over a synchronous envpool: act on every env at once, step, update every batch, no overlap.
"""

from __future__ import annotations

import copy
import sys
import time
from dataclasses import dataclass

import numpy as np
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


def train(
    nets: Networks,
    pool,
    *,
    settings: PPOSettings,
    lr: float,
    steps_per_batch: int,
    batches: int,
    schedule_batches: int,
    clip_rewards: bool,
    seed: int,
) -> None:
    """The single-file PPO loop over ``pool`` (a synchronous envpool, gymnasium API, raw
    rewards, auto-reset): ``batches`` batches of ``steps_per_batch`` steps of every env, each
    followed by an update; the module's Adam (eps 1e-5, fused) with the learning rate decayed
    linearly to 0 over ``schedule_batches`` updates (``lr_schedule: linear`` over a recipe's
    total frames).
    Actions come from ``torch.distributions.Categorical`` on the global RNG (the caller
    seeds it), minibatch orders from a generator seeded ``seed``.
    Prints each finished episode's raw return as CleanRL's scripts do (``global_step=...,
    episodic_return=...``) and each update's seconds and agent steps so far (``plain: update
    ...``)."""
    optimizer = torch.optim.Adam(nets.parameters(), lr=lr, eps=1e-5, fused=True)  # the module's
    generator = torch.Generator().manual_seed(seed)
    num_envs = pool.config["num_envs"]
    returns = np.zeros(num_envs)
    # With episodic life the returns printed are whole games', as CleanRL's scripts print them.
    games = bool(pool.config.get("episodic_life", False))
    obs = torch.from_numpy(pool.reset()[0])
    for batch_index in range(batches):
        for group in optimizer.param_groups:
            group["lr"] = lr * (1 - batch_index / schedule_batches)
        rollout: dict[str, list] = {k: [] for k in ("obs", "next", "a", "logp", "r", "te", "tr")}
        with torch.no_grad():
            for step in range(steps_per_batch):
                logits = nets.actor_head(nets.trunk(obs))
                dist = torch.distributions.Categorical(logits=logits)
                action = dist.sample()
                next_obs, reward, terminated, truncated, info = pool.step(action.numpy())
                returns += reward
                ended = truncated | (info["terminated"].astype(bool) if games else terminated)
                agent_steps = (batch_index * steps_per_batch + step + 1) * num_envs
                for episode_return in returns[ended]:
                    print(f"global_step={agent_steps}, episodic_return={episode_return}")
                returns[ended] = 0.0
                if clip_rewards:
                    reward = np.clip(reward, -1.0, 1.0)
                next_obs = torch.from_numpy(next_obs)
                for key, value in zip(
                    rollout,
                    (obs, next_obs, action, dist.log_prob(action), reward, terminated, truncated),
                    strict=True,
                ):
                    rollout[key].append(torch.as_tensor(value))
                obs = next_obs
        stack = {k: torch.stack(v, 1) for k, v in rollout.items()}  # [envs, steps, ...]
        terminated, truncated = stack["te"].bool(), stack["tr"].bool()
        batch = {
            "observation": stack["obs"],
            "action": nn.functional.one_hot(stack["a"], logits.shape[-1]),
            "action_log_prob": stack["logp"],
            ("next", "observation"): stack["next"],
            ("next", "reward"): stack["r"].float(),
            ("next", "terminated"): terminated,
            ("next", "done"): terminated | truncated,
        }
        started = time.perf_counter()
        update(nets, optimizer, batch, settings, generator)
        seconds = time.perf_counter() - started
        print(
            f"plain: update {batch_index + 1}/{batches} {seconds:.1f} s, global_step={agent_steps}"
        )
        sys.stdout.flush()
