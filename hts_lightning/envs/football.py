"""Google Research Football (gfootball) scenarios as TorchRL envs, seeded per replica."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import torch
from torchrl.data import Unbounded
from torchrl.envs import GymWrapper, TransformedEnv
from torchrl.envs.gym_like import default_info_dict_reader

from hts_lightning._compat import football_config
from hts_lightning.envs._shared import check_football_scenario, with_episode_stats

__all__ = ["PAPER_SCENARIOS", "make_football_env"]

#: The scenarios of the HTS-RL paper's football results; each has a recipe in recipes/football.
PAPER_SCENARIOS = (
    "academy_empty_goal_close",
    "academy_empty_goal",
    "academy_run_to_score",
    "academy_run_to_score_with_keeper",
    "academy_pass_and_shoot_with_keeper",
    "academy_run_pass_and_shoot_with_keeper",
    "academy_3_vs_1_with_keeper",
    "academy_corner",
    "academy_counterattack_easy",
    "academy_counterattack_hard",
    "11_vs_11_easy_stochastic",
)

#: Per-step env outputs read from the info dict: the step's scoring reward, the goal difference.
_INFO_KEYS = ("score_reward", "goal_difference")


class _GymnasiumFootball(gymnasium.Env):
    """gfootball's (gym 0.25) env behind the gymnasium API, with the engine seeded from reset.

    ``reset(seed=s)`` reseeds a generator of engine seeds; every reset then draws the episode's
    ``game_engine_random_seed`` (and, from its parity as gfootball itself does, the team
    processing order) from it and restarts the episode count, so an episode depends only on
    the seed, the episode's index since seeding and the actions. The reward of several
    controlled players is their mean (one team reward); ``info`` holds the raw scoring reward
    of the step (+1 goal for, -1 against) and the episode's goal difference so far.
    """

    metadata = {"render_modes": []}

    def __init__(self, scenario, *, representation, stacked, rewards, players, channels_first):
        # gfootball imports gym 0.25, already imported without its banner (envs._quiet_gym).
        from gfootball import env as football

        with warnings.catch_warnings():  # gym 0.25's notice about its old step API
            warnings.filterwarnings("ignore", message=".*old step API", category=DeprecationWarning)
            self._env = football.create_environment(
                env_name=scenario,
                representation=representation,
                stacked=stacked,
                rewards=rewards,
                number_of_left_players_agent_controls=players,
                other_config_options={"game_engine_random_seed": 0},
            )
        self._config = football_config(self._env)
        self._channels_first = channels_first
        self._players = players
        space = self._env.observation_space  # its bounds laid out as the observations are
        self.observation_space = gymnasium.spaces.Box(
            low=self._observation(space.low), high=self._observation(space.high), dtype=space.dtype
        )
        actions = int(np.ravel(getattr(self._env.action_space, "nvec", [0]))[0]) or int(
            self._env.action_space.n
        )
        self.action_space = (
            gymnasium.spaces.Discrete(actions)
            if players == 1
            else gymnasium.spaces.MultiDiscrete([actions] * players)
        )
        self._engine_seeds = np.random.default_rng()
        self._goal_difference = 0.0

    def _observation(self, observation) -> np.ndarray:
        observation = np.asarray(observation)
        if self._channels_first and observation.ndim >= 3:  # [..., H, W, C] -> [..., C, H, W]
            observation = np.ascontiguousarray(np.moveaxis(observation, -1, -3))
        return observation

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._engine_seeds = np.random.default_rng(seed)
            # Scenarios such as 11_vs_11_*_stochastic alternate the kick-off by episode number.
            self._config["episode_number"] = 0
        engine_seed = int(self._engine_seeds.integers(0, 2_000_000_000))
        self._config["game_engine_random_seed"] = engine_seed
        self._config["reverse_team_processing"] = bool(engine_seed % 2)
        self._goal_difference = 0.0
        observation = self._env.reset()
        return self._observation(observation), self._info(0.0)

    def _info(self, score: float) -> dict[str, np.ndarray]:
        return {
            "score_reward": np.array([score], dtype=np.float32),
            "goal_difference": np.array([self._goal_difference], dtype=np.float32),
        }

    def step(self, action):
        if self._players > 1:
            action = [int(a) for a in np.asarray(action).reshape(-1)]
        observation, reward, done, info = self._env.step(action)
        score = float(info["score_reward"])
        self._goal_difference += score
        # The end of a gfootball episode (full time, a goal or lost ball in the academy) is
        # the task's real end: terminated, never truncated.
        return (
            self._observation(observation),
            float(np.mean(reward)),
            bool(done),
            False,
            self._info(score),
        )

    def close(self):
        self._env.close()


def make_football_env(
    scenario: str,
    *,
    seed: int | None = None,
    representation: str = "extracted",
    stacked: bool = True,
    rewards: str = "scoring,checkpoints",
    num_controlled_players: int = 1,
    channels_first: bool = True,
) -> TransformedEnv:
    """A Google Research Football scenario as a TorchRL env (through gymnasium).

    The default observation is the HTS-RL paper's: the "extracted" super-mini-map (SMM, four
    72x96 planes: own team, other team, ball, active player), four frames stacked, as uint8
    ``[16, 72, 96]`` channel-first (the network scales it). With ``num_controlled_players=N``
    > 1 the agent controls N left-team players with one action each: observations get a
    leading player dimension ``[N, 16, 72, 96]``, the action is one-hot ``[N, 19]``, and the
    reward is the team's (the mean of the players' rewards: a goal counts +1 once).

    ``"episode_reward"`` is the episode's training return (scoring plus checkpoints with the
    default ``rewards``); ``"goal_difference"`` is the score the paper reports, goals for minus
    goals against in the episode so far (read it where ``done``); ``"score_reward"`` is the
    step's scoring reward.

    Seeding: ``set_seed(s)`` (as the HTSCollector does for each replica) seeds the engine: every
    episode's ``game_engine_random_seed`` is drawn from a generator seeded by ``s``, so a
    replica's trajectory depends on its seed and its actions only.

    Args:
        scenario: a gfootball scenario, e.g. ``"academy_3_vs_1_with_keeper"``.
        seed: seeds the engine (see above); ``None`` leaves it random until ``set_seed``.
        representation: gfootball's ``"extracted"`` (SMM), ``"simple115v2"`` (a vector),
            ``"pixels"`` or ``"pixels_gray"`` (rendered in software here: slow).
        stacked: stack the last four observations along the channels.
        rewards: gfootball's reward spec, ``"scoring"`` or ``"scoring,checkpoints"``.
        num_controlled_players: left-team players the agent controls.
        channels_first: move image channels first (``[C, H, W]``), as PyTorch convolutions
            expect.

    Example:
        >>> env = make_football_env("academy_empty_goal_close", seed=0)
        >>> env.reset()["observation"].shape, env.action_spec.shape
        (torch.Size([16, 72, 96]), torch.Size([19]))
        >>> env = make_football_env("academy_3_vs_1_with_keeper", num_controlled_players=3)
        >>> env.reset()["observation"].shape, env.action_spec.shape
        (torch.Size([3, 16, 72, 96]), torch.Size([3, 19]))
    """
    check_football_scenario(scenario)
    if num_controlled_players < 1:
        raise ValueError(f"num_controlled_players must be >= 1, got {num_controlled_players}")
    base = _GymnasiumFootball(
        scenario,
        representation=representation,
        stacked=stacked,
        rewards=rewards,
        players=num_controlled_players,
        channels_first=channels_first,
    )
    env = GymWrapper(base)
    info_spec = {key: Unbounded(shape=(1,), dtype=torch.float32) for key in _INFO_KEYS}
    env.set_info_dict_reader(default_info_dict_reader(list(_INFO_KEYS), spec=info_spec))
    return with_episode_stats(env, seed=seed)
