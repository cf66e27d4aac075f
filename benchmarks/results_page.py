"""Builds the documentation's Benchmarks page (``docs/benchmarks.md``) from the records: the
latest record of each benchmark (``benchmarks/results/*.json``, written by the benchmarks
themselves) and every learning study (``benchmarks/results/learning/``), one section per
claim. Nothing on the page is written by hand; the tests check that it is up to date.

    python benchmarks/results_page.py          # write docs/benchmarks.md
    python benchmarks/results_page.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _records as records

PAGE = records.ROOT / "docs" / "benchmarks.md"
#: The page's links are relative to docs/.
TO_ROOT = "../"

INTRO = """# Benchmarks

What the library does on the 2-core CPU machine it is developed on, beside what it is compared
with: each table comes from one run that measured its contenders side by side, with the
command that reproduces it, the machine and the date. Compare ratios within a table, not
absolute numbers across tables. This page is generated from the records in
`benchmarks/results/` (`python benchmarks/results_page.py`); earlier runs are in git's
history."""


def _cell(value) -> str:
    return str(value).replace("|", "\\|")


def _table(table: dict) -> list[str]:
    columns = table["columns"]
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |",
             "|" + " --- |" * len(columns)]  # fmt: skip
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table["rows"]]
    return lines


def _record(record: dict) -> list[str]:
    lines = [f"### {record['title']}", ""]
    lines += [f"{record['utc']} UTC; {record['machine']}; load after "
              f"{'/'.join(str(x) for x in record['load_after'])}.", ""]  # fmt: skip
    for table in record["tables"]:
        lines += [*_table(table), ""]
    for paragraph in record["text"]:
        lines += [paragraph, ""]
    lines += [f"![{Path(p).stem}]({TO_ROOT}{p})" for p in record["plots"]]
    lines += ["", "```bash", record["command"], "```", ""]
    return lines


def build() -> str:
    sys.path.insert(0, str(records.ROOT / "benchmarks"))
    import learning_study

    found = records.load_all()
    lines = [INTRO, ""]
    for claim, heading in records.CLAIMS.items():
        mine = [r for r in found if r["claim"] == claim]
        studies = [
            name for name in learning_study.STUDIES
            if claim == "learning" and any((learning_study.RESULTS / name).glob("*.json"))
        ]  # fmt: skip
        if not mine and not studies:
            continue
        lines += [f"## {heading}", ""]
        for name in studies:
            text = learning_study.report(name, images=f"{TO_ROOT}benchmarks/plots/")
            lines += [text, "", "```bash", f"python benchmarks/learning_study.py run {name}",
                      "```", ""]  # fmt: skip
        for record in mine:
            lines += _record(record)
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args()
    text = build()
    if args.check:
        if PAGE.read_text() != text:
            raise SystemExit(f"{PAGE} is out of date: run python benchmarks/results_page.py")
        return
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(records.ROOT)}")


if __name__ == "__main__":
    main()
