"""A script that starts workers without ``if __name__ == "__main__":`` gets an error naming it.

Worker processes (forkserver, spawn) begin by importing the main script again; without the
guard its top-level code starts collectors inside the workers, which multiprocessing refuses.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_script

BODY = """\
env = CountingEnv()
policy = make_actor_critic(env.observation_spec, env.action_spec).get_policy_operator()
with HTSCollector(
    CountingEnv, policy, num_envs=2, num_workers=1, frames_per_batch=4, total_frames=8,
    mp_start_method="{method}",
) as collector:
    versions = [int(batch["policy_version"].max()) for batch in collector]
print("versions", versions)
"""
IMPORTS = """\
from hts_lightning import CountingEnv, HTSCollector
from hts_lightning.models import make_actor_critic
"""


def _run(code: str, folder: Path) -> subprocess.CompletedProcess:
    return run_script(code, folder / "script.py", timeout=120)


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_without_the_guard_the_error_names_the_script_and_the_fix(method, tmp_path):
    result = _run(IMPORTS + BODY.format(method=method), tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "WorkerDiedError: Collector worker 0 (env replicas 0..1) died" in last
    assert f"{tmp_path / 'script.py'} has no 'if __name__ == \"__main__\":' block" in last
    assert "Move the script's code into a function called under that block" in last
    assert "killed for memory" not in last


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_with_the_guard_the_same_code_runs(method, tmp_path):
    guarded = (
        IMPORTS
        + "\n\ndef main():\n"
        + textwrap.indent(BODY.format(method=method), "    ")
        + '\n\nif __name__ == "__main__":\n    main()\n'
    )
    result = _run(guarded, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "versions [0, 0]"
