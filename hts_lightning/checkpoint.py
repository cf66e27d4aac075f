"""Reading an ``hts-rl fit`` checkpoint without running anything in it, with one-line errors.

Our checkpoints hold only tensors and plain data (numbers, strings, lists, dicts, numpy arrays
of the env snapshots), so ``torch.load(..., weights_only=True)`` reads all of them: a file
that needs more (a pickled object whose ``__reduce__`` would run code) was not written by
``hts-rl fit`` and is refused before any of it runs.

Checkpoints written before 2026-12-01 (hts-lightning 0.1.0 before commit f2a02a0, never
released) name the loss's parameters as TorchRL's functional loss did; they are refused with
one line that says so and how to convert one with an earlier checkout.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

__all__ = ["MODULE_CLASS_KEY", "read_checkpoint"]

#: The key every hts-lightning checkpoint has (``OnPolicyModule.on_save_checkpoint``).
MODULE_CLASS_KEY = "hts_module_class"


# The loss parameter names of the format before 2026-12-01.
_OLD_LOSS_PARAMETERS = "loss_module.actor_network_params."


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint at ``path``, read with ``weights_only=True``; a ``ValueError`` of one
    line naming the file and what is wrong when it is missing, truncated, not a torch
    checkpoint, holds objects that loading would execute, is not an hts-lightning one, or
    predates the current format.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "model.ckpt"
        >>> torch.save({"state_dict": {}}, path)
        >>> read_checkpoint(path)
        Traceback (most recent call last):
        ...
        ValueError: ...model.ckpt is not an hts-lightning checkpoint (no 'hts_module_class'; ...
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(
            f"no checkpoint file at {path}: pass a checkpoint written by hts-rl fit "
            "(runs/<experiment id>/<run id>/checkpoints/last.ckpt)."
        )
    if not zipfile.is_zipfile(path):
        raise ValueError(
            f"{path} is not a readable checkpoint ({path.stat().st_size} bytes, not a torch "
            "zip archive: truncated, or another kind of file); use a complete copy of the "
            "checkpoint."
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        raise ValueError(
            f"{path} holds Python objects that loading would execute ({', '.join(names)}); "
            "checkpoints of hts-rl fit hold only weights and plain data, so it was not written "
            "by hts-rl fit, was altered, or holds the state of an env whose snapshot() is not "
            "plain data. Nothing in it was run."
        ) from None
    except (RuntimeError, EOFError, OSError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(
            f"{path} is not a readable checkpoint ({reason}): truncated or damaged; use a "
            "complete copy of the checkpoint."
        ) from None
    if not isinstance(checkpoint, dict) or MODULE_CLASS_KEY not in checkpoint:
        keys = sorted(checkpoint)[:6] if isinstance(checkpoint, dict) else type(checkpoint)
        raise ValueError(
            f"{path} is not an hts-lightning checkpoint (no {MODULE_CLASS_KEY!r}; it holds "
            f"{keys}): pass a checkpoint written by hts-rl fit."
        )
    if any(key.startswith(_OLD_LOSS_PARAMETERS) for key in checkpoint.get("state_dict", {})):
        raise ValueError(
            f"{path} predates the current checkpoint format (written before 2026-12-01, with "
            "the loss's old parameter names), which this version does not read: train anew, or "
            "convert it with hts-lightning at commit c03881b (python -m hts_lightning.checkpoint "
            "OLD.ckpt NEW.ckpt)."
        )
    return checkpoint
