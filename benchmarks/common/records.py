"""Machine-readable records of the benchmarks' figures, from which the Benchmarks page is built
(``python -m benchmarks results_page``).

Every benchmark writes its latest figures to ``benchmarks/results/<name>.json``: the claim it
supports (a section of the page), a title, when, on what machine, by which command, the tables
(columns and rows), the plots and the reading. A new run of the same benchmark replaces its
record; git keeps the earlier ones.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT

RESULTS = ROOT / "benchmarks" / "results"

#: The page's sections, in order: the claim each one tests.
CLAIMS = {
    "collection": "Collection against the machine's limits and TorchRL's collectors",
    "end_to_end": "End to end against CleanRL, Stable-Baselines3 and plain loops",
    "learning": "Learning curves against published anchors",
    "determinism": "Determinism",
    "football": "Google Research Football",
    "paper": "The paper's figures on this machine",
    "probes": "Probes: where the time and the bits go",
}

#: The claim of each benchmark's records, by the benchmark's name (``python -m benchmarks --list``).
SCRIPT_CLAIMS = {
    "native_throughput": "collection",
    "collector_throughput": "collection",
    "heavy_tail_latency": "collection",
    "vs_cleanrl": "end_to_end",
    "vs_plain_pytorch": "end_to_end",
    "vs_sb3": "end_to_end",
    "native_training": "end_to_end",
    "training_throughput": "end_to_end",
    "lag_study": "learning",
    "same_parameters": "determinism",
    "determinism": "determinism",
    "football_step_time": "football",
    "fig_variance": "paper",
    "fig_scaling": "paper",
    "fig_limit": "paper",
    "fig_learning": "paper",
}


def machine_line() -> str:
    """Cores, architecture, GPU and the versions that matter, in one line."""
    import lightning
    import torch
    import torchrl

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"

    return (
        f"{os.cpu_count()} CPU cores ({platform.machine()}), {gpu}; python "
        f"{platform.python_version()}, torch {torch.__version__}, torchrl {torchrl.__version__}, "
        f"lightning {lightning.__version__}"
    )


#: How a benchmark is run, from the repository's root: ``python -m benchmarks <name>``.
ENTRY = "python -m benchmarks"


def benchmark_name() -> str:
    """The name of the benchmark running: ``python -m benchmarks <name>`` puts
    ``"python -m benchmarks <name>"`` in ``sys.argv[0]`` (so that its ``--help`` shows the
    command), ``python -m benchmarks.<kind>.<name>`` the module's file."""
    first = sys.argv[0]
    return first.removeprefix(f"{ENTRY} ") if first.startswith(f"{ENTRY} ") else Path(first).stem


def command_line() -> str:
    """The benchmark's command, run from the repository's root."""
    return shlex.join([*ENTRY.split(), benchmark_name(), *sys.argv[1:]])


def provenance(runs: Sequence[dict[str, Any]]) -> tuple[str, str, list[float]]:
    """The date (or first to last date), the machines and the highest load after any of
    ``runs`` (each a dict with ``utc_end``, ``machine`` and ``load_after``)."""
    ends = sorted({run["utc_end"] for run in runs})
    utc = ends[0] if len(ends) == 1 else f"{ends[0]} to {ends[-1]}"
    machine = " | ".join(sorted({run["machine"] for run in runs}))
    load = [max(loads) for loads in zip(*(run["load_after"] for run in runs), strict=True)]
    return utc, machine, load


def write(
    name: str,
    *,
    title: str,
    tables: Sequence[dict[str, Any]],
    text: Sequence[str] = (),
    plots: Sequence[Path] = (),
    claim: str | None = None,
    runs: Sequence[dict[str, Any]] = (),
) -> Path:
    """Write the record ``results/<name>.json`` (``claim``: the script's by default); each
    table is ``{"columns": [...], "rows": [[...], ...]}``, with an optional ``"caption"`` (a
    line shown above it). A record that reports ``runs`` made before it (each a dict with
    ``utc_end``, ``machine`` and ``load_after``) takes its dates, machines and highest load
    from them, not from the process writing it."""
    claim = claim or SCRIPT_CLAIMS.get(benchmark_name())
    if claim not in CLAIMS:
        raise ValueError(f"{name}: claim {claim!r} is not a section of the page ({list(CLAIMS)})")
    if runs:
        utc, machine, load = provenance(runs)
    else:
        utc = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
        machine, load = machine_line(), [round(x, 2) for x in os.getloadavg()]
    record = {
        "name": name,
        "claim": claim,
        "title": title,
        "utc": utc,
        "machine": machine,
        "load_after": load,
        **({"runs": len(runs)} if runs else {}),
        "command": command_line(),
        "tables": [{**({"caption": t["caption"]} if t.get("caption") else {}),
                    "columns": list(t["columns"]), "rows": [list(r) for r in t["rows"]]}
                   for t in tables],
        "text": list(text),
        "plots": [str(Path(p).resolve().relative_to(ROOT)) for p in plots],
    }  # fmt: skip
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"record: {path}")
    return path


def from_markdown(
    name: str,
    markdown: str,
    *,
    plots: Sequence[Path] = (),
    claim: str | None = None,
    runs: Sequence[dict[str, Any]] = (),
) -> Path:
    """The record of a section printed as markdown: its first heading is the title, its tables
    become tables, a paragraph right above a table that table's caption, its other paragraphs
    the text (the machine and command lines are the record's own; ``runs``: as for
    :func:`write`)."""
    title, tables, text = name, [], []
    paragraph_above = False  # the last block read is a paragraph of the text
    for block in re.split(r"\n\s*\n", markdown.strip()):
        lines = [line for line in block.splitlines() if line.strip()]
        if lines and lines[0].startswith("#"):
            title = lines[0].lstrip("#").strip()
            lines = lines[1:]
        rows = [line for line in lines if line.lstrip().startswith("|")]
        if rows and len(rows) == len(lines):
            cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
            body = [r for r in cells[1:] if not all(set(c) <= set("-: ") for c in r)]
            caption = text.pop() if paragraph_above else None
            tables.append({"caption": caption, "columns": cells[0], "rows": body})
            paragraph_above = False
        elif lines and not lines[0].startswith(("- machine:", "- command:", "Command:", "![")):
            text.append("\n".join(lines))
            paragraph_above = True
        else:
            paragraph_above = False
    return write(name, title=title, tables=tables, text=text, plots=plots, claim=claim, runs=runs)


def load_all() -> list[dict[str, Any]]:
    """Every record with a claim, by claim then title."""
    records = []
    for path in sorted(RESULTS.glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("claim") in CLAIMS:
            records.append(record)
    order = list(CLAIMS)
    return sorted(records, key=lambda r: (order.index(r["claim"]), r["title"]))
