"""Where the policy acts and how replicas step: the protocols, the table that builds one
(:mod:`~hts_lightning.collectors.backends.table`), one file per backend."""
