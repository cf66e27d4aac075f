"""Collectors: HTSCollector, the errors it raises, and its per-row action sampling (which
ACKTR's Fisher pass reuses: a sample from a uniform tensor owned by the caller)."""

from hts_lightning.collectors.core.sampling import noise_width, sample_from_uniform
from hts_lightning.collectors.errors import BatchTimeoutError, EnvReplicaError, WorkerDiedError
from hts_lightning.collectors.factory import make_collector
from hts_lightning.collectors.hts import HTSCollector

__all__ = [
    "BatchTimeoutError",
    "EnvReplicaError",
    "HTSCollector",
    "WorkerDiedError",
    "make_collector",
    "noise_width",
    "sample_from_uniform",
]
