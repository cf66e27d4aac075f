"""Every Python example of the README runs when saved to a file and run, as a new user would."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_script

README = (ROOT / "README.md").read_text()
EXAMPLES = re.findall(r"```python\n(.*?)```", README, re.S)
# The README's sizes, and the tiny ones run here (2 cores, shared): the same code otherwise.
TINY = {"num_envs=16": "num_envs=4", "16 * 128": "4 * 16", "[16, 128]": "[4, 16]"}


def _tiny(text: str) -> str:
    for readme_size, tiny_size in TINY.items():
        text = text.replace(readme_size, tiny_size)
    return text


def _run(code: str, folder: Path) -> subprocess.CompletedProcess:
    return run_script(code, folder / "example.py", timeout=240)


def test_the_readme_has_the_collector_example():
    assert any("HTSCollector(" in example for example in EXAMPLES)


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_a_readme_example_runs_as_a_file(index, tmp_path):
    code = EXAMPLES[index]
    result = _run(_tiny(code), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    # An example whose output the README states prints exactly that.
    stated = re.search(rf"{re.escape(code)}```\s*\n\nIt prints `([^`]*)`", README)
    if stated:
        assert result.stdout.strip().splitlines()[-1] == _tiny(stated.group(1))
    if "HTSCollector(" in code:
        assert stated, "the collector example says what it prints"
