"""The documentation site builds with warnings as errors (nitpicky cross references, offline
inventories), and its API reference documents every public name."""

from __future__ import annotations

import importlib
import subprocess
import sys
import zlib

import pytest

from tests.conftest import ROOT

PACKAGES = [
    "hts_lightning", "hts_lightning.modules", "hts_lightning.collectors", "hts_lightning.envs",
    "hts_lightning.models", "hts_lightning.callbacks", "hts_lightning.strategies",
    "hts_lightning.tracking", "hts_lightning.optim", "hts_lightning.evaluate",
    "hts_lightning.checkpoint",
]  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-n", "-E", "-q",
         str(ROOT / "docs"), str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-5000:]
    return out


def _documented(site) -> set[str]:
    raw = (site / "objects.inv").read_bytes()
    body = raw.split(b"\n", 4)[4]  # four header lines, then zlib
    lines = zlib.decompress(body).decode().splitlines()
    return {line.split(" ", 1)[0] for line in lines if " py:" in line}


def test_the_site_builds_without_a_warning_and_has_its_sections(site):
    for page in ["index", "getting-started", "concepts/hts-protocol", "guides/torchrl-loop",
                 "guides/own-env-and-network", "benchmarks", "api/index"]:  # fmt: skip
        assert (site / f"{page}.html").is_file(), page


def test_every_public_name_is_in_the_api_reference(site):
    documented = _documented(site)
    names = {n.rsplit(".", 1)[-1] for n in documented if n.startswith("hts_lightning.")}
    missing = []
    for package in PACKAGES:
        for name in importlib.import_module(package).__all__:
            if name not in names:
                missing.append(f"{package}.{name}")
    assert not missing, f"not in the API reference: {missing}"
    # Not vacuous: the reference holds the classes a user starts from, with their methods.
    assert {"hts_lightning.modules.PPO", "hts_lightning.collectors.HTSCollector"} <= documented
    assert "hts_lightning.collectors.HTSCollector.update_policy_weights_" in documented
