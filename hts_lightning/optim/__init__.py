"""Optimizers no maintained library provides: K-FAC for ACKTR."""

from hts_lightning.optim.kfac import KFAC

__all__ = ["KFAC"]
