"""A2C on the shared on-policy skeleton, with TorchRL's A2CLoss (its value loss reaching a
shared trunk)."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from hts_lightning.modules.a2c_loss import SharedTrunkA2CLoss
from hts_lightning.modules.on_policy import OnPolicyModule

__all__ = ["A2C"]


class A2C(OnPolicyModule):
    """Advantage actor-critic: one gradient step per batch, by default with the delayed gradient.

    Every keyword argument is :class:`OnPolicyModule`'s; the default ``gradient_mode`` is
    ``"delayed"`` (the gradient is taken at the parameters that collected the batch).

    Example:
        >>> from lightning import Trainer
        >>> module = A2C(env_id="CartPole-v1", num_envs=4, num_workers=0, sync_interval=8,
        ...              total_frames=64)
        >>> Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
        ...         enable_progress_bar=False, enable_model_summary=False).fit(module)
        >>> module.updates, module.frames
        (2, 64)
    """

    def __init__(self, **kw):
        super().__init__(**kw)
        self.use_loss(
            SharedTrunkA2CLoss(
                self.actor,
                self.critic_head,
                entropy_coeff=self.hparams.entropy_coef,
                critic_coeff=self.hparams.value_coef,
                loss_critic_type="l2",
            )
        )

    def update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        return self.gradient_step(batch.reshape(-1))
