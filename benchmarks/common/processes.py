"""The processes the benchmarks start: ``hts-rl fit`` as a user runs it, a benchmark of this
package as a child process, a run bounded in time in its own process group, and the machine's
shared CPU lock that keeps measured runs apart."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from benchmarks.common import ROOT

__all__ = ["LOCK", "ROOT", "benchmark", "cpu_lock", "hts_fit", "log_tail", "run_bounded"]

#: The lock every measured run holds, so that two never share the machine's cores.
LOCK = Path("/tmp/hts-cpu.lock")
#: Lines of a failed run's log kept by :func:`log_tail`.
LOG_TAIL_LINES = 40


def hts_fit(recipe: str | Path, *options: str, seed: int | None = None) -> list[str]:
    """``hts-rl fit --config recipe`` (relative to the repository root, or absolute), seeded
    by ``seed`` as the recipes' measured runs are (``seed_everything`` and the module's seed),
    then ``options``."""
    seeds = [] if seed is None else [f"--seed_everything={seed}", f"--model.init_args.seed={seed}"]
    executable = Path(sys.executable).with_name("hts-rl")
    return [str(executable), "fit", "--config", str(ROOT / recipe), *seeds, *options]


def benchmark(name: str, *options: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of ``python -m benchmarks <name> options`` as a child
    process, which finds this package from any working folder."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return [sys.executable, "-m", "benchmarks", name, *options], env


@contextlib.contextmanager
def cpu_lock() -> Iterator[None]:
    """Hold :data:`LOCK` (waiting for it): one measured run at a time on this machine, across
    benchmarks."""
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run_bounded(
    argv: list[str], *, cwd: Path, env: dict, log: Path, timeout_s: float, grace_s: float
) -> tuple[int | None, str | None]:
    """Run ``argv`` in its own process group (its workers included), output to ``log``.

    Returns ``(returncode, None)`` when it ends within ``timeout_s``, else SIGTERMs the group,
    SIGKILLs it after ``grace_s`` more and returns ``(returncode, reason)``. Whatever of the
    group is left once the leader has exited (a stuck worker) is SIGKILLed too. Interrupted
    itself (Ctrl-C, or a SIGTERM turned into ``SystemExit``), it stops the group the same way
    before it re-raises: the run saves its checkpoint instead of running on unwatched.
    """
    with log.open("w") as out:
        process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=out, stderr=out, start_new_session=True
        )
        reason = None
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            reason = f"no exit within --cell-timeout {timeout_s:g} s: SIGTERM"
            reason += _stop_group(process, grace_s)
        except BaseException:
            _stop_group(process, grace_s)
            raise
        finally:
            _signal_group(process.pid, signal.SIGKILL)  # leftovers of the group, if any
    return process.returncode, reason


def _stop_group(process: subprocess.Popen, grace_s: float) -> str:
    """SIGTERM the process group, SIGKILL it ``grace_s`` later; what was done beyond SIGTERM."""
    _signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()
        return f", still running {grace_s:g} s later: SIGKILL"
    return ""


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone
        os.killpg(pgid, sig)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
