"""Reporting of the benchmarks: machine line, command line, markdown tables, dated
RESULTS.md sections, plots."""

from __future__ import annotations

import argparse
import datetime
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, collection, records
from benchmarks.common.records import command_line, machine_line
from benchmarks.common.runner import Run

PLOTS = ROOT / "benchmarks" / "plots"


def ratio_header(runs: list[Run]) -> tuple[list[str], list[str]]:
    """Column titles "<HTS variant> / this", one per HTS variant in ``runs``."""
    labels = list(dict.fromkeys(r.label for r in runs if r.collector == "hts"))
    return labels, [f"{label} / this" for label in labels]


def ratios(runs: list[Run], run: Run, key, labels: list[str]) -> list[str]:
    """``run``'s ratio cells: each HTS variant's frames/s at the same ``key`` over its own."""
    cells = []
    for label in labels:
        same = [r.fps for r in runs if r.label == label and key(r) == key(run)]
        cells.append(f"{same[0] / run.fps:.2f}x" if same else "-")
    return cells


def announce(run: Run) -> None:
    print(
        f"  {run.env} {run.label:26s} envs={run.num_envs} workers={run.num_workers} "
        f"alpha={run.sync_interval}: {run.fps:7.0f} frames/s, lag {run.lag}, "
        f"update / wait per batch {run.per_batch} s, load {run.load[0]:.2f}, {run.wall_s:.0f} s",
        flush=True,
    )


def load_str(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.1f}" for x in load)


def section(title: str, settings: str, table: list[str], plots: list[Path]) -> str:
    """A dated RESULTS.md section: machine, command, settings, table, plot links."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### {title}, {stamp}",
        "",
        f"- machine: {machine_line()}",
        f"- command: `{command_line()}`",
        f"- settings: {settings}",
        "- load: the 1/5/15-minute load average right after each run (2 cores: above 2 means "
        "other work was competing); update / wait: seconds per timed batch in the learner's "
        "update (with the weight hand-over) and waiting for the next batch",
        "",
        *table,
        "",
    ]
    lines += [f"![{p.stem}](plots/{p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def throughput_table(
    runs: list[Run], key: Callable[[Run], Any], columns: dict[str, Callable[[Run], Any]]
) -> list[str]:
    """A throughput figure's table, a row per run: ``columns`` (title: the run's cell), then
    frames/s, "<HTS variant> / this" per HTS variant (against the HTS run with the same
    ``key``), the policy lag, update / wait seconds per batch and the load average."""
    labels, titles = ratio_header(runs)
    header = [*columns, "frames/s", *titles, "policy lag", "update / wait s", "load 1/5/15 min"]
    rows = [
        [
            *(cell(r) for cell in columns.values()),
            f"{r.fps:.0f}",
            *ratios(runs, r, key, labels),
            r.lag,
            r.per_batch,
            load_str(r.load),
        ]
        for r in runs
    ]
    numbers = [t for t, cell in columns.items() if isinstance(cell(runs[0]), (int, float))]
    return markdown_table(header, rows, right=(*numbers, "frames/s", *titles))


def markdown_table(
    header: list[str], rows: list[list[Any]], right: tuple[str, ...] = ()
) -> list[str]:
    """A markdown table's lines; the columns named in ``right`` are right-aligned (numbers)."""
    rules = ["---:" if title in right else "---" for title in header]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(rules) + " |",
        *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows),
    ]


def save_plot(fig, args: argparse.Namespace, stem: str) -> Path:
    """Save ``fig`` as ``plots/<--plot-name or stem>.png``; returns its path."""
    fig.tight_layout()
    path = PLOTS / f"{args.plot_name or stem}.png"
    fig.savefig(path, dpi=110)
    return path


def publish(
    title: str, settings: str, table: list[str], plots: list[Path], args: argparse.Namespace
) -> None:
    """Print the dated section, record it (``results/<benchmark>.json``) and append it to
    ``--output`` if given."""
    name = plots[0].stem if plots else None  # a figure's record is named after its plot
    emit(section(title, settings, table, plots), args.output, plots=plots, record=name)


def emit(
    text: str,
    output: Path | None,
    *,
    plots: list[Path] = (),
    record: str | None = None,
    runs: Sequence[dict] = (),
) -> None:
    """Print a markdown section, write it as the record ``record`` (default: the script's
    benchmark's name; ``runs``: the earlier runs it reports, see :func:`records.write`) for
    the Benchmarks page, and append it to ``output`` if given."""
    print("\n" + text)
    records.from_markdown(record or records.benchmark_name(), text, plots=plots, runs=runs)
    if output is not None:
        with output.open("a") as handle:
            handle.write("\n" + text)
        print(f"appended to {output}")


def pyplot():
    """matplotlib's pyplot on the Agg backend, and the plots folder created."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    PLOTS.mkdir(exist_ok=True)
    return plt


# --- collection throughput (python -m benchmarks collector_throughput) ---


def collection_table(
    results: dict[str, list[collection.Measurement]], sizes_by_env: dict[str, collection.Sizes]
) -> str:
    """Frames/s of every contender, against HTS and against the env alone."""
    lines = [
        "| env | contender | frames/batch | frames/s | HTS / this | this / env alone |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for env_name, measurements in results.items():
        by_name = {m.collector: m for m in measurements}
        hts, limit = by_name[collection.HTS].fps, by_name[collection.ENV_ALONE].fps
        for m in measurements:
            lines.append(
                f"| {env_name} | {m.collector} | {sizes_by_env[env_name].frames_per_batch} "
                f"| {m.fps:.0f} | {hts / m.fps:.2f} | {m.fps / limit:.2f} |"
            )
    return "\n".join(lines)


def ratio_lines(
    results: dict[str, list[collection.Measurement]], sizes_by_env: dict[str, collection.Sizes]
) -> str:
    """One line per env: HTS's speed-up over each TorchRL collector, and the sleep bound."""
    cases = collection.env_cases()
    lines = []
    for env_name, measurements in results.items():
        by_name = {m.collector: m.fps for m in measurements}
        parts = [
            f"{by_name[collection.HTS] / by_name[name]:.2f}x vs {name}"
            for name in collection.COLLECTOR_NAMES[1:]
        ]
        line = f"- {env_name}: HTSCollector is " + ", ".join(parts)
        mean_step_s = cases[env_name].mean_step_s
        if mean_step_s:
            # A worker steps its replicas one after the other, so it cannot beat 1 / mean; the
            # measured env-alone rate scatters around this (heavy-tailed step times).
            ceiling = sizes_by_env[env_name].num_workers / mean_step_s
            line += f"; sleep-bound ceiling W / mean step time = {ceiling:.0f} frames/s"
        lines.append(line)
    return "\n".join(lines)


def collection_section(
    results: dict[str, list[collection.Measurement]],
    sizes_by_env: dict[str, collection.Sizes],
    repeats: int,
) -> str:
    """The dated RESULTS.md section of ``collector_throughput``."""
    sizes = next(iter(sizes_by_env.values()))
    settings = (
        f"num_envs={sizes.num_envs}, num_workers={sizes.num_workers}, "
        + ", ".join(f"sync_interval[{k}]={s.sync_interval}" for k, s in sizes_by_env.items())
        + f", measured batches={sizes.batches} (after warm-up: 1 batch, W for MultiAsync), "
        f"repeats={repeats}, HTS inference_batch_size={sizes.inference_batch_size or 'default'}"
    )
    stamp = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return "\n\n".join(
        [
            f"## Collector throughput, {stamp}",
            f"- machine: {machine_line()}; inference device: {sizes.device}\n"
            f"- load average at the end: {load_str(os.getloadavg())}",
            f"Command: `{command_line()}`\n\nSettings: {settings}.",
            collection_table(results, sizes_by_env),
            ratio_lines(results, sizes_by_env),
        ]
    )
