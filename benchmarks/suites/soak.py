"""Soak run: a long `hts-rl fit`, with the memory and open files of its processes sampled.

Long runs must not leak: the collector ships env states with every batch, the module keeps
weight snapshots, MLflow logs metrics, checkpoints are rewritten every 50 updates. This runs
`hts-rl fit` on a recipe for a wall-clock duration (Lightning's ``max_time``) in a fresh working
directory, samples the resident memory (RSS) and the open file descriptors of the main process
and of its workers every ``--interval`` seconds, writes the samples as CSV and prints a summary:
the growth between the end of the first quarter (after warm-up) and the end, and a least-squares
slope over the last three quarters.

    python -m benchmarks soak --minutes 30 --output benchmarks/raw/soak.csv
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.common import ROOT, records


def _tree(process: psutil.Process) -> tuple[int, int, int, int, int]:
    """(main RSS, workers' RSS, main fds, workers' fds, workers) in bytes and counts."""
    workers = []
    for child in process.children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                workers.append((child.memory_info().rss, child.num_fds()))
        except psutil.NoSuchProcess:
            continue
    return (
        process.memory_info().rss,
        sum(r for r, _ in workers),
        process.num_fds(),
        sum(f for _, f in workers),
        len(workers),
    )


def _slope(xs: list[float], ys: list[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/cartpole_ppo.yaml")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=15.0, help="seconds between samples")
    parser.add_argument("--output", default="benchmarks/raw/soak.csv")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="hts-soak-"))
    seconds = int(args.minutes * 60)
    command = [
        *(sys.executable, "-m", "hts_lightning.cli", "fit", "--config", str(ROOT / args.recipe)),
        "--model.init_args.total_frames=1000000000",
        f"--trainer.max_time=00:00:{seconds // 60:02d}:{seconds % 60:02d}",
        "--trainer.enable_progress_bar=false",
    ]
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{workdir}/mlflow.db"}
    start = time.monotonic()
    fit = subprocess.Popen(command, cwd=workdir, env=env, stderr=subprocess.PIPE, text=True)
    process = psutil.Process(fit.pid)
    rows = []
    while fit.poll() is None:
        time.sleep(args.interval)
        try:
            sample = _tree(process)
        except psutil.NoSuchProcess:
            break
        if fit.poll() is None:  # not a sample of a process on its way out
            rows.append((round(time.monotonic() - start, 1), *sample))
    stderr = fit.communicate()[1]
    if fit.returncode != 0:
        print(stderr[-3000:], file=sys.stderr)
        return fit.returncode

    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(
            ["seconds", "main_rss", "workers_rss", "main_fds", "workers_fds", "workers"]
        )
        writer.writerows(rows)
    quarter = rows[len(rows) // 4]
    last = rows[-1]
    tail = rows[len(rows) // 4 :]
    mib = 2**20
    print(f"samples: {len(rows)} over {last[0] / 60:.1f} min; {last[5]} worker processes")
    table = []
    for name, column, unit, scale in [
        ("main RSS", 1, "MiB", mib),
        ("workers RSS", 2, "MiB", mib),
        ("main fds", 3, "", 1),
        ("workers fds", 4, "", 1),
    ]:
        per_hour = _slope([r[0] for r in tail], [r[column] for r in tail]) * 3600 / scale
        print(
            f"{name}: {quarter[column] / scale:.1f} -> {last[column] / scale:.1f} {unit} "
            f"(after warm-up -> end); slope over the last 3/4: {per_hour:+.2f} {unit}/h"
        )
        table.append(
            [
                name,
                f"{quarter[column] / scale:.1f} {unit}",
                f"{last[column] / scale:.1f} {unit}",
                f"{per_hour:+.2f} {unit}/h",
            ]
        )
    records.write(
        "soak",
        title=f"Soak: CartPole PPO for {last[0] / 60:.0f} minutes, memory and file descriptors",
        claim="end_to_end",
        tables=[{"columns": ["what", "after warm-up", "at the end", "slope, last 3/4"],
                 "rows": table}],
        text=[f"{len(rows)} samples, {last[5]} worker processes; samples in {args.output}."],
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
