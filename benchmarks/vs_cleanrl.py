"""MuJoCo PPO end to end: ``hts-rl fit`` against CleanRL's ``ppo_continuous_action.py`` with the
same settings (1 env x 2048 steps, 10 epochs x 32 minibatches, 64x64 tanh networks, normalized
observations and rewards), A B A B in one run, each timed from process start to exit.

HTS overlaps the collection of batch k+1 with the update on batch k; CleanRL does one after the
other. CleanRL runs from a checkout of vwxyzjn/cleanrl (never copied here) in its own venv
(torch, gymnasium[mujoco]==0.29.1, mujoco<=2.3.3, numpy<2, tyro, tensorboard); HTS steps
envpool's port of the same task. The record goes to
``benchmarks/results/mujoco_vs_cleanrl_<frames>.json``.

    python benchmarks/mujoco_vs_cleanrl.py --cleanrl /path/to/cleanrl \\
        --cleanrl-python /path/to/venv/bin/python [--frames 40960] [--rounds 2]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import _report as reporting
from _hts_fit import ROOT, hts_fit

LOCK = Path("/tmp/hts-cpu.lock")
RESULTS = ROOT / "benchmarks" / "results"


def timed(argv: list[str], env: dict) -> float:
    """Seconds from start to exit of ``argv`` in a fresh folder (it must succeed)."""
    with tempfile.TemporaryDirectory() as work:
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed:\n{done.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cleanrl", type=Path, required=True, help="a vwxyzjn/cleanrl checkout")
    parser.add_argument("--cleanrl-python", type=Path, required=True)
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--frames", type=int, default=40960)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    recipe = f"recipes/mujoco/{args.env.split('-')[0].lower()}_ppo.yaml"
    hts = hts_fit(
        recipe,
        f"--model.init_args.total_frames={args.frames}",
        "--trainer.enable_progress_bar=false",
        "--trainer.logger=false",
        seed=1,
    )
    cleanrl = [
        str(args.cleanrl_python),
        str(args.cleanrl / "cleanrl" / "ppo_continuous_action.py"),
        f"--env-id={args.env}",
        f"--total-timesteps={args.frames}",
        "--no-cuda",
        "--seed=1",
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    times: dict[str, list[float]] = {"hts": [], "cleanrl": []}
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for _ in range(args.rounds):
            times["hts"].append(timed(hts, env))
            times["cleanrl"].append(timed(cleanrl, dict(os.environ)))
        load = os.getloadavg()
    ratios = [c / h for h, c in zip(times["hts"], times["cleanrl"], strict=True)]
    record = {
        "env": args.env,
        "frames": args.frames,
        "seconds": times,
        "frames_per_second": {k: [round(args.frames / s, 1) for s in v] for k, v in times.items()},
        "speedup_hts_over_cleanrl": [round(r, 3) for r in ratios],
        "median_speedup": round(statistics.median(ratios), 3),
        "commands": {"hts": " ".join(hts[1:]).replace(str(ROOT) + "/", ""),
                     "cleanrl": " ".join(["ppo_continuous_action.py", *cleanrl[2:]])},
        "machine": reporting.machine_line(),
        "load_after": [round(x, 2) for x in load],
        "utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }  # fmt: skip
    record_path = RESULTS / f"mujoco_vs_cleanrl_{args.frames}.json"
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
