"""PPO on the shared on-policy skeleton, with TorchRL's ClipPPOLoss."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from hts_lightning.modules.on_policy import OnPolicyModule
from hts_lightning.modules.ppo_loss import LeanClipPPOLoss

__all__ = ["PPO"]


def mean_per_key(steps: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The mean over ``steps`` of each diagnostic (each a tensor, its mean taken first).

    One stack per key and one of all: per-step means and stacks cost ~14 tensor ops a step.
    A per-row diagnostic (the same shape at every step) is averaged per step in one op.
    """
    names = sorted(steps[0])
    columns = []
    for name in names:
        values = torch.stack([step[name] for step in steps]).float()
        columns.append(values.flatten(1).mean(1) if values.dim() > 1 else values)
    return dict(zip(names, torch.stack(columns, dim=1).mean(0), strict=True))


class PPO(OnPolicyModule):
    """Clipped PPO: ``epochs`` passes of ``minibatches`` gradient steps over each batch.

    The default ``gradient_mode`` is ``"current"``: the loss is evaluated at the current
    parameters and the clipped importance ratio against the stored behaviour log-probabilities
    corrects for the one-step lag. ``"delayed"`` takes every minibatch gradient at the
    behaviour parameters instead. ``"decoupled"`` clips the ratio against the policy at the
    start of the update (the proximal policy) and weights each sample's advantage by
    pi_prox / pi_behaviour: the trust region is around where the policy is, not where it was
    one update ago. Since the weight is positive, min(r w A, clip(r) w A) = w min(r A,
    clip(r) A): it is the clipped loss with the proximal log-probabilities in place of the
    behaviour ones and the weighted advantages.

    It takes :class:`~hts_lightning.modules.OnPolicyModule`'s arguments and these.

    Keyword Args:
        clip_epsilon: PPO's ratio clip.
        epochs: passes over each batch.
        minibatches: minibatches per pass (the batch's frames must divide evenly).
        clip_value: clip the critic's change around its value at the start of the update by
            ``clip_epsilon`` and take the larger of the two squared errors (CleanRL's and
            OpenAI baselines' value clipping; TorchRL's ``clip_value``).
        normalize_minibatch_advantage: standardize the advantages of each minibatch (CleanRL's
            ``norm_adv``; ``normalize_advantage`` standardizes the whole batch's once).

    Example:
        >>> from lightning import Trainer
        >>> module = PPO(env_id="CartPole-v1", num_envs=4, num_workers=0, sync_interval=8,
        ...              total_frames=64, epochs=2, minibatches=2)
        >>> Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
        ...         enable_progress_bar=False, enable_model_summary=False).fit(module)
        >>> module.updates, module.global_step
        (2, 8)
    """

    default_gradient_mode = "current"
    gradient_modes = ("delayed", "current", "decoupled")

    def __init__(
        self,
        *,
        clip_epsilon: float = 0.2,
        epochs: int = 4,
        minibatches: int = 4,
        clip_value: bool = False,
        normalize_minibatch_advantage: bool = False,
        **kw,
    ):
        super().__init__(**kw)
        # The base class saved (and resolved) its own arguments, the seed among them.
        self.save_hyperparameters(
            "clip_epsilon", "epochs", "minibatches", "clip_value", "normalize_minibatch_advantage"
        )
        if self.frames_per_batch % minibatches:
            raise ValueError(
                f"minibatches={minibatches} must divide num_envs * sync_interval = "
                f"{self.frames_per_batch}."
            )
        self.use_loss(
            LeanClipPPOLoss(
                self.actor,
                self.critic_head,
                clip_epsilon=clip_epsilon,
                entropy_coeff=self.hparams.entropy_coef,
                critic_coeff=self.hparams.value_coef,
                loss_critic_type="l2",
                clip_value=clip_epsilon if clip_value else None,
                normalize_advantage=normalize_minibatch_advantage,
            )
        )

    @property
    def optimizer_steps_per_update(self) -> int:
        return self.hparams.epochs * self.hparams.minibatches

    def update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        # Minibatches carry only what the loss reads: indexing the whole batch copied the
        # next observations, logits, features... at every step for nothing.
        keys = self.loss_module.tensor_keys
        flat = batch.select(
            *self.actor.in_keys,
            keys.action,
            keys.sample_log_prob,
            keys.advantage,
            keys.value_target,
            # The critic's values at the start of the update, which value clipping keeps near.
            *([keys.value] if self.hparams.clip_value else []),
        ).reshape(-1)
        if self.gradient_mode == "decoupled":
            self._decouple(flat)
        size = flat.numel() // self.hparams.minibatches
        generator = torch.Generator().manual_seed(self.hparams.seed * 1_000_003 + self.updates)
        steps = []
        for _ in range(self.hparams.epochs):
            # One minibatch is the whole batch: its order would change only the rounding.
            if size == flat.numel():
                steps.append(self.gradient_step(flat))
                continue
            order = torch.randperm(flat.numel(), generator=generator).to(flat.device)
            for start in range(0, flat.numel(), size):
                steps.append(self.gradient_step(flat[order[start : start + size]]))
        return mean_per_key(steps)

    @torch.no_grad()
    def _decouple(self, flat: TensorDictBase) -> None:
        """The proximal policy's log-probabilities in place of the behaviour ones, and the
        advantages weighted by pi_prox / pi_behaviour (see the class docstring)."""
        keys = self.loss_module.tensor_keys
        proximal = self.loss_module.log_prob(flat.clone(False))
        weight = (proximal - flat.get(keys.sample_log_prob)).exp()
        advantage = flat.get(keys.advantage)
        flat.set(keys.advantage, advantage * weight.reshape(advantage.shape))
        flat.set(keys.sample_log_prob, proximal)
