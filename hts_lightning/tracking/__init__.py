"""MLflow tracking: the default logger, its callbacks, and the policy as an MLflow model."""

from hts_lightning.tracking.callback import MLflowTracking, log_policy_model
from hts_lightning.tracking.config import SaveConfigToMLflow
from hts_lightning.tracking.mlflow import DEFAULT_TRACKING_URI, MLflowLogger, resolve_tracking_uri

__all__ = [
    "DEFAULT_TRACKING_URI",
    "MLflowLogger",
    "MLflowTracking",
    "SaveConfigToMLflow",
    "log_policy_model",
    "resolve_tracking_uri",
]
