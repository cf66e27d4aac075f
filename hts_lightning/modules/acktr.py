"""ACKTR: A2C with a K-FAC natural-gradient step and a KL trust region (Wu et al., 2017)."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from hts_lightning.collectors import noise_width, sample_from_uniform
from hts_lightning.models import StateIndependentScale
from hts_lightning.modules.a2c import A2C
from hts_lightning.optim import KFAC

__all__ = ["ACKTR"]

#: ACKTR's arguments that are :class:`KFAC`'s own.
_KFAC_ARGUMENTS = ("momentum", "stat_decay", "damping", "kl_clip", "inv_update_interval")


class ACKTR(A2C):
    """A2C whose step is preconditioned by K-FAC; the same skeleton and gradient modes as A2C.

    Before each policy-gradient step, a sampled-Fisher pass (actions sampled from the policy,
    the value output with unit Gaussian noise, at the same parameters as the gradient) updates
    K-FAC's factors; its gradients are computed with ``torch.autograd.grad`` and never touch
    the policy-gradient buffers. The step size is bounded by ACKTR's KL clip, so gradients are
    not clipped by norm by default. Under a DDP strategy the ranks average their factors after
    every Fisher pass. Checkpoints carry K-FAC's factors, eigendecompositions and step count
    (in the optimizer state) and the Fisher pass's random stream: a resumed run takes the same
    steps as an uninterrupted one.

    It takes :class:`~hts_lightning.modules.OnPolicyModule`'s arguments (``lr`` defaults to
    0.25) and these.

    Keyword Args:
        momentum, stat_decay, damping, kl_clip, inv_update_interval:
            :class:`~hts_lightning.optim.KFAC`'s.
        fisher_value_coef: weight of the value head's term in the Fisher loss. The KL clip
            covers the critic's Gaussian as well as the policy: with returns far above 1
            (unclipped rewards, e.g. CartPole's ~50) the critic's term can take nearly all of
            the trust region and leave the policy tiny steps. ``fisher_value_coef`` (the
            Gaussian's width, about ``0.5 / fisher_value_coef``) together with ``value_coef``
            (about ``1 / (2 width^2)`` for a consistent likelihood) rebalances them.

    Example:
        >>> from lightning import Trainer
        >>> module = ACKTR(env_id="CartPole-v1", num_envs=4, num_workers=0, sync_interval=8,
        ...                total_frames=64)
        >>> Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
        ...         enable_progress_bar=False, enable_model_summary=False).fit(module)
        >>> sorted(module.optimizers().optimizer.factors)[:2]
        ['module.0.module.0', 'module.0.module.2']
    """

    def __init__(
        self,
        *,
        lr: float = 0.25,
        max_grad_norm: float | None = None,
        momentum: float = 0.9,
        stat_decay: float = 0.99,
        damping: float = 0.01,
        kl_clip: float = 0.001,
        inv_update_interval: int = 10,
        fisher_value_coef: float = 1.0,
        **kw,
    ):
        if kw.get("optimizer", "adam") != "adam":
            raise ValueError(
                f"optimizer={kw['optimizer']!r}: ACKTR's optimizer is K-FAC (its lr, momentum, "
                "damping and kl_clip set it). Drop optimizer, or train A2C or PPO with it."
            )
        super().__init__(lr=lr, max_grad_norm=max_grad_norm, **kw)
        # The base class saved (and resolved) its own arguments, the seed among them.
        self.save_hyperparameters(*_KFAC_ARGUMENTS, "fisher_value_coef")
        self._fisher_rng = torch.Generator().manual_seed(self.hparams.seed + 1)

    def make_optimizer(self) -> torch.optim.Optimizer:
        kfac = {name: self.hparams[name] for name in _KFAC_ARGUMENTS}
        # A Gaussian policy's log-std is no layer: it takes K-FAC's plain momentum steps.
        return KFAC(self.model, lr=self.hparams.lr, skip=(StateIndependentScale,), **kfac)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        # The Fisher pass's sampling stream; K-FAC's factors travel in the optimizer state.
        checkpoint["hts_acktr"] = {"fisher_rng": self._fisher_rng.get_state()}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        super().on_load_checkpoint(checkpoint)
        saved = checkpoint.get("hts_acktr")
        if saved is not None:
            self._fisher_rng.set_state(saved["fisher_rng"])

    def update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        flat = batch.reshape(-1)
        with self.gradient_parameters():
            self.fisher_pass(flat)
        self._average_factors()
        out = self.gradient_step(flat)
        out["kl_scale"] = torch.tensor(self.optimizers().optimizer.last_kl_scale)
        return out

    def _average_factors(self) -> None:
        """Under DDP, every rank takes the mean of the ranks' factors: the statistics of the
        whole batch (running averages are linear), and the same preconditioner everywhere."""
        if self.trainer.world_size == 1:
            return
        tensors = self.optimizers().optimizer.statistics()
        mean = self.trainer.strategy.reduce(
            torch.cat([t.reshape(-1) for t in tensors]), reduce_op="mean"
        )
        for tensor, averaged in zip(tensors, mean.split([t.numel() for t in tensors]), strict=True):
            tensor.copy_(averaged.view_as(tensor))

    def fisher_pass(self, data: TensorDictBase) -> None:
        """Record K-FAC statistics from the sampled Fisher loss on ``data``."""
        kfac: KFAC = self.optimizers().optimizer
        with kfac.fisher_pass():
            # One trunk pass: the actor writes the "features" the value head reads.
            td = data.exclude("features").clone(False)
            dist = self.actor.get_dist(td, tensordict_out=td)
            # Drawn for every rank's rows, this rank's taken: N ranks sample the Fisher one
            # rank with all the replicas samples (rows are the ranks' shards in order).
            rows, world = td.shape[0], self.trainer.world_size
            mine = slice(self.global_rank * rows, (self.global_rank + 1) * rows)
            uniform = torch.rand(world * rows, noise_width(dist), generator=self._fisher_rng)
            action = sample_from_uniform(dist, uniform[mine].to(td.device))
            value = self.critic_head(td)["state_value"]
            noise = torch.randn((world * rows, *value.shape[1:]), generator=self._fisher_rng)
            noise = noise[mine].to(value.device)
            target = value.detach() + noise
            fisher_loss = -dist.log_prob(action).mean() + self.hparams.fisher_value_coef * (
                (value - target).pow(2).mean()
            )
            parameters = [p for p in self.model.parameters() if p.requires_grad]
            torch.autograd.grad(fisher_loss, parameters, allow_unused=True)
