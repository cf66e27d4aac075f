"""Slow tier: the algorithms really learn CartPole with the HTSCollector (lag exactly one)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from lightning import Callback

from hts_lightning import A2C, ACKTR, PPO
from tests.conftest import quiet_trainer

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


class _ReachReturn(Callback):
    """Stops at the first step where the mean of the last 20 episode returns reaches a target."""

    def __init__(self, target: float):
        self.target = target
        self.reached_at: int | None = None
        self.best = 0.0

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if len(module.recent_returns) < 20:
            return
        mean = sum(module.recent_returns) / len(module.recent_returns)
        self.best = max(self.best, mean)
        if mean >= self.target:
            self.reached_at = module.frames
            trainer.should_stop = True


def _recipe_args(name: str) -> dict:
    return yaml.safe_load((RECIPES / name).read_text())["model"]["init_args"]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("cls", "recipe"),
    [(PPO, "cartpole_ppo.yaml"), (A2C, "cartpole_a2c.yaml"), (ACKTR, "cartpole_acktr.yaml")],
)
def test_cartpole_reaches_475_within_100k_frames(cls, recipe):
    args = _recipe_args(recipe)
    assert args["total_frames"] <= 100_000
    module = cls(**args)
    reach = _ReachReturn(475.0)
    quiet_trainer(reach).fit(module)
    assert reach.reached_at is not None, f"best mean return of 20 episodes: {reach.best:.1f}"
    assert reach.reached_at <= 100_000
    assert module.last_metrics["perf/policy_lag"] == 1.0
