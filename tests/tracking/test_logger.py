"""The logger reads the tracking URI when it is made, and says what to do with a wrong run."""

from __future__ import annotations

import pytest

from hts_lightning.tracking import MLflowLogger


def test_the_uri_is_read_when_the_logger_is_made_not_at_import(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # not contacted here
    assert MLflowLogger().tracking_uri == "http://127.0.0.1:9"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    # The embedded default, made absolute so that the run is found again from anywhere.
    assert MLflowLogger().tracking_uri == f"sqlite:///{tmp_path}/mlflow.db"
    explicit = MLflowLogger(tracking_uri="sqlite:///mlflow.db")
    assert explicit.tracking_uri == f"sqlite:///{tmp_path}/mlflow.db"
    assert MLflowLogger().save_dir == "runs"  # where checkpoints go


def test_continuing_a_run_that_is_not_in_the_store_says_how_to_fix_it(tmp_path):
    logger = MLflowLogger(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", run_id="0" * 32)
    with pytest.raises(ValueError, match="is not in the store") as error:
        logger.log_metrics({"perf/fps": 1.0}, step=1)
    assert "MLFLOW_TRACKING_URI" in str(error.value) and "run_id=null" in str(error.value)
