"""``python -m benchmarks``: list the benchmarks, or run one with its own options.

python -m benchmarks --list
python -m benchmarks <name> [options]
"""

from __future__ import annotations

import importlib
import sys

from benchmarks import KINDS, find, module_name, summary
from benchmarks.common.records import ENTRY

USAGE = (
    "usage: python -m benchmarks --list | <name> [options]  "
    "(python -m benchmarks <name> --help: its options)"
)


def listing() -> str:
    """The benchmarks by kind, each with the first paragraph of its docstring."""
    found = find()
    lines = [USAGE]
    for kind, what in KINDS.items():
        lines += ["", f"{kind}/: {what}"]
        lines += [
            f"  {name:26s} {summary(path)}"
            for name, path in found.items()
            if path.parent.name == kind
        ]
    page = [name for name, path in found.items() if path.parent.name not in KINDS]
    lines += ["", "the Benchmarks page:"]
    lines += [f"  {name:26s} {summary(found[name])}" for name in page]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("--list", "-h", "--help"):
        print(listing())
        return
    name, *options = argv
    found = find()
    if name not in found:
        raise SystemExit(f"no benchmark {name!r}; `python -m benchmarks --list` lists them")
    # The benchmark reads its options from sys.argv; sys.argv[0] names it in its --help
    # ("usage: python -m benchmarks <name> ...") and in its records' command.
    sys.argv = [f"{ENTRY} {name}", *options]
    raise SystemExit(importlib.import_module(module_name(found[name])).main())


if __name__ == "__main__":
    main()
