"""A module whose envs fail on rank 1 only, for tests/strategies/test_rank_fault.py (not a test
module): `hts-rl fit --model tests.strategies.rank_fail.RankOneFailsA2C`."""

from __future__ import annotations

import os

from hts_lightning import A2C


class RankOneFailsA2C(A2C):
    def __init__(self, **kwargs):
        # Lightning's launcher starts rank 1 with LOCAL_RANK=1 in its environment.
        fail_at = 300 if os.environ.get("LOCAL_RANK") == "1" else None
        super().__init__(
            env_id="Counting", env_kwargs={"max_count": 1000, "fail_at": fail_at}, **kwargs
        )
