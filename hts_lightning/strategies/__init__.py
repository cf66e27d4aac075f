"""Distributed training strategies."""

from hts_lightning.strategies.delayed_ddp import DelayedGradientDDPStrategy

__all__ = ["DelayedGradientDDPStrategy"]
