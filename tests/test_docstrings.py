"""The examples in public docstrings run and print what they say."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "hts_lightning.collectors.hts",
    "hts_lightning.envs.atari",
    "hts_lightning.envs.classic",
    "hts_lightning.envs.latency",
    "hts_lightning.envs.testing",
    "hts_lightning.envs.snapshot",
    "hts_lightning.callbacks.stop_on_signal",
    "hts_lightning.models.actor_critic",
    "hts_lightning.models.nature_cnn",
    "hts_lightning.optim.kfac",
    "hts_lightning.modules.a2c",
    "hts_lightning.modules.ppo",
    "hts_lightning.modules.acktr",
    "hts_lightning.envs.factory",
    "hts_lightning.models.tensor_policy",
    "hts_lightning.tracking.mlflow",
    "hts_lightning.tracking.config",
    "hts_lightning.tracking.callback",
    "hts_lightning.models.players",
    "hts_lightning.callbacks.episode_metric",
    "hts_lightning.envs.football",
    "hts_lightning.envs.envpool",
]
# Modules whose examples need an optional extra: (module, the package it needs).
NEEDS = {"hts_lightning.envs.football": "gfootball", "hts_lightning.envs.envpool": "envpool"}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0
