"""The behaviour parameters: the weights each policy version was sent with, for the delayed
gradient (HTS-RL's gradient at the parameters that collected the batch)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

__all__ = ["BehaviourParameters"]


class BehaviourParameters:
    """Snapshots of ``module``'s parameters by policy version: the current one and the one
    before (the collector is never more than one version behind).

    Not an ``nn.Module`` on purpose: the snapshots are not trained, not seen by DDP, and travel
    in checkpoints through :meth:`state_dict` (keyed by ``module``'s parameter names).

    Example:
        >>> net = torch.nn.Linear(1, 1, bias=False)
        >>> behaviour = BehaviourParameters(net)
        >>> behaviour.remember(0)
        >>> with torch.no_grad():
        ...     _ = net.weight.fill_(2.0)
        >>> behaviour.remember(1)
        >>> with behaviour.at(0, current=1):
        ...     before = net.weight.item()
        >>> before == behaviour.state_dict()[0]["weight"].item(), net.weight.item()
        (True, 2.0)
    """

    def __init__(self, module: nn.Module):
        self.module = module
        self.snapshots: dict[int, dict[str, torch.Tensor]] = {}

    def remember(self, version: int) -> None:
        """Keep the current parameters as those of ``version``; forget versions older than
        the one before it."""
        self.snapshots[version] = {n: p.detach().clone() for n, p in self.module.named_parameters()}
        for old in [v for v in self.snapshots if v < version - 1]:
            del self.snapshots[old]

    @contextmanager
    def at(self, version: int, *, current: int) -> Iterator[None]:
        """Run the block with the parameters of ``version`` in place of those of ``current``.

        The current values come back on exit, so gradients computed inside are gradients at
        ``version``'s parameters, stored on the current parameters' ``.grad``.
        """
        if version == current:
            yield
            return
        if version not in self.snapshots:
            raise RuntimeError(
                f"No snapshot of policy version {version} (current {current}): the "
                "collector ran more than one update behind."
            )
        parameters = dict(self.module.named_parameters())
        saved = {name: p.detach().clone() for name, p in parameters.items()}
        _copy_into(parameters, self.snapshots[version])
        try:
            yield
        finally:
            _copy_into(parameters, saved)

    def state_dict(self) -> dict[int, dict[str, torch.Tensor]]:
        return dict(self.snapshots)

    def load_state_dict(self, state_dict: dict[int, dict[str, torch.Tensor]]) -> None:
        self.snapshots = dict(state_dict)


@torch.no_grad()
def _copy_into(parameters: dict[str, nn.Parameter], values: dict[str, torch.Tensor]) -> None:
    for name, parameter in parameters.items():
        parameter.copy_(values[name])
