"""The repository is ruff-clean: ``ruff check`` and ``ruff format --check`` pass (so the README's
test command checks lint and format too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The venv's own ruff (a dev dependency), not whichever one is on PATH.
RUFF = Path(sys.executable).parent / "ruff"


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff(command):
    assert RUFF.is_file(), f"{RUFF} is missing: install the dev extra (pip install -e '.[dev]')"
    result = subprocess.run(
        [str(RUFF), *command, str(ROOT)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"ruff {' '.join(command)}:\n{result.stdout}{result.stderr}"
