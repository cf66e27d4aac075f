"""Builds the documentation's Benchmarks page (``docs/benchmarks.md``) from the records: the
latest record of each benchmark (``benchmarks/results/*.json``, written by the benchmarks
themselves) and every learning study (``benchmarks/results/learning/``), one section per
claim. Nothing on the page is written by hand; the tests check that it is up to date.

    python -m benchmarks results_page          # write docs/benchmarks.md
    python -m benchmarks results_page --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from benchmarks.common import records
from benchmarks.learning import learning_study

PAGE = records.ROOT / "docs" / "benchmarks.md"
#: The page's links are relative to docs/.
TO_ROOT = "../"

INTRO = """# Benchmarks

What the library does on the 2-core CPU machine it is developed on, beside what it is compared
with: each table comes from one run that measured its contenders side by side, with the
command that reproduces it, the machine and the date. Compare ratios within a table, not
absolute numbers across tables. This page is generated from the records in
`benchmarks/results/` (`python -m benchmarks results_page`); earlier runs are in git's
history."""


def _cell(value) -> str:
    return str(value).replace("|", "\\|")


def _table(table: dict) -> list[str]:
    columns = table["columns"]
    lines = [table["caption"], ""] if table.get("caption") else []
    lines += ["| " + " | ".join(_cell(c) for c in columns) + " |",
              "|" + " --- |" * len(columns)]  # fmt: skip
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table["rows"]]
    return lines


#: Columns a record's plot draws, by preference: the first one a table has.
PLOTTED = ("frames/s", "frames/s per run", "median frames", "steps/s")
PLOTS = records.ROOT / "benchmarks" / "plots"


def _number(cell) -> float | None:
    """The mean of the numbers in a cell ("1711, 1756" -> 1733.5), None if it has none."""
    found = [float(x.replace(",", "")) for x in re.findall(r"-?\d[\d,]*\.?\d*", str(cell))]
    found = [x for x in found if x == x]  # no NaN
    return sum(found) / len(found) if found else None


def _plotted(record: dict) -> tuple[list[str], list[float], str] | None:
    """(labels, values, column) of the record's plot, or None when no table has a column of
    PLOTTED (equality tables, probes)."""
    for table in record["tables"]:
        columns = table["columns"]
        column = next((c for c in PLOTTED if c in columns), None)
        if column is None:
            continue
        at = columns.index(column)
        labels, values = [], []
        for row in table["rows"]:
            value = _number(row[at])
            if value is not None:
                labels.append(" / ".join(str(c) for c in row[: min(at, 2)]))
                values.append(value)
        return (labels, values, column) if values else None
    return None


def _plot_path(record: dict) -> Path:
    return PLOTS / f"record_{record['name']}.png"


def draw(record: dict) -> None:
    """The record's bar chart, beside its tables on the page."""
    labels, values, column = _plotted(record)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(8, 0.35 * len(values) + 1.2))
    axis.barh(range(len(values)), values, color="tab:blue")
    axis.set_yticks(range(len(values)), labels, fontsize=8)
    axis.invert_yaxis()
    positive = [v for v in values if v > 0]
    if positive and max(positive) > 20 * min(positive):  # several envs' scales: log
        axis.set_xscale("log")
        column += " (log scale)"
    axis.set_xlabel(column)
    for y, value in enumerate(values):
        axis.annotate(f"{value:,.0f}", (value, y), xytext=(3, 0), textcoords="offset points",
                      va="center", fontsize=7)  # fmt: skip
    axis.set_title(record["title"][:90], fontsize=9)
    fig.tight_layout()
    PLOTS.mkdir(exist_ok=True)
    fig.savefig(_plot_path(record), dpi=90)
    plt.close(fig)


def _record(record: dict) -> list[str]:
    lines = [f"### {record['title']}", ""]
    # a report of earlier runs (the lag study's cells) shows their highest load, not its own
    load = "load after"
    if "runs" in record:
        load = f"highest load after any of its {record['runs']} runs"
    lines += [f"{record['utc']} UTC; {record['machine']}; {load} "
              f"{'/'.join(str(x) for x in record['load_after'])}.", ""]  # fmt: skip
    for table in record["tables"]:
        lines += [*_table(table), ""]
    for paragraph in record["text"]:
        lines += [paragraph, ""]
    lines += [f"![{Path(p).stem}]({TO_ROOT}{p})" for p in record["plots"]]
    if not record["plots"] and _plotted(record):
        plot = _plot_path(record).relative_to(records.ROOT)
        lines += [f"![{record['name']}]({TO_ROOT}{plot})"]
    lines += ["", "```bash", *rerun(record["command"]), "```", ""]
    return lines


#: scripts renamed when ``benchmarks/`` became a package (older records keep their command)
_RENAMED = {"latency_targets": "heavy_tail_latency"}
_SCRIPT = re.compile(r"^python benchmarks/(\w+)\.py")


def rerun(command: str) -> list[str]:
    """The record's command; for a record made when the benchmarks were scripts, the
    command as recorded (a comment) and the same run through today's entry point."""
    script = _SCRIPT.match(command)
    if script is None:
        return [command]
    name = _RENAMED.get(script[1], script[1])
    return [f"# recorded as: {command}", f"{records.ENTRY} {name}{command[script.end() :]}"]


def build() -> str:
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
            lines += [text, "", "```bash", f"python -m benchmarks learning_study run {name}",
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
            raise SystemExit(f"{PAGE} is out of date: run python -m benchmarks results_page")
        return
    for record in records.load_all():
        if not record["plots"] and _plotted(record):
            draw(record)
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(records.ROOT)}")


if __name__ == "__main__":
    main()
