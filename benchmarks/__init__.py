"""The benchmarks of hts_lightning, run from the repository's root through one entry point
(``benchmarks/__main__.py``); not part of the installed package.

    python -m benchmarks --list                 # every benchmark and what it measures
    python -m benchmarks <name> [options]       # run one; <name> --help lists its options

A benchmark is a module with a ``main()`` in one of the folders of :data:`KINDS`, named by its
file; ``common/`` holds what they share. Their records go to ``results/``, from which
``python -m benchmarks results_page`` builds the documentation's Benchmarks page.
"""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["KINDS", "find", "module_name", "summary"]

_HERE = Path(__file__).resolve().parent

#: The benchmarks' folders, by kind, and what each holds.
KINDS = {
    "suites": "throughput and end-to-end comparisons against baselines",
    "learning": "learning studies: curves against published anchors, seeds, policy lag",
    "figures": "the HTS-RL paper's figures on this machine",
    "probes": "one-off probes: where the time and the bits go",
}
#: Not a benchmark, run the same way: builds docs/benchmarks.md from the records.
PAGE = _HERE / "results_page.py"


def find() -> dict[str, Path]:
    """Every benchmark's name and file, by kind then name; the page builder last."""
    found: dict[str, Path] = {}
    for kind in KINDS:
        for path in sorted((_HERE / kind).glob("[!_]*.py")):
            if path.stem in found:
                raise RuntimeError(f"two benchmarks named {path.stem}: {found[path.stem]}, {path}")
            found[path.stem] = path
    found[PAGE.stem] = PAGE
    return found


def module_name(path: Path) -> str:
    """The import name of the benchmark in ``path``: ``benchmarks.<kind>.<name>``."""
    return ".".join(path.relative_to(_HERE.parent).with_suffix("").parts)


def summary(path: Path) -> str:
    """The first paragraph of the module's docstring on one line, read without importing it."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split()).replace("``", "`")
