"""Stacked, channel-first frames for envpool envs that return single channel-last frames."""

from __future__ import annotations

import numpy as np

__all__ = ["FrameStack"]


class FrameStack:
    """Per env, the last ``depth`` frames side by side along the channels, channels first.

    What gfootball's ``stacked`` observation and ``channels_first`` layout give, for envpool's
    football port, which returns one ``[H, W, C]`` frame a step: an episode's first frame
    fills every place (gfootball's ``FrameStack`` wrapper does the same), each step pushes
    the oldest out. The result is ``[depth * C, H, W]``, oldest frame first.

    Example:
        >>> stack = FrameStack(num_envs=2, frame_shape=(1, 2, 3), depth=2)
        >>> first = stack.reset(np.array([0, 1]), np.zeros((2, 1, 2, 3), np.uint8))
        >>> stack.step(np.array([1]), np.ones((1, 1, 2, 3), np.uint8))[0, :, 0, 0]
        array([0, 0, 0, 1, 1, 1], dtype=uint8)
    """

    def __init__(
        self, *, num_envs: int, frame_shape: tuple[int, int, int], depth: int, dtype=np.uint8
    ):
        height, width, channels = frame_shape
        self.channels, self.depth = channels, depth
        self._frames = np.zeros((num_envs, depth * channels, height, width), dtype=dtype)

    @staticmethod
    def shape(frame_shape: tuple[int, int, int], depth: int) -> tuple[int, int, int]:
        """The stacked observation's shape for frames of ``frame_shape`` (``[H, W, C]``)."""
        height, width, channels = frame_shape
        return depth * channels, height, width

    def reset(self, env: np.ndarray, frames: np.ndarray) -> np.ndarray:
        """The first observations of the episodes of ``env`` (``frames``: ``[n, H, W, C]``)."""
        self._frames[env] = np.tile(np.moveaxis(frames, -1, 1), (1, self.depth, 1, 1))
        return self._frames[env]

    def step(self, env: np.ndarray, frames: np.ndarray) -> np.ndarray:
        """The observations of ``env`` after their step's ``frames`` (``[n, H, W, C]``)."""
        stacked = self._frames[env]
        stacked[:, : -self.channels] = stacked[:, self.channels :]
        stacked[:, -self.channels :] = np.moveaxis(frames, -1, 1)
        self._frames[env] = stacked
        return stacked
