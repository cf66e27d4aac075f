"""envpool envs: the Python path's keys, specs and (where envpool allows) pixels."""

from __future__ import annotations

import pickle

import pytest
import torch

from hts_lightning.envs import EnvpoolFactory, env_factory, episode_ends
from hts_lightning.envs import envpool as envpool_module
from hts_lightning.envs._shared import MissingDependencyError
from hts_lightning.evaluate import run_episodes
from tests.conftest import require_module

require_module("envpool")


def _layout(td):
    return {k: (v.shape, v.dtype) for k, v in td.items(include_nested=True, leaves_only=True)}


def test_cartpole_specs_equal_the_python_paths():
    native, python = env_factory("CartPole-v1", backend="envpool")(), env_factory("CartPole-v1")()
    assert native.observation_spec == python.observation_spec
    assert native.action_spec == python.action_spec
    assert native.full_done_spec == python.full_done_spec
    assert native.reward_spec == python.reward_spec
    assert _layout(native.fake_tensordict()) == _layout(python.fake_tensordict())


def test_atari_keys_shapes_and_dtypes_equal_the_python_paths():
    native, python = env_factory("ALE/Pong-v5", backend="envpool")(), env_factory("ALE/Pong-v5")()
    assert _layout(native.fake_tensordict()) == _layout(python.fake_tensordict())
    assert native.action_spec == python.action_spec
    # The one spec difference: envpool declares the pixel bounds [0, 255], gymnasium's frame
    # stack leaves them unbounded.
    assert native.observation_spec["observation"].space.high.max() == 255


@pytest.mark.parametrize("game", ["ALE/Pong-v5", "ALE/Breakout-v5"])
def test_atari_pixels_rewards_and_ends_equal_make_atari_env_without_random_no_ops(game):
    """With one fixed no-op after reset (noop_max=1) nothing random is left, and envpool's
    preprocessing (frame skip, max-pool, grayscale, area resize, stack) gives the same uint8
    frames as gymnasium's AtariPreprocessing + FrameStackObservation, step for step."""
    native = env_factory(game, backend="envpool", noop_max=1)()
    python = env_factory(game, noop_max=1)()
    native.set_seed(3)
    python.set_seed(3)
    a, b = native.reset(), python.reset()
    assert torch.equal(a["observation"], b["observation"])
    generator = torch.Generator().manual_seed(0)
    actions = native.action_spec.shape[-1]
    changed = 0
    for _ in range(250):
        index = torch.randint(actions, (), generator=generator)
        action = torch.nn.functional.one_hot(index, actions)
        a["action"], b["action"] = action, action.clone()
        stepped_a, a = native.step_and_maybe_reset(a)
        stepped_b, b = python.step_and_maybe_reset(b)
        for key in ("observation", "reward", "done", "episode_reward", "step_count"):
            assert torch.equal(stepped_a["next", key], stepped_b["next", key]), key
        changed += int(not torch.equal(stepped_a["next", "observation"], stepped_a["observation"]))
    assert changed > 200  # the frames really moved


def test_a_finished_episode_resets_as_the_native_backend_resets_it():
    env = env_factory("CartPole-v1", backend="envpool")()
    env.set_seed(0)
    td = env.reset()
    push_left, steps, done = torch.tensor([1, 0]), 0, False
    while not done:
        td["action"] = push_left
        stepped, td = env.step_and_maybe_reset(td)
        steps, done = steps + 1, bool(stepped["next", "done"])
    assert stepped["next", "terminated"] and stepped["next", "episode_reward"].item() == steps
    assert td["step_count"].item() == 0 and td["episode_reward"].item() == 0.0
    assert td["observation"].abs().max() < 0.05  # CartPole's reset state, not the fallen pole


def _noop_steps_to_first_done(make, limit=300):
    env = make()
    env.set_seed(3)
    td = env.reset()
    for step in range(1, limit + 1):
        td["action"] = torch.nn.functional.one_hot(torch.tensor(0), env.action_spec.shape[-1])
        stepped, td = env.step_and_maybe_reset(td)
        if stepped["next", "done"]:
            return step
    return None


def _noop_steps_with_moving_frames(make, steps=30):
    env = make()
    env.set_seed(3)
    td, moved = env.reset(), 0
    for _ in range(steps):
        td["action"] = torch.nn.functional.one_hot(torch.tensor(0), env.action_spec.shape[-1])
        stepped, td = env.step_and_maybe_reset(td)
        moved += int(not torch.equal(stepped["next", "observation"], stepped["observation"]))
    return moved


@pytest.mark.parametrize("backend", ["envpool", "python"])
def test_fire_reset_serves_breakouts_ball_and_without_it_the_game_waits(backend):
    """Standing still after FIRE, the served ball moves and is missed (a life lost, with
    episodic life); without FIRE no ball comes: the screen stands still and no life is lost."""
    for episodic_life in (True, False):
        settings = dict(backend=backend, episodic_life=episodic_life, noop_max=1)
        served = env_factory("ALE/Breakout-v5", fire_reset=True, **settings)
        waiting = env_factory("ALE/Breakout-v5", fire_reset=False, **settings)
        assert _noop_steps_with_moving_frames(served) > 10
        assert _noop_steps_with_moving_frames(waiting) == 0
        if episodic_life:
            assert _noop_steps_to_first_done(served) is not None
            assert _noop_steps_to_first_done(waiting) is None


@pytest.mark.parametrize("backend", ["envpool", "python"])
def test_episodic_life_ends_training_episodes_at_a_life_loss_and_reports_the_game(backend):
    """Breakout with episodic life: each of the 5 lives ends a training episode (done), the
    game goes on after it, and the statistics run over the whole game: the reported episode
    (``episode_ends``) is the game, with its raw score and length; evaluation plays games too.
    """
    make = env_factory("ALE/Breakout-v5", backend=backend, episodic_life=True, fire_reset=True)
    env = make()
    env.set_seed(5)
    td = env.reset()
    actions = torch.Generator().manual_seed(0)
    steps, score, lives_lost = 0, 0.0, 0
    while True:
        td["action"] = torch.nn.functional.one_hot(torch.randint(4, (), generator=actions), 4)
        stepped, td = env.step_and_maybe_reset(td)
        after = stepped["next"]
        steps, score = steps + 1, score + float(after["reward"])  # Breakout's bricks: 1, 4, 7
        if episode_ends(after):
            break
        if after["done"]:  # a life lost: the next root goes on with the game's statistics
            lives_lost += 1
            assert td["episode_reward"].item() == after["episode_reward"].item()
            assert td["step_count"].item() == steps and not td["game_over"]
    assert lives_lost == 4 and after["done"] and after["game_over"]
    assert after["step_count"].item() == steps > 100
    assert after["episode_reward"].item() >= score > 0  # the clipped rewards sum to less
    assert td["step_count"].item() == 0 and td["episode_reward"].item() == 0.0  # a new game

    class Still(torch.nn.Module):  # stands still: loses every life to the served ball
        def forward(self, observation):
            return torch.zeros(observation.shape[0], dtype=torch.int64)

    returns, lengths, _ = run_episodes(Still(), make, episodes=1, seed=5)
    assert returns == [0.0] and lengths[0] > 5 * 20  # one game of five lives, not one life


def test_seeding_after_a_reset_steps_on_as_seeding_before_it():
    """TorchRL's collectors seed an env after its first reset and step on without another."""
    action = torch.tensor([0, 1])
    seeded_late = env_factory("CartPole-v1", backend="envpool")()
    seeded_late.reset()
    seeded_late.set_seed(1)
    late = seeded_late.step(seeded_late.fake_tensordict().update({"action": action}))
    seeded_first = env_factory("CartPole-v1", backend="envpool")()
    seeded_first.set_seed(1)
    first = seeded_first.step(seeded_first.reset().update({"action": action}))
    assert torch.equal(late["next", "observation"], first["next", "observation"])
    other = env_factory("CartPole-v1", backend="envpool")()
    other.set_seed(2)
    second = other.step(other.reset().update({"action": action}))
    assert not torch.equal(second["next", "observation"], first["next", "observation"])
    # TorchRL's ParallelEnv/SerialEnv chain seeds over uint32; envpool takes int32 ones.
    other.set_seed(4087425277)
    wide = other.step(other.reset().update({"action": action}))
    other.set_seed(4087425277 % (2**31 - 1))
    again = other.step(other.reset().update({"action": action}))
    assert torch.equal(again["next", "observation"], wide["next", "observation"])


def test_the_factory_is_picklable_and_keeps_the_atari_settings():
    make = env_factory(
        "ALE/Breakout-v5", backend="envpool", repeat_action_probability=0.25, frame_stack=2
    )
    assert isinstance(make, EnvpoolFactory)
    assert pickle.loads(pickle.dumps(make)) == make
    options = dict(make.options)
    assert options["repeat_action_probability"] == 0.25 and options["stack_num"] == 2
    assert options["use_fire_reset"] is False and options["max_episode_steps"] == 27_000
    assert make.clip_rewards and make().fake_tensordict()["observation"].shape == (2, 84, 84)


def test_bad_ids_and_arguments_name_the_fix():
    with pytest.raises(ValueError, match="env_backend: python"):
        env_factory("ALE/Pongg-v5", backend="envpool")
    with pytest.raises(ValueError, match=r"Did you mean one of: ALE/Pong-v5"):
        env_factory("ALE/Pongg-v5", backend="envpool")
    with pytest.raises(ValueError, match=r"Atari.*football.*classic-control"):
        env_factory("Pong-v5", backend="envpool")
    with pytest.raises(ValueError, match="takes no env_kwargs"):
        env_factory("CartPole-v1", backend="envpool", std=1.0)
    with pytest.raises(ValueError, match="Unknown Atari env_kwargs"):
        env_factory("ALE/Pong-v5", backend="envpool", frameskip=4)
    with pytest.raises(ValueError, match="multiple of frame_skip"):
        env_factory("ALE/Pong-v5", backend="envpool", max_episode_frames=1001)
    with pytest.raises(ValueError, match="env backend must be one of"):
        env_factory("CartPole-v1", backend="cpp")


def test_football_port_stacks_its_frames_as_the_gfootball_package_does():
    """envpool's football port returns one [72, 96, 4] frame a step; the factory stacks four,
    channels first, as make_football_env's default observation: the same bits at reset."""
    require_module("gfootball")
    scenario = "GFootball/academy_empty_goal_close"
    native = env_factory(scenario, backend="envpool", rewards="scoring")()
    python = env_factory(scenario, rewards="scoring")()
    assert native.observation_spec["observation"].shape == (16, 72, 96)
    assert native.action_spec == python.action_spec
    native.set_seed(0)
    python.set_seed(0)
    first = native.reset()
    assert torch.equal(first["observation"], python.reset()["observation"])
    assert torch.equal(first["observation"][:4], first["observation"][12:])  # start: 4 copies
    # Run right, then shoot: the step's new frame comes last, the oldest goes; a goal is
    # +1 and the episode's end.
    td, rows = first, []
    for index in [5] * 20 + [12] * 20:
        td["action"] = torch.nn.functional.one_hot(torch.tensor(index), 19)
        stepped, td = native.step_and_maybe_reset(td)
        rows.append(stepped)
        if stepped["next", "done"]:
            break
    assert torch.equal(stepped["next", "observation"][:12], stepped["observation"][4:])
    assert stepped["next", "terminated"] and stepped["next", "episode_reward"].item() == 1.0
    assert sum(float(r["next", "reward"]) for r in rows) == 1.0
    assert td["step_count"].item() == 0  # reset for the next episode


def test_football_options_the_port_lacks_are_refused_with_the_way_out():
    scenario = "GFootball/academy_corner"
    with pytest.raises(ValueError, match=r"scoring reward only.*rewards: scoring"):
        env_factory(scenario, backend="envpool")
    with pytest.raises(ValueError, match=r"not 'scoring,checkpoints'"):
        env_factory(scenario, backend="envpool", rewards="scoring,checkpoints")
    with pytest.raises(ValueError, match=r"num_controlled_players=1 only.*env_backend: python"):
        env_factory(scenario, backend="envpool", rewards="scoring", num_controlled_players=3)
    with pytest.raises(ValueError, match=r"representation='extracted' only"):
        env_factory(scenario, backend="envpool", rewards="scoring", representation="pixels")
    with pytest.raises(ValueError, match=r"Unknown football env_kwargs \['seed'\]"):
        env_factory(scenario, backend="envpool", rewards="scoring", seed=1)
    with pytest.raises(ValueError, match=r"Did you mean one of: GFootball/academy_corner"):
        env_factory("GFootball/academy_corne", backend="envpool", rewards="scoring")
    unstacked = env_factory(scenario, backend="envpool", rewards="scoring", stacked=False)
    assert unstacked.frame_stack == 1 and pickle.loads(pickle.dumps(unstacked)) == unstacked
    assert unstacked().observation_spec["observation"].shape == (4, 72, 96)


def test_without_envpool_the_backend_stops_naming_the_fallback(monkeypatch):
    monkeypatch.setattr(envpool_module, "envpool_available", lambda: False)
    with pytest.raises(MissingDependencyError, match="`env_backend: python`"):
        env_factory("CartPole-v1", backend="envpool")


def test_every_python_atari_option_is_one_envpool_maps():
    # The envpool path takes make_atari_env's options from its signature: a new option there
    # must be mapped to envpool's options in envpool_factory, then added here.
    assert sorted(envpool_module._ATARI_DEFAULTS) == [
        "clip_rewards",
        "episodic_life",
        "fire_reset",
        "frame_skip",
        "frame_stack",
        "max_episode_frames",
        "noop_max",
        "repeat_action_probability",
        "screen_size",
    ]
