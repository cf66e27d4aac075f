"""Every Python example of the docs' guides runs when saved to a file and run, and prints what
the page says it prints."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT, run_script

PAGES = sorted((ROOT / "docs").rglob("*.md"))
EXAMPLES = [
    (page, code)
    for page in PAGES
    for code in re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
]


def test_the_guides_have_examples():
    assert any(page.name == "own-env-and-network.md" for page, _ in EXAMPLES)


@pytest.mark.parametrize(
    ("page", "code"), EXAMPLES, ids=[f"{p.stem}-{i}" for i, (p, _) in enumerate(EXAMPLES)]
)
def test_a_guide_example_runs_as_a_file_and_prints_what_the_page_says(page, code, tmp_path):
    result = run_script(code, tmp_path / "example.py", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    stated = re.search(rf"{re.escape(code)}```\s*\n\nIt prints `([^`]*)`", page.read_text())
    assert stated, f"{page.name}: say what the example prints"
    assert result.stdout.strip().splitlines()[-1] == stated.group(1)
