"""Google Research Football: specs, seeding down to the engine, determinism across workers,
multi-player actions, and the install message when the extra is missing."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest
import torch

from hts_lightning.cli import main
from hts_lightning.envs import _shared, env_factory
from hts_lightning.models import PlayersOneHotCategorical, make_actor_critic
from tests.collectors.policies import assert_bitwise_equal, collect
from tests.conftest import quiet_trainer, require_module, worker_processes

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "football"


@pytest.fixture
def _gfootball():
    require_module("gfootball")


# Skipped without the football extra, failed under CI=true (tests.conftest.require_module).
needs_gfootball = pytest.mark.usefixtures("_gfootball")


def _rollout(env, steps: int, *, seed: int | None = None, action_seed: int = 0):
    """A rollout with actions from a dedicated generator; ``seed`` reseeds ``env`` first."""
    if seed is not None:
        env.set_seed(seed)
    generator = torch.Generator().manual_seed(action_seed)
    *players, n = env.action_spec.shape
    td = env.reset()
    out = []
    for _ in range(steps):
        index = torch.randint(n, tuple(players), generator=generator)
        td.set("action", torch.nn.functional.one_hot(index, n))
        stepped, td = env.step_and_maybe_reset(td)
        out.append(stepped.clone())
    return torch.stack(out)


# --- the missing extra: no gfootball needed -------------------------------------------------


def _hide_gfootball(monkeypatch):
    find_spec = importlib.util.find_spec

    def hidden(name, *args, **kwargs):
        return None if name.split(".")[0] == "gfootball" else find_spec(name, *args, **kwargs)

    monkeypatch.setattr(_shared.importlib.util, "find_spec", hidden)


def test_missing_extra_names_the_install_command(monkeypatch):
    _hide_gfootball(monkeypatch)
    with pytest.raises(_shared.MissingDependencyError) as error:
        env_factory("GFootball/academy_empty_goal_close")
    message = str(error.value)
    assert "gfootball is not installed" in message
    assert "scripts/install_football.sh .venv" in message
    assert isinstance(error.value, ImportError) and isinstance(error.value, ValueError)


def test_fit_without_the_extra_exits_2_with_the_command_before_any_process(
    monkeypatch, tmp_path, capsys
):
    _hide_gfootball(monkeypatch)
    monkeypatch.chdir(tmp_path)
    code = main(["fit", "--config", str(RECIPES / "academy_3_vs_1_with_keeper_ppo.yaml")])
    assert code == 2
    err = capsys.readouterr().err
    assert "hts-rl: error:" in err
    assert "Google Research Football needs the `football` extra" in err
    assert "scripts/install_football.sh .venv" in err
    assert worker_processes() == []
    assert not (tmp_path / "runs").exists()


# --- the env --------------------------------------------------------------------------------


@needs_gfootball
def test_unknown_scenario_suggests_close_ones():
    with pytest.raises(ValueError, match="Did you mean one of: academy_3_vs_1_with_keeper"):
        env_factory("GFootball/academy_3_vs_1_keeper")


@needs_gfootball
def test_specs_and_keys_one_player():
    env = env_factory("GFootball/academy_empty_goal_close")()
    assert env.batch_size == torch.Size([])
    assert env.observation_spec["observation"].shape == (16, 72, 96)
    assert env.observation_spec["observation"].dtype == torch.uint8
    assert env.action_spec.shape == (19,)
    data = _rollout(env, 40, seed=0)
    for key in ("reward", "done", "terminated", "truncated", "episode_reward", "step_count"):
        assert data["next", key].shape == (40, 1), key
    assert data["next", "goal_difference"].shape == (40, 1)
    assert data["next", "observation"].shape == (40, 16, 72, 96)
    # SMM planes hold 0 or 255; the ball plane (channel 2 of each frame) marks one point or a few.
    assert set(data["next", "observation"].unique().tolist()) <= {0, 255}
    assert (data["next", "observation"][:, 2] > 0).sum(dim=(-1, -2)).min() >= 1
    assert not data["next", "truncated"].any()  # episodes end terminated, never truncated


@needs_gfootball
def test_specs_three_players_and_team_reward():
    env = env_factory("GFootball/academy_3_vs_1_with_keeper", num_controlled_players=3)()
    assert env.observation_spec["observation"].shape == (3, 16, 72, 96)
    assert env.action_spec.shape == (3, 19)
    data = _rollout(env, 30, seed=1)
    assert data["action"].shape == (30, 3, 19)
    assert data["next", "observation"].shape == (30, 3, 16, 72, 96)
    # One team reward and one done per step, as for one player.
    assert data["next", "reward"].shape == (30, 1)
    assert data["next", "done"].shape == (30, 1)
    # Each player sees itself as the active player: the active-player planes differ.
    active = data["next", "observation"][0, :, 3]
    assert not torch.equal(active[0], active[1]) and not torch.equal(active[1], active[2])


@needs_gfootball
@pytest.mark.parametrize(
    ("scenario", "players"),
    [("academy_3_vs_1_with_keeper", 1), ("11_vs_11_easy_stochastic", 1)],
)
def test_same_seed_same_trajectory_and_set_seed_reaches_the_engine(scenario, players):
    make = env_factory(f"GFootball/{scenario}", num_controlled_players=players)
    a = _rollout(make(), 120, seed=5)
    torch.manual_seed(999)  # the global RNGs must not matter
    import random

    random.seed(999)
    b = _rollout(make(), 120, seed=5)
    assert_bitwise_equal(a, b)
    # Reseeding a used env (as the collector does) gives the fresh env's trajectory: the seed
    # reached the engine and restarted its episode count.
    used = make()
    _rollout(used, 50, seed=123, action_seed=7)
    assert_bitwise_equal(a, _rollout(used, 120, seed=5))
    # Another seed, the same actions: another trajectory.
    c = _rollout(make(), 120, seed=6)
    assert not torch.equal(a["next", "observation"], c["next", "observation"])


@needs_gfootball
def test_goal_difference_counts_goals_of_the_episode():
    # In the empty-goal scenario, the "shot" action (index 12) from the start scores often;
    # goal_difference at an episode's end is the sum of its scoring rewards.
    env = env_factory("GFootball/academy_empty_goal_close", rewards="scoring")()
    env.set_seed(0)
    td = env.reset()
    shot = torch.nn.functional.one_hot(torch.tensor(12), 19)
    steps, total = [], 0.0
    for _ in range(300):
        td.set("action", shot)
        stepped, td = env.step_and_maybe_reset(td)
        steps.append(stepped.clone())
    data = torch.stack(steps)
    done = data["next", "done"].squeeze(-1)
    assert done.sum() >= 2
    ends = done.nonzero().squeeze(-1).tolist()
    start = 0
    for end in ends:
        goals = data["next", "score_reward"][start : end + 1].sum()
        assert data["next", "goal_difference"][end].item() == goals.item()
        # rewards="scoring": the training return is the goal difference.
        assert data["next", "episode_reward"][end].item() == goals.item()
        total += goals.item()
        start = end + 1
    assert total >= 1  # at least one goal was scored, so the check is not vacuous


# --- with the collector and the model -------------------------------------------------------


@needs_gfootball
@pytest.mark.parametrize("players", [1, 3])
def test_hts_collector_batches_identical_with_1_and_2_workers(players):
    create_env = env_factory("GFootball/academy_3_vs_1_with_keeper", num_controlled_players=players)
    probe = create_env()
    torch.manual_seed(0)
    model = make_actor_critic(probe.observation_spec, probe.action_spec)
    probe.close()
    # Each run gets its own copy: the runs perturb the weights as updates would.
    runs = {
        w: collect(
            create_env,
            copy.deepcopy(model).get_policy_operator(),
            num_workers=w,
            num_envs=4,
            sync_interval=16,
            batches=2,
        )
        for w in (1, 2)
    }
    assert_bitwise_equal(runs[1], runs[2])
    batch = runs[1]
    assert batch["action"].shape == (2, 4, 16, *([players] if players > 1 else []), 19)
    assert batch["action_log_prob"].shape == (2, 4, 16)
    # Replicas are seeded apart: their observations differ after the first steps.
    obs = batch["next", "observation"][0, :, -1]
    assert not torch.equal(obs[0], obs[1])
    # The stored log-probability is that of the acting (first, unperturbed) weights: for
    # several players the team's, the sum over players.
    first = batch[0].reshape(-1)
    dist = model.get_policy_operator().get_dist(first.select("observation").clone())
    torch.testing.assert_close(first["action_log_prob"], dist.log_prob(first["action"]))
    if players > 1:
        assert isinstance(dist, PlayersOneHotCategorical)
        index = first["action"].argmax(-1)
        assert (index[:, 0] != index[:, 1]).any()  # each player draws its own action


@needs_gfootball
def test_resume_reseeds_football_deterministically_and_says_so(caplog):
    """GRF cannot save its engine state: a resumed collector re-seeds the replicas from
    (seed, replica, batch), the same way every time, and logs which replicas it re-seeded."""
    import logging

    from tests.collectors.test_resume import STOP_AFTER, _uninterrupted_and_resumed

    create_env = env_factory("GFootball/academy_3_vs_1_with_keeper")
    probe = create_env()
    torch.manual_seed(0)
    model = make_actor_critic(probe.observation_spec, probe.action_spec)
    probe.close()

    def make_policy():
        return copy.deepcopy(model).get_policy_operator()

    runs = []
    for _ in range(2):
        with caplog.at_level(logging.WARNING, logger="hts_lightning.collectors.hts"):
            runs.append(_uninterrupted_and_resumed(create_env, make_policy, num_workers=0))
    (expected, got), (expected_again, got_again) = runs
    assert_bitwise_equal(got, got_again)
    assert_bitwise_equal(expected, expected_again)
    # Batches before the stop are the uninterrupted run's; after it the replicas start new
    # episodes from their re-seeded engines, so the observations part ways.
    assert_bitwise_equal(expected[:STOP_AFTER], got[:STOP_AFTER])
    assert not torch.equal(expected[STOP_AFTER:]["observation"], got[STOP_AFTER:]["observation"])
    assert "replicas [0, 1, 2, 3] cannot save their state" in caplog.text


def test_players_distribution_sums_over_players_and_samples_each_player():
    logits = torch.randn(4, 3, 19)
    dist = PlayersOneHotCategorical(logits)
    action = dist.sample()
    assert action.shape == (4, 3, 19) and torch.equal(action.sum(-1), torch.ones(4, 3).long())
    per_player = torch.distributions.OneHotCategorical(logits=logits)
    torch.testing.assert_close(dist.log_prob(action), per_player.log_prob(action).sum(-1))
    torch.testing.assert_close(dist.entropy(), per_player.entropy().sum(-1))
    assert torch.equal(dist.mode.argmax(-1), logits.argmax(-1))
    # Samples follow each player's own probabilities (and players are independent).
    many = PlayersOneHotCategorical(logits[:1].expand(100_000, 3, 19)).sample().float()
    torch.testing.assert_close(many.mean(0), logits[0].softmax(-1), atol=0.01, rtol=0)
    joint = (many[:, 0].argmax(-1) == 0) & (many[:, 1].argmax(-1) == 0)
    expected = logits[0, 0].softmax(-1)[0] * logits[0, 1].softmax(-1)[0]
    assert abs(joint.float().mean() - expected) < 0.01


def test_actor_critic_with_players_has_one_team_value_and_one_log_prob():
    from torchrl.data import Composite, OneHot, Unbounded

    obs = Composite(observation=Unbounded(shape=(3, 16, 72, 96), dtype=torch.uint8))
    model = make_actor_critic(obs, OneHot(19, shape=(3, 19)))
    data = obs.zero((5,))
    data["observation"] = torch.randint(0, 2, (5, 3, 16, 72, 96), dtype=torch.uint8) * 255
    out = model(data)
    assert out["logits"].shape == (5, 3, 19)
    assert out["action"].shape == (5, 3, 19)
    assert out["action_log_prob"].shape == (5,)
    assert out["state_value"].shape == (5, 1)
    # The team value is the mean of the shared critic applied to each player.
    features = out["features"]
    (head,) = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 1]
    torch.testing.assert_close(out["state_value"], head(features).mean(-2))


@needs_gfootball
def test_goal_difference_is_logged_per_episode_during_training():
    from lightning.pytorch.loggers.logger import DummyLogger

    from hts_lightning import PPO
    from hts_lightning.callbacks import EpisodeEndMetric

    class _Recorder(DummyLogger):
        def __init__(self):
            super().__init__()
            self.logged = []

        def log_metrics(self, metrics, step=None):
            self.logged.append((step, dict(metrics)))

    module = PPO(
        env_id="GFootball/academy_empty_goal_close",
        num_envs=2,
        num_workers=0,
        sync_interval=128,
        total_frames=512,
        epochs=1,
        minibatches=2,
    )
    metric = EpisodeEndMetric(key="goal_difference", name="rollout/goal_difference")
    recorder = _Recorder()
    quiet_trainer(metric, logger=recorder, log_every_n_steps=1).fit(module)
    scores = [(step, m) for step, m in recorder.logged if "rollout/goal_difference" in m]
    assert scores, "episodes of the empty-goal scenario end within 256 steps per env"
    assert {step for step, _ in scores} <= {256, 512}  # logged at the env-frame count
    assert metric.recent and set(metric.recent) <= {-1.0, 0.0, 1.0}  # goals per episode
    last = scores[-1][1]
    assert last["rollout/goal_difference_last_100"] == pytest.approx(
        sum(metric.recent) / len(metric.recent)
    )


@needs_gfootball
def test_evaluate_samples_an_action_for_every_controlled_player():
    from hts_lightning.evaluate import run_episodes
    from hts_lightning.models import TensorPolicy

    create_env = env_factory("GFootball/academy_3_vs_1_with_keeper", num_controlled_players=3)
    probe = create_env()
    model = make_actor_critic(probe.observation_spec, probe.action_spec)
    probe.close()
    policy = TensorPolicy(model.get_policy_operator(), observation_ndim=4)
    returns, lengths, _ = run_episodes(policy, create_env, episodes=2, greedy=False, seed=0)
    assert len(returns) == len(lengths) == 2 and min(lengths) >= 1
    again = run_episodes(policy, create_env, episodes=2, greedy=False, seed=0)
    assert (returns, lengths) == (again[0], again[1])  # seeded: repeatable
