"""Transforms of our own, where TorchRL's do not serve."""

from __future__ import annotations

import torch
from torchrl.envs import Transform

__all__ = ["ClipActions"]


class ClipActions(Transform):
    """Clips the action the env is stepped with to ``[low, high]`` (tensors, per dimension;
    TorchRL's ``ClipTransform`` takes scalar bounds only). The caller's TensorDict keeps the
    action as it was.

    Example:
        >>> from tensordict import TensorDict
        >>> clip = ClipActions(low=torch.tensor([-1.0, 0.0]), high=torch.tensor([1.0, 2.0]))
        >>> clip.inv(TensorDict(action=torch.tensor([3.0, -1.0])))["action"]
        tensor([1., 0.])
    """

    def __init__(self, *, low: torch.Tensor, high: torch.Tensor):
        super().__init__(in_keys_inv=["action"], out_keys_inv=["action"])
        self.register_buffer("low", torch.as_tensor(low))
        self.register_buffer("high", torch.as_tensor(high))

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        return torch.clamp(action, self.low, self.high)
