"""The Nature DQN convolutional trunk (Mnih et al., 2015) for stacked 84x84 Atari frames."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["NatureCNN"]


class NatureCNN(nn.Module):
    """Three convolutions and a 512-unit layer; uint8 frames are scaled to [0, 1] inside.

    ``image_size`` is the side of square frames or ``(height, width)``; any leading dims of
    the input (batch, players) are kept.

    Example:
        >>> trunk = NatureCNN(in_channels=4)
        >>> trunk(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape
        torch.Size([2, 512])
    """

    def __init__(
        self,
        *,
        in_channels: int = 4,
        features: int = 512,
        image_size: int | tuple[int, int] = 84,
    ):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(in_channels, 32, kernel_size=8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        height, width = (image_size, image_size) if isinstance(image_size, int) else image_size
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, in_channels, height, width)).shape[-1]
        self.head = nn.Sequential(nn.Linear(flat, features), nn.ReLU())
        self.out_features = features

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        batch = frames.shape[:-3]
        # Channels-last: oneDNN's CPU convolutions then skip their layout reorders; forward and
        # backward of a 512-frame minibatch took ~0.6-0.7x the CPU time (benchmarks/RESULTS.md).
        # By permutation, since `contiguous(memory_format=...)` fails under vmap (TorchRL's GAE).
        x = frames.reshape(-1, *frames.shape[-3:]).permute(0, 2, 3, 1).contiguous()
        x = x.permute(0, 3, 1, 2)
        return self.head(self.convs(x.float() / 255.0)).reshape(*batch, -1)
