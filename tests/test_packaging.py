"""The set-up story stays true: README commands, CI script, conda env and pyproject agree."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]
# conda-forge names that differ from the PyPI names.
CONDA_TO_PYPI = {"pytorch": "torch"}


def _requirement(line: str) -> tuple[str, str]:
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)$", line)
    name, _extras, spec = match.groups()
    name = CONDA_TO_PYPI.get(name.lower(), name.lower()).replace("_", "-")
    return name, spec.replace(" ", "")


def _pyproject() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    lines = project["dependencies"] + extras["dev"] + extras["docs"]
    return dict(_requirement(line) for line in lines)


def _conda() -> dict[str, str]:
    spec = yaml.safe_load((ROOT / "environment.yml").read_text())
    out = {}
    for entry in spec["dependencies"]:
        lines = entry["pip"] if isinstance(entry, dict) else [entry]
        for line in lines:
            name, version = _requirement(line)
            if name not in ("python", "pip"):
                out[name] = version
    return out


def test_environment_yml_matches_pyproject():
    assert _conda() == _pyproject()


def test_environment_yml_pins_python_311():
    spec = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in spec["dependencies"]


def _readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- setup-commands -->\s*```(?:bash|sh)?\n(.*?)```", readme, re.S)
    assert block, "README.md must hold the two set-up commands in a marked code block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one():
    commands = _readme_commands()
    assert len(commands) == 2
    main_command, test_command = commands
    assert "hts-rl" in main_command and "pytest" in test_command
    for command in commands:
        assert "python3 -m venv .venv" in command and "torch==2.13.0" in command
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    ci_commands = [
        line for line in ci if line.strip() and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci_commands == [test_command]


def test_console_script_is_installed():
    executable = shutil.which("hts-rl") or str(Path(__import__("sys").executable).parent / "hts-rl")
    result = subprocess.run([executable, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "collect" in result.stdout and "hts-rl fit --config" in result.stdout


def test_football_script_installs_the_football_extra():
    script = ROOT / "scripts" / "install_football.sh"
    assert script.stat().st_mode & 0o111, "the script must be executable"
    text = script.read_text()
    listed = re.search(r"^RUNTIME_DEPS=\((.*)\)$", text, re.M).group(1)
    script_deps = dict(_requirement(dep.strip('"')) for dep in listed.split())
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = dict(_requirement(line) for line in extra["optional-dependencies"]["football"])
    assert script_deps == extra
    assert "GFOOTBALL_VERSION=2.10.2" in text
    # Only the test command installs football; the main (training) command does not.
    main_command, test_command = _readme_commands()
    assert "install_football.sh" not in main_command
    assert "scripts/install_football.sh .venv && .venv/bin/python -m pytest" in test_command


def test_the_getting_started_page_gives_the_readmes_commands():
    page = (ROOT / "docs" / "getting-started.md").read_text()
    for command in _readme_commands():
        assert command in page, f"docs/getting-started.md lacks: {command}"
