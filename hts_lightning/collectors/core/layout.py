"""The layout of a transition, from which the slots (one row per replica: what it acts on next,
its last step, its action) and the batch storage ([replicas, sync_interval], TorchRL's keys)
are built."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from hts_lightning.collectors.core.policy_runner import PolicyRunner
from hts_lightning.collectors.core.views import leaf_keys


class Layout:
    """The keys and shapes of one transition, read off a probe env and a probe policy call."""

    def __init__(
        self, fake: TensorDictBase, acted: TensorDictBase, root_keys, action_keys, noise_width
    ):
        self.fake = fake
        self.acted = acted
        self.root_keys = root_keys
        self.action_keys = action_keys
        self.policy_keys = [k for k in leaf_keys(acted) if k not in root_keys]
        self.noise_width = noise_width

    @classmethod
    def probe(cls, create_env_fn, runner: PolicyRunner, inference_batch_size: int) -> Layout:
        env = create_env_fn()
        try:
            if env.batch_size != torch.Size([]):
                raise ValueError(
                    "HTSCollector steps each replica on its own: create_env_fn must return an env "
                    f"with an empty batch size, got {tuple(env.batch_size)}. Pass num_envs "
                    "instead of a batched env."
                )
            fake = env.fake_tensordict()
            action_keys = list(env.action_keys)
        finally:
            env.close()
        root_keys = leaf_keys(fake.exclude("next", *action_keys))
        probe = fake.select(*root_keys).expand(inference_batch_size).clone()
        width = runner.noise_width(probe)
        acted = runner(probe.clone(), torch.full((probe.shape[0], width), 0.5))
        missing = [k for k in action_keys if k not in acted.keys(True, True)]
        if missing:
            raise ValueError(
                f"The policy must write the env's action keys; it did not write {missing}."
            )
        return cls(fake, acted[0], root_keys, action_keys, width)

    def slots(self, num_envs: int) -> TensorDictBase:
        return TensorDict(
            root=self.fake.select(*self.root_keys).expand(num_envs).clone(),
            next=self.fake.get("next").expand(num_envs).clone(),
            # The policy's actions as it wrote them (dtype included), as TorchRL's collectors
            # hand them to the env: a one-hot spec of bools gets the sampler's int64.
            action=self.acted.select(*self.action_keys).expand(num_envs).clone(),
            batch_size=[num_envs],
        )

    def storage(self, num_envs: int, sync_interval: int) -> TensorDictBase:
        row = self.fake.select(*self.root_keys)
        for key in self.policy_keys:
            row.set(key, torch.zeros_like(self.acted.get(key)))
        row.set("next", self.fake.get("next"))
        row.set(("collector", "traj_ids"), torch.zeros((), dtype=torch.int64))
        row.set("policy_version", torch.zeros((), dtype=torch.int64))
        return row.expand(num_envs, sync_interval).clone()
