"""The Benchmarks page is generated from the records, and the records say what a reader needs:
claim, command, machine, date and numbers."""

from __future__ import annotations

import importlib
import json

import pytest

import benchmarks
from tests.conftest import ROOT

BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def page_builder():
    from benchmarks import results_page

    return results_page


def test_the_page_is_the_records_rendered(page_builder):
    assert (ROOT / "docs" / "benchmarks.md").read_text() == page_builder.build(), (
        "docs/benchmarks.md is out of date: run python -m benchmarks results_page"
    )


def test_every_record_names_its_claim_command_machine_date_and_numbers(page_builder):
    records = page_builder.records
    paths = sorted((BENCHMARKS / "results").glob("*.json"))
    assert paths, "no benchmark records"
    for path in paths:
        record = json.loads(path.read_text())
        assert record["name"] == path.stem
        assert record["claim"] in records.CLAIMS, path.name
        for key in ("title", "command", "machine", "utc"):
            assert record[key], f"{path.name}: {key}"
        assert record["tables"] and all(t["rows"] for t in record["tables"]), path.name
        for table in record["tables"]:
            assert all(len(row) == len(table["columns"]) for row in table["rows"]), path.name
        for plot in record["plots"]:
            assert (ROOT / plot).is_file(), plot


def test_a_markdown_section_becomes_a_record_of_tables_and_text(page_builder, tmp_path):
    records = page_builder.records
    section = "\n".join([
        "### Collection, 2026-12-03", "",
        "- machine: 2 cores", "- command: `python x.py`", "",
        "| env | frames/s |", "|---|---:|", "| pong | 512 |", "| cartpole | 9000 |", "",
        "HTS is 1.4x the hand loop.", "",
        "**cartpole ppo** (200,000 frames)", "",
        "| collector | reached |", "|---|---:|", "| hts | 3/3 |",
    ])  # fmt: skip
    records.RESULTS, saved = tmp_path, records.RESULTS
    try:
        path = records.from_markdown("probe", section, claim="collection")
    finally:
        records.RESULTS = saved
    record = json.loads(path.read_text())
    assert record["title"] == "Collection, 2026-12-03"
    # A paragraph right above a table is its caption, shown above it on the page.
    assert record["tables"] == [
        {"columns": ["env", "frames/s"], "rows": [["pong", "512"], ["cartpole", "9000"]]},
        {
            "caption": "**cartpole ppo** (200,000 frames)",
            "columns": ["collector", "reached"],
            "rows": [["hts", "3/3"]],
        },
    ]
    assert record["text"] == ["HTS is 1.4x the hand loop."]
    assert page_builder._table(record["tables"][1])[:3] == [
        "**cartpole ppo** (200,000 frames)",
        "",
        "| collector | reached |",
    ]


def test_a_record_of_earlier_runs_takes_their_dates_machines_and_highest_load(
    page_builder, tmp_path
):
    """A report written from runs made before it (the lag study's cells) states when and where
    they ran and the highest load after any of them, not the report process's own."""
    records = page_builder.records
    runs = [
        {"utc_end": "2026-12-03 10:00", "machine": "2 cores, AMD", "load_after": [2.5, 2.0, 1.0]},
        {"utc_end": "2026-12-01 09:00", "machine": "2 cores, Intel", "load_after": [1.0, 3.0, 2.0]},
        {"utc_end": "2026-12-02 08:00", "machine": "2 cores, AMD", "load_after": [0.5, 0.5, 0.5]},
    ]
    records.RESULTS, saved = tmp_path, records.RESULTS
    try:
        path = records.from_markdown(
            "probe", "### Probe\n\n| a |\n|---|\n| 1 |", claim="probes", runs=runs
        )
        alone = json.loads(records.from_markdown("alone", "### Alone", claim="paper").read_text())
    finally:
        records.RESULTS = saved
    record = json.loads(path.read_text())
    assert record["utc"] == "2026-12-01 09:00 to 2026-12-03 10:00"
    assert record["machine"] == "2 cores, AMD | 2 cores, Intel"
    assert record["load_after"] == [2.5, 3.0, 2.0]
    assert page_builder._record(record)[2] == (
        "2026-12-01 09:00 to 2026-12-03 10:00 UTC; 2 cores, AMD | 2 cores, Intel; highest load "
        "after any of its 3 runs 2.5/3.0/2.0."
    )
    # without runs: this process's machine and now
    assert alone["machine"] == records.machine_line() and " to " not in alone["utc"]


def test_every_benchmark_is_a_module_with_a_main_and_a_claim_names_a_benchmark(page_builder):
    """``python -m benchmarks <name>`` finds each one by its name; a record's claim by its
    benchmark's name must name one that exists."""
    found = benchmarks.find()
    for name, path in found.items():
        module = importlib.import_module(benchmarks.module_name(path))
        assert callable(module.main), name
        assert benchmarks.summary(path), f"{name}: no docstring"
    assert set(page_builder.records.SCRIPT_CLAIMS) <= set(found)


def test_every_command_on_the_page_runs_a_benchmark_that_exists(page_builder):
    """A record made when the benchmarks were scripts (``python benchmarks/x.py``) shows that
    command as a comment and the same run through ``python -m benchmarks``, renamed ones under
    their new name; every command a reader can paste names a benchmark that exists."""
    assert page_builder.rerun("python benchmarks/latency_targets.py --x 1") == [
        "# recorded as: python benchmarks/latency_targets.py --x 1",
        "python -m benchmarks heavy_tail_latency --x 1",
    ]
    assert page_builder.rerun("python -m benchmarks vs_sb3 --seeds 0") == [
        "python -m benchmarks vs_sb3 --seeds 0"
    ]
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    blocks = [block.split("```")[0] for block in page.split("```bash\n")[1:]]
    commands = [line for block in blocks for line in block.splitlines() if line[:1] != "#"]
    assert commands and all(line.startswith("python -m benchmarks ") for line in commands)
    named = {line.split()[3] for line in commands}
    assert named <= set(benchmarks.find()), named - set(benchmarks.find())
