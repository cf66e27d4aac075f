"""Whether two envpool installs play the same Atari game: the same actions, the same frames.

CleanRL's ``ppo_atari_envpool.py`` runs in its own venv with envpool 0.8.4; hts_lightning
depends on envpool 1.2.5. This plays one seeded, fixed sequence of random actions in each (the
options CleanRL's script passes: episodic life, clipped rewards) and compares a digest of every
frame, reward and episode end, resets included. The same digest: the two versions are the same
environment for these options, and a difference between the two libraries' curves is not the
envpool version's.

    python -m benchmarks envpool_versions --python CLEANRL_VENV/bin/python
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import subprocess
import sys


def play(task: str, *, num_envs: int, steps: int, seed: int) -> dict:
    """The digest of ``steps`` steps of ``num_envs`` envs under seeded random actions, with
    each env's summed reward and the count of episode ends (imports envpool and numpy only, so
    that any venv with them runs it)."""
    import envpool
    import numpy as np

    env = envpool.make(
        task, env_type="gym", num_envs=num_envs, episodic_life=True, reward_clip=True, seed=seed
    )
    reset = env.reset()
    frames = reset[0] if isinstance(reset, tuple) else reset  # gym >= 0.26 returns (obs, info)
    digest = hashlib.sha256(frames.tobytes())
    actions = np.random.RandomState(seed)
    returns, ends = np.zeros(num_envs), 0
    for _ in range(steps):
        result = env.step(actions.randint(0, env.action_space.n, size=num_envs))
        frames, rewards = result[0], np.asarray(result[1], np.float32)
        # gym 0.23's step is (obs, reward, done, info), gym 0.26's splits done in two
        done = result[2] if len(result) == 4 else result[2] | result[3]
        for array in (frames, rewards, np.asarray(done, np.bool_)):
            digest.update(array.tobytes())
        returns += rewards
        ends += int(done.sum())
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "envpool": envpool.__version__,
        "digest": digest.hexdigest()[:16],
        "returns": returns.tolist(),
        "episode_ends": ends,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", help="the other venv's Python (with envpool and numpy)")
    parser.add_argument("--task", default="Pong-v5")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    settings = dict(num_envs=options.num_envs, steps=options.steps, seed=options.seed)
    if options.child:
        print(json.dumps(play(options.task, **settings)))
        return
    if options.python is None:
        parser.error("--python is needed: the other venv's Python, e.g. CleanRL's venv/bin/python")
    from benchmarks.common import records

    child = [__file__, "--child", "--task", options.task]
    child += [f"--{key.replace('_', '-')}={value}" for key, value in settings.items()]
    played = []
    for python in (sys.executable, options.python):
        process = subprocess.run([python, *child], capture_output=True, text=True, check=False)
        if process.returncode != 0:  # e.g. no envpool there: say why, not just the exit code
            raise SystemExit(f"{python} could not play: {process.stderr.strip()}")
        played.append(json.loads(process.stdout.strip().splitlines()[-1]))
    same = len({result["digest"] for result in played}) == 1
    verdict = "the same frames, rewards and ends" if same else "DIFFERENT play"
    print(f"{options.task}: {verdict}: {json.dumps(played)}", flush=True)
    rows = [
        [r["python"], r["numpy"], r["envpool"], r["digest"],
         " ".join(f"{x:g}" for x in r["returns"]), r["episode_ends"]]
        for r in played
    ]  # fmt: skip
    records.write(
        "envpool_versions",
        title=f"envpool versions on {options.task}: {verdict}",
        claim="probes",
        tables=[{
            "columns": ["python", "numpy", "envpool", "digest", "summed rewards", "episode ends"],
            "rows": rows,
        }],
        text=[
            f"{options.steps:,} steps of {options.num_envs} envs, seed {options.seed}, seeded "
            "random actions; episodic life and clipped rewards (CleanRL's options). The digest "
            "covers every frame, reward and episode end."
        ],
    )  # fmt: skip


if __name__ == "__main__":
    main()
