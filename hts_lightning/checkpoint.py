"""Reading an ``hts-rl fit`` checkpoint without running anything in it, with one-line errors.

Our checkpoints hold only tensors and plain data (numbers, strings, lists, dicts, numpy arrays
of the env snapshots), so ``torch.load(..., weights_only=True)`` reads all of them: a file
that needs more (a pickled object whose ``__reduce__`` would run code) was not written by
``hts-rl fit`` and is refused before any of it runs.

Checkpoints written before 2026-12-01 (hts-lightning 0.1.0 before commit f2a02a0) hold the
loss's parameters under TorchRL's functional names (``loss_module.actor_network_params.*``,
and the whole critic under ``loss_module.critic_network_params.*``); the loss now runs the
actor's own modules and only the critic's value head. :func:`migrate_checkpoint` renames
them (the values are the same tensors as the ``model.*`` ones); :func:`read_checkpoint`
applies it, and ``python -m hts_lightning.checkpoint OLD NEW`` writes a migrated copy that
``hts-rl fit --ckpt_path NEW`` resumes from.
"""

from __future__ import annotations

import pickle
import sys
import zipfile
from pathlib import Path
from typing import Any

import torch

__all__ = ["MODULE_CLASS_KEY", "migrate_checkpoint", "needs_migration", "read_checkpoint"]

#: The key every hts-lightning checkpoint has (``OnPolicyModule.on_save_checkpoint``).
MODULE_CLASS_KEY = "hts_module_class"


_OLD_ACTOR = "actor_network_params."
_OLD_CRITIC_HEAD = "critic_network_params.module.1.module."
_OLD_CRITIC = "critic_network_params."


def needs_migration(checkpoint: dict[str, Any]) -> bool:
    """Whether ``checkpoint`` has the loss parameter names of before 2026-12-01."""
    return any(k.startswith("loss_module." + _OLD_ACTOR) for k in checkpoint.get("state_dict", {}))


def _renamed(name: str) -> list[str]:
    """New names of an old loss parameter name (relative to the loss), none to drop it."""
    if name.startswith(_OLD_ACTOR):
        return ["actor_network." + name[len(_OLD_ACTOR) :]]
    if name.startswith(_OLD_CRITIC_HEAD):
        return ["critic_network.module." + name[len(_OLD_CRITIC_HEAD) :]]
    if name.startswith(_OLD_CRITIC):
        return []  # the critic's trunk: the actor's trunk, or an Identity without parameters
    return [name]


def migrate_checkpoint(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """``checkpoint`` with the loss parameter names of today (a no-op on a current one): in the
    module's state dict, and in the behaviour-parameter snapshots resume uses.

    Example:
        >>> old = {"state_dict": {"loss_module.actor_network_params.module.1.weight": 1,
        ...                       "loss_module.critic_network_params.module.0.module.weight": 2,
        ...                       "loss_module.critic_network_params.module.1.module.bias": 3}}
        >>> for key in sorted(migrate_checkpoint(old)["state_dict"]):
        ...     print(key)
        critic_head.module.bias
        loss_module.actor_network.module.1.weight
        loss_module.critic_network.module.bias
    """
    if not needs_migration(checkpoint):
        return checkpoint
    state = {}
    for key, value in checkpoint["state_dict"].items():
        if not key.startswith("loss_module."):
            state[key] = value
            continue
        for name in _renamed(key[len("loss_module.") :]):
            state["loss_module." + name] = value
            if name.startswith("critic_network."):
                state["critic_head." + name[len("critic_network.") :]] = value
    progress = dict(checkpoint.get("hts_progress") or {})
    if "behaviour_parameters" in progress:
        progress["behaviour_parameters"] = {
            version: {new: v for old, v in snapshot.items() for new in _renamed(old)}
            for version, snapshot in progress["behaviour_parameters"].items()
        }
    migrated = dict(checkpoint, state_dict=state)
    if progress:
        migrated["hts_progress"] = progress
    return migrated


def read_checkpoint(path: str | Path, *, migrate: bool = True) -> dict[str, Any]:
    """The checkpoint at ``path``, read with ``weights_only=True`` (and, with ``migrate``,
    given today's parameter names: :func:`migrate_checkpoint`); a ``ValueError`` of one
    line naming the file and what is wrong when it is missing, truncated, not a torch
    checkpoint, holds objects that loading would execute, or is not an hts-lightning one.

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
    return migrate_checkpoint(checkpoint) if migrate else checkpoint


def main(argv: list[str] | None = None) -> int:
    """``python -m hts_lightning.checkpoint OLD NEW``: write ``OLD`` migrated to ``NEW``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m hts_lightning.checkpoint OLD.ckpt NEW.ckpt", file=sys.stderr)
        return 2
    try:
        checkpoint = read_checkpoint(args[0])
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    torch.save(checkpoint, args[1])
    print(f"wrote {args[1]}: {args[0]} with today's parameter names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
