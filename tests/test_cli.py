"""The ``hts-rl`` command's own words: what it checks before the heavy imports, and its help."""

from __future__ import annotations

import pytest

from hts_lightning.cli import main
from tests.conftest import run_script

# Each is imported by hts-rl fit and takes seconds on a loaded 2-core machine.
HEAVY = ("torch", "lightning", "torchrl", "mlflow", "jsonargparse")

# Run in a fresh interpreter: main's exit code, and the heavy modules loaded when it returned.
SCRIPT = """
import sys
from hts_lightning.cli import main
code = main({argv!r})
print([name for name in {heavy!r} if name in sys.modules])
sys.exit(code)
"""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fit", "--config", "nope.yaml"], "hts-rl: error: --config nope.yaml: no such file ("),
        (["fit", "-c=nope.yaml"], "hts-rl: error: --config nope.yaml: no such file ("),
        (["fit", "--config", "."], "hts-rl: error: --config .: "),
        (["fitt", "--config", "nope.yaml"], "hts-rl: error: no command 'fitt': "),
    ],
)
def test_a_missing_config_or_command_is_said_before_the_heavy_imports(argv, message, tmp_path):
    done = run_script(SCRIPT.format(argv=argv, heavy=HEAVY), tmp_path / "run.py", timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stdout.strip() == "[]"  # none of the heavy modules was imported
    assert done.stderr.startswith(message) and len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["fit", "--help"],
        ["fit", "--model.help", "PPO"],
        ["collect", "--help"],
        ["evaluate", "--help"],
    ],
    ids=" ".join,
)
def test_the_help_is_plain_text(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's help exits
        code = exit.code
    assert code == 0
    help = capsys.readouterr().out
    assert "usage: " in help or "Help for --model.help" in help
    # The docstrings' reStructuredText markup, which a terminal shows as is.
    assert "``" not in help and ":class:`" not in help and ":paramref:`" not in help
    assert ">`_" not in help
