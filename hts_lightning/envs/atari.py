"""Atari environments with the standard preprocessing, seeded per replica."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
from torchrl.data import Categorical, Unbounded
from torchrl.envs import GymWrapper, TransformedEnv, default_info_dict_reader

from hts_lightning.envs._shared import GAME_OVER, check_env_id, with_episode_stats

__all__ = ["make_atari_env"]


def make_atari_env(
    env_id: str,
    *,
    seed: int | None = None,
    frame_skip: int = 4,
    frame_stack: int = 4,
    screen_size: int = 84,
    noop_max: int = 30,
    repeat_action_probability: float = 0.0,
    episodic_life: bool = False,
    fire_reset: bool = False,
    clip_rewards: bool = True,
    max_episode_frames: int = 108_000,
) -> TransformedEnv:
    """An ALE game with the standard DQN/A2C/PPO preprocessing, as a TorchRL env.

    The emulator runs at frame skip 1 and gymnasium's ``AtariPreprocessing`` repeats each action
    ``frame_skip`` times, max-pools the last two frames, converts to 84x84 grayscale and draws the
    no-op starts from the env's own seeded RNG (never the global one), so a replica's trajectory
    depends on its seed and its actions only. Frames are stacked channel-first as uint8
    ``[frame_stack, 84, 84]`` (the network scales them). ``"episode_reward"`` is the raw,
    unclipped return; the training ``"reward"`` is clipped to [-1, 1] when ``clip_rewards``.

    Args:
        env_id: an ALE id such as ``"ALE/Pong-v5"``.
        seed: seeds the emulator, the sticky actions and the no-op starts.
        frame_skip: emulator frames per agent step.
        frame_stack: stacked observations.
        screen_size: side of the square grayscale observation.
        noop_max: at most this many no-ops after each reset.
        repeat_action_probability: sticky actions (0.25 in the Machado et al. protocol).
        episodic_life: end the episode on a life loss, the game going on after it (DQN's
            EpisodicLife); ``"episode_reward"`` and ``"step_count"`` are then the game's and
            ``"game_over"`` marks its end (see docs/guides/envpool.md).
        fire_reset: press FIRE once after each reset's no-ops, in games whose action 1 is
            FIRE (Breakout waits for it to serve); the anchors' Atari settings press FIRE
            after reset too. The reset's no-op and FIRE steps count in neither the return
            nor the steps.
        clip_rewards: clip the training reward to [-1, 1].
        max_episode_frames: emulator frames before the episode is truncated.

    Example:
        >>> env = make_atari_env("ALE/Pong-v5", seed=0)
        >>> env.reset()["observation"].shape
        torch.Size([4, 84, 84])
    """
    check_env_id(env_id)
    base = gym.make(
        env_id,
        frameskip=1,
        repeat_action_probability=repeat_action_probability,
        max_num_frames_per_episode=max_episode_frames,
    )
    base = AtariPreprocessing(
        base,
        noop_max=noop_max,
        frame_skip=frame_skip,
        screen_size=screen_size,
        grayscale_obs=True,
        scale_obs=False,
    )
    fire = fire_reset and base.unwrapped.get_action_meanings()[1:2] == ["FIRE"]
    if episodic_life:
        base = EpisodicLife(base, fire=fire)
    elif fire:
        base = FireReset(base)
    base = FrameStackObservation(base, stack_size=frame_stack)
    env = GymWrapper(base)
    if episodic_life:
        env.set_info_dict_reader(default_info_dict_reader(list(_GAME_SPECS), spec=_GAME_SPECS))
    return with_episode_stats(env, seed=seed, clip_rewards=clip_rewards, counted=episodic_life)


class FireReset(gym.Wrapper):
    """One FIRE step after each reset: games such as Breakout wait for it to serve."""

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        observation, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:  # the FIRE ended it (never seen): start again
            return self.env.reset(**kwargs)
        return observation, info


_GAME_SPECS = {
    "episode_reward": Unbounded(shape=(1,), dtype=torch.float32),
    "step_count": Unbounded(shape=(1,), dtype=torch.int64),
    GAME_OVER: Categorical(2, shape=(1,), dtype=torch.bool),
}


class EpisodicLife(gym.Wrapper):
    """A life lost ends the episode, and the reset after it goes on with the game (one no-op
    step; then FIRE with ``fire``, as after a full reset). The game's raw return and steps so
    far (reset steps not counted) and whether it ended go in ``info`` at every step and reset
    (``_GAME_SPECS``' keys)."""

    def __init__(self, env: gym.Env, *, fire: bool):
        super().__init__(env)
        self._fire = fire
        self._lives, self._life_lost, self._game_over = 0, False, True
        self._return, self._steps = np.float32(0.0), 0

    def reset(self, **kwargs):
        ended = True
        if self._life_lost and kwargs.get("seed") is None:
            observation, _, terminated, truncated, info = self.env.step(0)
            ended = terminated or truncated
        if ended:
            observation, info = self.env.reset(**kwargs)
            self._return, self._steps = np.float32(0.0), 0
        if self._fire:
            observation, _, terminated, truncated, info = self.env.step(1)
            if terminated or truncated:  # the FIRE ended it (never seen): start again
                observation, info = self.env.reset(**kwargs)
                self._return, self._steps = np.float32(0.0), 0
        self._lives, self._life_lost, self._game_over = self.env.unwrapped.ale.lives(), False, False
        return observation, self._with_game(info)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._return, self._steps = np.float32(self._return + np.float32(reward)), self._steps + 1
        self._game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        self._life_lost, self._lives = 0 < lives < self._lives and not self._game_over, lives
        done = terminated or self._life_lost
        return observation, reward, done, truncated, self._with_game(info)

    def _with_game(self, info: dict) -> dict:
        return {
            **info,
            "episode_reward": np.array([self._return], dtype=np.float32),
            "step_count": np.array([self._steps], dtype=np.int64),
            GAME_OVER: np.array([self._game_over]),
        }
