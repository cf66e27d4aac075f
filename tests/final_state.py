"""A callback for `hts-rl fit` runs in tests: the module's state when the run ends."""

from __future__ import annotations

import os

import torch
from lightning import Callback


class RecordFinalState(Callback):
    """Keeps the module's updates, frames, parameters and optimizer state when the run ends,
    normally or by an exception (a stop signal's included), in ``RecordFinalState.final``;
    also saved to the file ``$HTS_TEST_FINAL_STATE`` when that is set (a run in a
    subprocess)."""

    final: dict | None = None

    def _record(self, module) -> None:
        final = {
            "updates": module.updates,
            "frames": module.frames,
            "state_dict": {k: v.detach().clone() for k, v in module.state_dict().items()},
            "optimizer": module.optimizers().optimizer.state_dict(),
        }
        type(self).final = final
        if os.environ.get("HTS_TEST_FINAL_STATE"):
            torch.save(final, os.environ["HTS_TEST_FINAL_STATE"])

    def on_train_end(self, trainer, module) -> None:
        self._record(module)

    def on_exception(self, trainer, module, exception) -> None:
        self._record(module)


def assert_checkpoint_is(checkpoint: dict, final: dict) -> None:
    """``checkpoint`` (as loaded) holds ``final``'s progress, parameters and optimizer state."""
    assert checkpoint["hts_progress"]["updates"] == final["updates"]
    assert checkpoint["hts_progress"]["frames"] == final["frames"]
    assert checkpoint["state_dict"].keys() == final["state_dict"].keys()
    for name, value in checkpoint["state_dict"].items():
        assert torch.equal(value, final["state_dict"][name]), name
    (optimizer,) = checkpoint["optimizer_states"]
    expected = final["optimizer"]["state"]
    assert optimizer["state"].keys() == expected.keys()
    for index, state in optimizer["state"].items():
        for key, value in state.items():
            assert torch.equal(value, expected[index][key]), (index, key)
