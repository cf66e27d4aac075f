from __future__ import annotations

import statistics
import time

import pytest
import torch

from hts_lightning import CountingEnv, VariableLatencyEnv, make_atari_env, make_gym_env


def _rollout(env, seed: int, steps: int, action_seed: int = 0):
    """A rollout with actions from a dedicated generator (the global RNG plays no part)."""
    env.set_seed(seed)
    generator = torch.Generator().manual_seed(action_seed)
    n = env.action_spec.shape[-1]
    td = env.reset()
    out = []
    for _ in range(steps):
        index = torch.randint(n, (), generator=generator)
        td.set("action", torch.nn.functional.one_hot(index, n))
        stepped, td = env.step_and_maybe_reset(td)
        out.append(stepped.clone())
    return torch.stack(out)


def test_gym_same_seed_same_trajectory_other_seed_other_trajectory():
    a = _rollout(make_gym_env("CartPole-v1"), seed=3, steps=60)
    torch.manual_seed(999)  # the global RNG must not matter
    b = _rollout(make_gym_env("CartPole-v1"), seed=3, steps=60)
    c = _rollout(make_gym_env("CartPole-v1"), seed=4, steps=60)
    assert torch.equal(a["next", "observation"], b["next", "observation"])
    assert not torch.equal(a["observation"][0], c["observation"][0])
    assert a["next", "episode_reward"].max() >= 1


def test_unknown_env_id_names_it_and_suggests():
    with pytest.raises(ValueError, match=r"'CartPol-v1'.*CartPole-v1"):
        make_gym_env("CartPol-v1")


@pytest.fixture(scope="module")
def pong_rollouts():
    steps = 150
    same_a = _rollout(make_atari_env("ALE/Pong-v5"), seed=7, steps=steps)
    torch.manual_seed(42)
    same_b = _rollout(make_atari_env("ALE/Pong-v5"), seed=7, steps=steps)
    other = _rollout(make_atari_env("ALE/Pong-v5"), seed=8, steps=steps)
    return same_a, same_b, other


def test_atari_observation_shape_dtype_and_range(pong_rollouts):
    rollout, _, _ = pong_rollouts
    obs = rollout["next", "observation"]
    assert obs.shape == (150, 4, 84, 84)
    assert obs.dtype == torch.uint8
    assert obs.max() > 50 and obs.min() < 100  # real frames, not blank
    # Stacked frames shift by one per step: the newest frame of t is the previous frame of t+1.
    assert torch.equal(obs[10, -1], obs[11, -2])


def test_atari_same_seed_same_trajectory_different_replica_different(pong_rollouts):
    same_a, same_b, other = pong_rollouts
    assert torch.equal(same_a["next", "observation"], same_b["next", "observation"])
    assert torch.equal(same_a["next", "reward"], same_b["next", "reward"])
    # Different seeds draw different no-op starts: the first frames already differ.
    assert not torch.equal(same_a["next", "observation"], other["next", "observation"])


def test_atari_frame_skip_is_really_four():
    env = make_atari_env("ALE/Pong-v5", seed=0)
    ale = env.base_env._env.unwrapped.ale
    td = env.reset()
    start = ale.getEpisodeFrameNumber()
    td.set("action", torch.nn.functional.one_hot(torch.tensor(0), 6))
    for _ in range(10):
        _, td = env.step_and_maybe_reset(td)
        td.set("action", torch.nn.functional.one_hot(torch.tensor(0), 6))
    assert ale.getEpisodeFrameNumber() - start == 40


def test_atari_frame_skip_option_changes_emulator_frames():
    env = make_atari_env("ALE/Pong-v5", seed=0, frame_skip=2, noop_max=0)
    ale = env.base_env._env.unwrapped.ale
    env.rollout(5)
    assert ale.getEpisodeFrameNumber() == 10


def test_atari_training_reward_is_clipped_but_raw_return_is_reported():
    # Space Invaders scores 5-30 points per alien; the training reward must stay in [-1, 1].
    env = make_atari_env("ALE/SpaceInvaders-v5", seed=1)
    rollout = _rollout(env, seed=1, steps=400, action_seed=1)
    reward = rollout["next", "reward"]
    assert reward.abs().max() <= 1.0
    raw_env = make_atari_env("ALE/SpaceInvaders-v5", seed=1, clip_rewards=False)
    raw = _rollout(raw_env, seed=1, steps=400, action_seed=1)["next", "reward"]
    assert raw.abs().max() > 1.0, "pick a game/seed where some raw reward exceeds 1"
    assert torch.equal(reward, raw.clamp(-1, 1))
    # episode_reward keeps the unclipped running sum in both envs.
    running = rollout["next", "episode_reward"]
    assert torch.equal(running[-1], raw.sum(0))


def test_counting_env_counts_and_terminates():
    env = CountingEnv(max_count=3)
    td = env.rollout(7, break_when_any_done=False)
    assert td["observation"].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert td["next", "observation"].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1]
    assert td["next", "terminated"].squeeze(-1).tolist() == [0, 0, 1, 0, 0, 1, 0]
    assert not td["next", "truncated"].any()
    assert torch.equal(td["next", "reward"].squeeze(-1), td["action"].argmax(-1).float())


def test_counting_env_fails_on_purpose():
    env = CountingEnv(max_count=10, fail_at=2)
    env.reset()
    with pytest.raises(RuntimeError, match="failing on purpose at count 2"):
        env.rollout(5)


def test_latency_env_data_depends_on_seed_and_actions_only():
    a = _rollout(VariableLatencyEnv(mean=0.001), seed=5, steps=120)
    b = _rollout(VariableLatencyEnv(mean=0.0, distribution="constant"), seed=5, steps=120)
    c = _rollout(VariableLatencyEnv(mean=0.0, distribution="constant"), seed=6, steps=120)
    assert torch.equal(a["next", "observation"], b["next", "observation"])
    assert torch.equal(a["next", "reward"], b["next", "reward"])
    assert not torch.equal(a["next", "observation"], c["next", "observation"])
    # Episodes end by truncation at episode_length, never by termination.
    assert a["next", "truncated"].squeeze(-1).nonzero().squeeze(-1).tolist() == [99]
    assert not a["next", "terminated"].any()


def test_latency_env_reward_is_learnable_signal():
    env = VariableLatencyEnv(mean=0.0, distribution="constant", num_actions=4)
    env.set_seed(0)
    td = env.reset()
    hits = []
    for _ in range(50):
        best = td["observation"][:4].argmax()
        td.set("action", torch.nn.functional.one_hot(best, 4))
        stepped, td = env.step_and_maybe_reset(td)
        hits.append(stepped["next", "reward"].item())
    assert hits == [1.0] * 50


@pytest.mark.parametrize(
    ("distribution", "mean", "std"),
    [("constant", 0.01, 0.0), ("exponential", 0.01, 0.01), ("lognormal", 0.01, 0.005)],
)
def test_latency_env_step_time_distribution_has_the_asked_mean_and_std(distribution, mean, std):
    env = VariableLatencyEnv(distribution=distribution, mean=mean, std=std)
    env._timing.seed(0)  # the timing RNG is unseeded in use; seeded here to check its numbers
    delays = [env.sample_delay() for _ in range(20_000)]
    # 20k samples: the mean is within ~1.5% (exponential), the std within ~3%.
    assert statistics.fmean(delays) == pytest.approx(mean, rel=0.03)
    assert statistics.pstdev(delays) == pytest.approx(std, rel=0.06, abs=1e-9)


def test_latency_env_steps_sleep_their_drawn_time():
    env = VariableLatencyEnv(distribution="constant", mean=0.01)
    td = env.reset()
    durations = []
    for _ in range(30):
        td.set("action", torch.nn.functional.one_hot(torch.tensor(0), 4))
        start = time.perf_counter()
        _, td = env.step_and_maybe_reset(td)
        durations.append(time.perf_counter() - start)
    assert min(durations) >= 0.01  # a sleep never ends early (no upper bound: shared cores)


def test_latency_env_rejects_bad_distribution():
    with pytest.raises(ValueError, match="distribution must be one of"):
        VariableLatencyEnv(distribution="uniform")
    with pytest.raises(ValueError, match="lognormal step time needs"):
        VariableLatencyEnv(distribution="lognormal", mean=0.01)
