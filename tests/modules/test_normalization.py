"""Observation and reward normalization: the running statistics are those of all the data
seen, rewards are scaled by the running std of each replica's discounted return, and both
travel in checkpoints, are the same for any worker count, and are in the exported policy."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from hts_lightning import PPO
from hts_lightning.models import RunningNorm, TensorPolicy
from hts_lightning.modules.normalization import RewardScaler
from tests.conftest import quiet_trainer


def test_running_norm_keeps_the_mean_and_variance_of_everything_it_was_given():
    torch.manual_seed(0)
    chunks = [torch.randn(n, 3) * torch.tensor([1.0, 10.0, 0.1]) + 5 for n in (7, 50, 1, 20)]
    norm = RunningNorm((3,))
    for chunk in chunks:
        norm.update(chunk)
    every = torch.cat(chunks)
    torch.testing.assert_close(norm.mean, every.mean(0), rtol=1e-5, atol=1e-5)
    # (the prior count of 1e-4 at mean 0 and variance 1 weighs a few 1e-5 here)
    torch.testing.assert_close(norm.var, every.var(0, unbiased=False), rtol=1e-4, atol=1e-4)
    assert float(norm.count) == len(every) + 1e-4
    standardized = norm(every)
    torch.testing.assert_close(standardized.mean(0), torch.zeros(3), atol=1e-4, rtol=0)
    assert norm(torch.full((1, 3), 1e6)).max() == 10.0  # clipped


def test_reward_scaler_divides_by_the_std_of_discounted_returns_carried_across_batches():
    scaler = RewardScaler(num_envs=2, gamma=0.5)
    reward = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 2.0]]).unsqueeze(-1)
    done = torch.tensor([[False, True, False], [False, False, False]]).unsqueeze(-1)
    batch = TensorDict({("next", "reward"): reward, ("next", "done"): done}, batch_size=[2, 3])
    scaled = scaler(batch)
    # Hand-computed returns: replica 0 ends an episode at step 1, so step 2 starts afresh.
    returns = torch.tensor([[1.0, 2.5, 3.0], [4.0, 2.0, 3.0]], dtype=torch.float64)
    expected_var = returns.reshape(-1).var(unbiased=False)
    torch.testing.assert_close(scaler.statistics.var.double(), expected_var, rtol=1e-3, atol=0)
    torch.testing.assert_close(scaled, reward / torch.sqrt(scaler.statistics.var.float() + 1e-8))
    assert scaler.returns.tolist() == [3.0, 3.0]  # carried into the next batch
    scaler(batch)
    # Replica 0: 3/2 + 1, then + 2 and done, then 3 afresh; replica 1: 3/2 + 4, + 0, + 2.
    assert scaler.returns.tolist() == [3.0, 3.375]


def _module(num_workers: int) -> PPO:
    return PPO(
        env_id="Pendulum-v1",
        num_envs=4,
        num_workers=num_workers,
        sync_interval=16,
        total_frames=4 * 16 * 3,
        shared_trunk=False,
        normalize_observations=True,
        normalize_reward=True,
        epochs=2,
        minibatches=2,
        seed=1,
    )


def test_normalized_runs_are_the_same_for_any_worker_count_and_keep_their_statistics(tmp_path):
    modules = []
    for workers in (0, 2):
        module = _module(workers)
        quiet_trainer().fit(module)
        modules.append(module)
    first, second = (m.state_dict() for m in modules)
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name
    norm = next(m for m in modules[0].model.modules() if isinstance(m, RunningNorm))
    assert float(norm.count) > 4 * 16 * 3 - 1  # every observation of the run
    assert any(k.endswith("mean") for k in first) and "reward_scaler.returns" in first
    # The exported policy normalizes as the network does (a raw observation in): with the
    # statistics reset, the same weights act otherwise.
    raw = torch.tensor([[0.5, -0.5, 3.0]])
    trained = TensorPolicy(modules[0].actor, observation_ndim=1)(raw)
    with torch.no_grad():
        norm.mean.zero_()
        norm.var.fill_(1.0)
    assert not torch.equal(TensorPolicy(modules[0].actor, observation_ndim=1)(raw), trained)
