"""Collectors: HTSCollector and the errors it raises."""

from hts_lightning.collectors.errors import EnvReplicaError, WorkerDiedError
from hts_lightning.collectors.hts import HTSCollector

__all__ = ["EnvReplicaError", "HTSCollector", "WorkerDiedError"]
