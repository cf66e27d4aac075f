"""Atari environments with the standard preprocessing, seeded per replica."""

from __future__ import annotations

import gymnasium as gym
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
from torchrl.envs import GymWrapper, TransformedEnv

from hts_lightning.envs._shared import check_env_id, with_episode_stats

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
        episodic_life: end the episode on a life loss (gymnasium's ``terminal_on_life_loss``:
            the next reset is a full reset, so returns are then per life; on envpool the game
            goes on and the returns are the game's, see docs/guides/envpool.md).
        fire_reset: press FIRE once after each reset's no-ops, in games whose action 1 is
            FIRE (Breakout waits for it to serve), as OpenAI baselines' and CleanRL's Atari
            settings do.
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
        terminal_on_life_loss=episodic_life,
        grayscale_obs=True,
        scale_obs=False,
    )
    if fire_reset and base.unwrapped.get_action_meanings()[1:2] == ["FIRE"]:
        base = FireReset(base)
    base = FrameStackObservation(base, stack_size=frame_stack)
    return with_episode_stats(GymWrapper(base), seed=seed, clip_rewards=clip_rewards)


class FireReset(gym.Wrapper):
    """One FIRE step after each reset: games such as Breakout wait for it to serve."""

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        observation, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:  # the FIRE ended it (never seen): start again
            return self.env.reset(**kwargs)
        return observation, info
