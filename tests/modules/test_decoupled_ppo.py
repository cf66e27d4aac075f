"""PPO's decoupled gradient mode: the ratio is taken against the policy at the start of the
update (it is exactly 1 at the first step), and each advantage is weighted by
pi_prox / pi_behaviour, which the lag makes differ from 1."""

from __future__ import annotations

import pytest
import torch

from hts_lightning import A2C, PPO
from tests.conftest import quiet_trainer


def _ppo(**kw) -> PPO:
    return PPO(
        env_id="CartPole-v1",
        num_envs=4,
        num_workers=0,
        sync_interval=16,
        total_frames=4 * 16 * 4,
        epochs=2,
        minibatches=2,
        lr=0.01,
        gradient_mode="decoupled",
        **kw,
    )


def test_the_ratio_starts_at_one_and_advantages_carry_the_lag_weight(monkeypatch):
    module = _ppo()
    seen = []
    decouple, step = module._decouple, module.gradient_step

    def recording_decouple(flat):
        behaviour = flat["action_log_prob"].clone()
        advantage = flat["advantage"].clone()
        decouple(flat)
        seen.append({"behaviour": behaviour, "advantage": advantage, "after": flat.clone()})

    def recording_step(data):
        out = step(data)
        seen[-1].setdefault("kl", []).append(out["kl_approx"].float().mean())
        return out

    monkeypatch.setattr(module, "_decouple", recording_decouple)
    monkeypatch.setattr(module, "gradient_step", recording_step)
    quiet_trainer().fit(module)
    assert len(seen) == 4
    for update in seen:
        proximal = update["after"]["action_log_prob"]
        weight = (proximal - update["behaviour"]).exp()
        torch.testing.assert_close(
            update["after"]["advantage"], update["advantage"] * weight[..., None]
        )
        assert update["kl"][0] == 0  # the first step is at the proximal policy itself
    # Batch 0 was collected by the initial policy, and update 0 starts from it: weight 1.
    torch.testing.assert_close(seen[0]["after"]["action_log_prob"], seen[0]["behaviour"])
    # Later batches are one update behind: the weights move away from 1.
    later = (seen[2]["after"]["action_log_prob"] - seen[2]["behaviour"]).abs().max()
    assert later > 1e-3


def test_decoupled_is_ppos_alone():
    with pytest.raises(ValueError, match="'decoupled' is not offered by A2C"):
        A2C(gradient_mode="decoupled")
