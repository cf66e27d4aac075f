"""Issue 16's GPU check, one prepared run (``benchmarks/gpu/run.sh`` calls it).

Three phases within a wall-clock budget (default 540 s, for a 10-minute device call), all
output under ``--out``:

1. ``pytest -m gpu`` (CUDA inference bitwise across worker counts, CUDA graphs equal eager
   batches, lag one): ``pytest_gpu.txt``.
2. Throughput: Pong PPO end to end (the recipe's hyperparameters, learner and inference on the
   GPU), frames/s from the end of the first update to the end of the last, HTS (envpool
   backend; Python env stack) against TorchRL's ``Collector(ParallelEnv)``,
   ``MultiSyncCollector`` and ``MultiAsyncCollector`` on the same box: ``throughput.md``.
   Target (issue 16): HTS >= 10k frames/s and >= 2x every TorchRL collector.
3. Learning: Pong PPO with HTS's fastest backend for the remaining time, the return of the
   last 20 episodes against wall seconds and frames: ``learning.csv``.

``--dry-run``: CartPole instead of Pong, tiny sizes, a 40 s budget: the same code paths on a
CPU, in about a minute.

    python benchmarks/gpu/driver.py --out $OUT [--budget-s 540] [--num-workers 14]
    python benchmarks/gpu/driver.py --out /tmp/gpu-dry --dry-run
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch
from lightning import Callback, Trainer

from hts_lightning import PPO

PONG = dict(lr=0.00025, clip_epsilon=0.1, epochs=4, minibatches=4, normalize_advantage=True)
CARTPOLE = dict(gamma=0.98, gae_lambda=0.8, lr=0.001, entropy_coef=0.0, epochs=4, minibatches=1)
#: (label, module collector, env_backend)
CONTENDERS = (
    ("HTS envpool", "hts", "envpool"),
    ("HTS python", "hts", "python"),
    ("Collector(ParallelEnv)", "sync", "python"),
    ("MultiSyncCollector", "multi_sync", "python"),
    ("MultiAsyncCollector", "multi_async", "python"),
)


class Clock(Callback):
    """Frames/s after the first update (after the first W for MultiAsync), and the curve."""

    def __init__(self, *, warmup: int = 1, stop_after: int | None = None, deadline=None):
        self.warmup, self.stop_after, self.deadline = warmup, stop_after, deadline
        self.start = self.end = None
        self.frames0 = self.frames = 0
        self.t0 = time.perf_counter()
        self.curve: list[tuple[float, int, float]] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        now = time.perf_counter()
        returns = module.recent_returns
        mean = sum(returns) / len(returns) if returns else float("nan")
        self.curve.append((now - self.t0, module.frames, mean))
        if batch_idx == self.warmup - 1:
            self.start, self.frames0 = now, module.frames
        elif batch_idx >= self.warmup:
            self.end, self.frames = now, module.frames
        done = self.stop_after is not None and batch_idx >= self.warmup + self.stop_after - 1
        # Past the deadline a throughput run still ends its first timed batch (a number).
        late = self.deadline is not None and now >= self.deadline
        if done or (late and (self.stop_after is None or self.end is not None)):
            trainer.should_stop = True

    @property
    def fps(self) -> float:
        if self.start is None or self.end is None:
            return float("nan")
        return (self.frames - self.frames0) / (self.end - self.start)


def fit(module, clock: Clock) -> None:
    Trainer(
        max_epochs=1,
        accelerator="auto",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[clock],
    ).fit(module)


def module(args, collector: str, backend: str, total_frames: int) -> PPO:
    return PPO(
        env_id=args.env_id,
        num_envs=args.num_envs,
        num_workers=args.num_workers,
        sync_interval=args.sync_interval,
        total_frames=total_frames,
        seed=0,
        collector=collector,
        env_backend=backend,
        inference_device="cuda" if torch.cuda.is_available() else None,
        **args.hyperparameters,
    )


def machine(out: Path) -> None:
    lines = [
        f"{os.cpu_count()} CPUs ({platform.machine()}), python {platform.python_version()}, "
        f"torch {torch.__version__}, cuda available {torch.cuda.is_available()}",
    ]
    if torch.cuda.is_available():
        lines.append(f"GPU: {torch.cuda.get_device_name(0)}")
    (out / "machine.txt").write_text("\n".join(lines) + "\n")
    print(*lines, sep="\n", flush=True)


def gpu_tests(out: Path, timeout: float) -> None:
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rs", "tests"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        text = result.stdout + result.stderr + f"\nexit status {result.returncode}\n"
    except subprocess.TimeoutExpired as error:
        text = f"{error.stdout or ''}\nTIMED OUT after {timeout:.0f} s\n"
    (out / "pytest_gpu.txt").write_text(text)
    print(text.strip().splitlines()[-2:], flush=True)


def throughput(args, out: Path, deadline: float) -> str:
    """Each contender for ``args.batches`` timed batches; returns the fastest HTS backend."""
    frames_per_batch = args.num_envs * args.sync_interval
    rows = []
    for label, collector, backend in CONTENDERS:
        if time.perf_counter() > deadline:
            rows.append((label, float("nan"), "skipped: out of time"))
            continue
        warmup = args.num_workers if collector == "multi_async" else 1
        total = frames_per_batch * (warmup + args.batches + 1)
        clock = Clock(warmup=warmup, stop_after=args.batches, deadline=deadline)
        started = time.perf_counter()
        try:
            fit(module(args, collector, backend, total), clock)
            note = f"{time.perf_counter() - started:.0f} s wall, load {os.getloadavg()[0]:.1f}"
        except Exception as error:  # one contender failing must not lose the others
            note = f"failed: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
        rows.append((label, clock.fps, note))
        print(label, f"{clock.fps:.0f} frames/s", note, flush=True)
    hts = {label: fps for label, fps, _ in rows if label.startswith("HTS") and fps == fps}
    best = max(hts, key=hts.get) if hts else "HTS python"
    lines = [
        f"{args.env_id}: {args.num_envs} envs, {args.num_workers} workers, sync_interval "
        f"{args.sync_interval}, {args.batches} timed batches; command: {' '.join(sys.argv)}",
        "",
        "| contender | frames/s | best HTS / this | note |",
        "|---|---:|---:|---|",
    ]
    for label, fps, note in rows:
        ratio = hts.get(best, float("nan")) / fps if fps == fps and fps > 0 else float("nan")
        lines.append(f"| {label} | {fps:.0f} | {ratio:.2f} | {note} |")
    (out / "throughput.md").write_text("\n".join(lines) + "\n")
    return best


def learning(args, out: Path, deadline: float, best: str) -> None:
    backend = "envpool" if best == "HTS envpool" else "python"
    clock = Clock(deadline=deadline)
    path = out / "learning.csv"
    try:
        fit(module(args, "hts", backend, 10_000_000), clock)
        status = "ok"
    except Exception as error:
        status = f"failed: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["wall_s", "frames", "return_last_20"])
        writer.writerows((f"{t:.2f}", frames, f"{r:.3f}") for t, frames, r in clock.curve)
    print(f"learning ({best}): {len(clock.curve)} updates, {status}", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, help="default 540 (dry run 40)")
    parser.add_argument("--num-envs", type=int, help="default 64 (dry run 4)")
    parser.add_argument(
        "--num-workers", type=int, help="default: the largest divisor of num-envs <= cores - 2"
    )
    parser.add_argument("--sync-interval", type=int, help="default 128 (dry run 8)")
    parser.add_argument("--batches", type=int, help="timed batches per contender (default 4)")
    parser.add_argument("--dry-run", action="store_true", help="CartPole, tiny, on any machine")
    args = parser.parse_args(argv)
    dry = args.dry_run
    args.budget_s = args.budget_s or (40.0 if dry else 540.0)
    args.num_envs = args.num_envs or (4 if dry else 64)
    cores = max(1, (os.cpu_count() or 1) - 2)
    divisors = [w for w in range(1, args.num_envs + 1) if args.num_envs % w == 0 and w <= cores]
    args.num_workers = args.num_workers or (1 if dry else max(divisors))
    args.sync_interval = args.sync_interval or (8 if dry else 128)
    args.batches = args.batches or (1 if dry else 4)
    args.env_id = "CartPole-v1" if dry else "ALE/Pong-v5"
    args.hyperparameters = CARTPOLE if dry else PONG
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    machine(args.out)
    gpu_tests(args.out, timeout=0.25 * args.budget_s if not dry else 30.0)
    # Throughput gets half of what is left, learning the rest (a contender past it is skipped).
    left = args.budget_s - (time.perf_counter() - start)
    best = throughput(args, args.out, time.perf_counter() + 0.5 * left)
    learning(args, args.out, start + args.budget_s, best)
    print(f"done in {time.perf_counter() - start:.0f} s; files in {args.out}", flush=True)


if __name__ == "__main__":
    main()
