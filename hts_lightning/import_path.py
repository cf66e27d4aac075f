"""Objects a user names by import path, ``"package.module:attribute"``, so that worker
processes (and recipes) can name them too: their own envs and networks."""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any

__all__ = ["import_object", "is_import_path"]

# "package.module:attribute": a gymnasium id with a module ("module:Env-v0") has a dash.
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def is_import_path(name: str) -> bool:
    """Whether ``name`` is an import path ``"package.module:attribute"`` (not an env id).

    Example:
        >>> is_import_path("my_envs.grid:make_env"), is_import_path("CartPole-v1")
        (True, False)
    """
    return bool(_IMPORT_PATH.match(name))


def import_object(path: str, *, what: str) -> Any:
    """The object at ``"package.module:attribute"`` (attributes may be dotted), or a
    ``ValueError`` naming what could not be imported and how to fix it. ``what`` names the
    object in the message (``"env factory"``)."""
    module_name, _, attribute = path.partition(":")
    if module_name == "__main__":
        raise ValueError(
            f"The {what} {path!r} is defined in the script being run: worker processes "
            "cannot import it from there. Move it into a module of its own (next to the "
            "script is enough) and name that module."
        )
    # As `python -m` and most app servers do: modules beside the user are found too (the
    # hts-rl script's own folder, not the working one, heads sys.path). Workers started
    # later inherit the path.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        value = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"The {what} {path!r}: module {module_name!r} cannot be imported ({error}). Run "
            "from the folder that holds it, or install its package, or add its folder to "
            "PYTHONPATH."
        ) from None
    for name in attribute.split("."):
        if not hasattr(value, name):
            raise ValueError(f"The {what} {path!r}: {value.__name__!r} has no {name!r}.")
        value = getattr(value, name)
    if not callable(value):
        raise ValueError(f"The {what} {path!r} is a {type(value).__name__}, not a callable.")
    return value
