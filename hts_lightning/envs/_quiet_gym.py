"""Import the old ``gym`` without its banner, where it is installed.

TorchRL's ``GymEnv`` imports ``gym`` whenever it is installed (the football extra needs gym
0.25) to choose its version-specific code, and gym prints an "unmaintained" banner when
imported: once per process, each worker's included. Nothing of gym is used outside
football's envs; importing it here first, with the banner swallowed, keeps the console ours.
gym's logger also sets a process-wide "once" filter for DeprecationWarning, which would show
every other library's deprecation notes (TorchRL's, imported next); the import keeps the
process's filters as they were.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import warnings

if importlib.util.find_spec("gym") is not None:
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        import gym  # noqa: F401
