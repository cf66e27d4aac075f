"""The policy's step on a fixed-shape chunk of replicas: per-row noise, Gumbel-max on the CPU,
the NaN check, and the optional CUDA graph of the step."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential
from torchrl.envs.utils import ExplorationType, set_exploration_type

from hts_lightning._compat import default_validate_args
from hts_lightning.collectors.core.sampling import (
    gumbel_argmax,
    minus_gumbel,
    noise_width,
    sample_from_uniform,
)
from hts_lightning.collectors.core.views import leaf_keys
from hts_lightning.models.tensor_chain import TensorChain


class PolicyRunner:
    """Runs the inference copy of the policy on a chunk; samples actions from per-row noise."""

    def __init__(
        self,
        policy,
        *,
        device: torch.device,
        exploration_type: ExplorationType,
        cuda_graph: bool = False,
    ):
        if cuda_graph and device.type != "cuda":
            raise ValueError(
                f"cuda_graph=True replays the policy's step as a CUDA graph: it needs inference "
                f"on a CUDA device, got {device}. Use cuda_graph=False on the CPU."
            )
        self.policy = policy
        self.device = device
        self.exploration_type = exploration_type
        self.cuda_graph = cuda_graph
        self._graph: _CapturedStep | None = None
        self.sample_key = None
        self.log_prob_key = None
        self._chain: TensorChain | None = None
        self._eye: torch.Tensor | None = None
        self._gumbel_dtype: torch.dtype | None = None  # see prepare
        if isinstance(policy, ProbabilisticTensorDictSequential) and (
            exploration_type == ExplorationType.RANDOM
        ):
            head = policy.module[-1]
            if len(head.dist_sample_keys) != 1:
                raise ValueError(
                    "HTSCollector samples one action key per policy; this policy samples "
                    f"{head.dist_sample_keys}. Combine them into one action key."
                )
            self.sample_key = head.dist_sample_keys[0]
            self.log_prob_key = head.log_prob_key if head.return_log_prob else None
            self._param_keys = list(head.in_keys)
            # policy.get_dist on tensors where the actor's modules allow: the same bits
            self._chain = TensorChain.of(policy)
        elif exploration_type == ExplorationType.RANDOM and any(
            isinstance(m, ProbabilisticTensorDictModule) for m in policy.modules()
        ):
            raise ValueError(
                "The policy samples inside a nested module, from the global RNG: actions would "
                "depend on worker count and timing. Pass the ProbabilisticActor (a "
                "ProbabilisticTensorDictSequential) itself as the policy, with any preprocessing "
                "inside it, so that HTSCollector samples from per-replica noise."
            )

    def noise_width(self, probe: TensorDictBase) -> int:
        """Uniforms per row this policy needs (0 for a policy that does not sample here)."""
        if self.sample_key is None:
            return 0
        with torch.no_grad():
            return noise_width(self.policy.get_dist(probe.to(self.device)))

    @torch.no_grad()
    def prepare(self, chunk: TensorDictBase) -> None:
        """Learn, from one call on ``chunk`` (any values), whether the engine's batches can
        take their Gumbel noise from :meth:`batch_noise`: a chain's categorical head of two
        logits or more on the CPU (not on a device: its ``log`` may round otherwise)."""
        key = None if self._chain is None else self._chain.one_hot_logits
        if self.device.type != "cpu" or key is None:
            return
        logits = self._chain.values(chunk)[key]
        if logits.shape[-1] >= 2:  # TensorChain.one_hot's case
            self._gumbel_dtype = logits.dtype

    def batch_noise(self, uniform: torch.Tensor | None) -> torch.Tensor | None:
        """The noise :meth:`act` takes, for a batch's uniforms at once: after :meth:`prepare`
        found a categorical head, minus the Gumbel noise in the logits' dtype (elementwise:
        the numbers ``gumbel_argmax`` computes chunk by chunk; once a batch it saves ~10 of a
        CartPole chunk's ~87 us); else the uniforms."""
        if uniform is None or self._gumbel_dtype is None:
            return uniform
        return minus_gumbel(uniform, self._gumbel_dtype)

    @torch.no_grad()
    def __call__(self, td: TensorDictBase, uniform: torch.Tensor | None) -> TensorDictBase:
        """The chunk ``td`` (on the CPU) acted on; the result on the CPU."""
        acted = self.act(td, self.batch_noise(uniform))
        if isinstance(acted, TensorDictBase):
            return acted
        return TensorDict(acted, batch_size=td.batch_size)

    @property
    def nan_check_per_batch(self) -> bool:
        """Whether the engine may check for NaN once a batch, on the stored parameters:
        after :meth:`prepare` found a categorical head, a NaN logit still picks an action in
        range (Gumbel-max's argmax), so nothing breaks before the batch's end, where the same
        error is raised (one ``isnan`` a batch instead of ~4 us a CartPole chunk)."""
        return self._gumbel_dtype is not None

    def refuse_nan(self, acted) -> None:
        """The NaN check of :meth:`act` on ``acted`` (a chunk's result or a batch), for torch's
        distribution argument checks (torchrl turns them off when imported): only NaN, as
        torch's check of real parameters; a logit of -inf (a masked action) is valid."""
        if self.sample_key is None:
            return
        for key in self._param_keys:
            value = acted.get(key, None)
            if value is not None and torch.is_floating_point(value) and value.isnan().any():
                raise ValueError(
                    f"The policy's action distribution got NaN {key!r}: its weights or the "
                    "observations it acted on hold NaN (a diverged update, or an env emitting "
                    "NaN). Check torch.isfinite(p).all() for the policy's parameters and the "
                    "env's observations; lower the learning rate or clip gradients if the "
                    "weights diverged."
                )

    def act(self, td: TensorDictBase, noise: torch.Tensor | None, *, check_nan: bool = True):
        """:meth:`__call__`'s result as the engine reads it (``get(key)``), from the chunk's
        rows of :meth:`batch_noise`: on the CPU with a :class:`TensorChain`, a dict of the
        policy's tensors, with no TensorDict built for a result read key by key once (~6 of
        a CartPole chunk's ~87 us). Call it under ``torch.no_grad()``: the engine enters it
        once a batch, not once a chunk. ``check_nan=False``: the caller checks the batch
        (:attr:`nan_check_per_batch`)."""
        if self.device.type == "cpu" and self._chain is not None:
            acted = self._chain_step(td, noise)
        else:
            acted = self._on_device(td, noise)
        if check_nan:  # on the CPU: no host sync inside a CUDA graph
            self.refuse_nan(acted)
        return acted

    def _on_device(self, td: TensorDictBase, uniform: torch.Tensor | None) -> TensorDictBase:
        if self.device.type == "cpu":  # no walk over the chunk for nothing
            return self._step(td, uniform)
        if self.cuda_graph:
            if self._graph is None:  # captured at the first call, for the run's fixed shape
                self._graph = _CapturedStep(self._step, td, uniform, self.device)
            return self._graph(td, uniform).to("cpu")
        # From the engine's pinned chunk buffers the copies to the device do not block.
        td = td.to(self.device, non_blocking=True)
        if uniform is not None:
            uniform = uniform.to(self.device, non_blocking=True)
        return self._step(td, uniform).to("cpu")

    def _step(self, td: TensorDictBase, uniform: torch.Tensor | None) -> TensorDictBase:
        """The policy's step where ``td`` and ``uniform`` are (the inference device); ``td``
        itself is left as it is (the engine reuses it), the result holds the policy's keys."""
        if self.sample_key is None:
            with set_exploration_type(self.exploration_type):
                return self.policy(td.copy())
        if self._chain is not None:
            return TensorDict(self._chain_step(td, uniform), batch_size=td.batch_size)
        td = td.copy()  # the policy adds its keys to a shallow copy
        dist = self.policy.get_dist(td)
        return td.update(self._sample(dist, uniform))

    def _chain_step(self, td: TensorDictBase, uniform: torch.Tensor) -> dict:
        """The step of a :class:`TensorChain` policy: its modules' outputs and the sample
        (``uniform``: minus the Gumbel noise where :meth:`prepare` found a categorical head)."""
        values = self._chain.values(td)
        if self._gumbel_dtype is not None:  # gumbel_argmax, its noise computed for the batch
            one_hot = self._chain.one_hot(values, choose=lambda p: (p - uniform).argmax(-1))
        else:
            one_hot = self._chain.one_hot(values, choose=lambda p: gumbel_argmax(p, uniform))
        if one_hot is None:
            sampled = self._sample(self._chain.dist(values), uniform)
        else:  # TorchRL's OneHotCategorical's sample and log_prob, without building it
            log_probs, index, log_prob = one_hot
            sampled = {self.sample_key: self._one_hot(index, log_probs.shape[-1])}
            if self.log_prob_key is not None:
                sampled[self.log_prob_key] = log_prob
        return {**values, **sampled}

    def _one_hot(self, index: torch.Tensor, num_classes: int) -> torch.Tensor:
        """``torch.nn.functional.one_hot(index, num_classes)`` (int64) as rows of an identity:
        the same values without one_hot's checks of the indices' range (two reductions a
        chunk; Gumbel-max's argmax is in range)."""
        if self._eye is None or self._eye.shape[0] != num_classes:
            self._eye = torch.eye(num_classes, dtype=torch.int64, device=index.device)
        return self._eye[index]

    def _sample(self, dist, uniform: torch.Tensor) -> dict:
        action = sample_from_uniform(dist, uniform)
        if self.log_prob_key is None:
            return {self.sample_key: action}
        return {self.sample_key: action, self.log_prob_key: dist.log_prob(action)}


class _CapturedStep:
    """A policy step on one fixed chunk shape, captured once as a CUDA graph and replayed.

    Follows torch's documented recipe (``torch.cuda.graphs``): warm-up iterations on a side
    stream, capture into static input and output tensors, then per call copy the chunk into
    the static inputs and replay. The capture is thread-local, so a learner working in another
    thread does not break it. Distribution argument checks (host syncs, which a capture cannot
    hold) are off while capturing; replays run no Python at all.
    """

    def __init__(self, step, td: TensorDictBase, uniform, device: torch.device):
        self._inputs = td.to(device).clone()
        self._uniform = None if uniform is None else uniform.to(device).clone()
        self._keys = leaf_keys(self._inputs)
        validate = default_validate_args()
        torch.distributions.Distribution.set_default_validate_args(False)
        try:
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                for _ in range(3):
                    step(self._inputs.clone(False), self._uniform)
            torch.cuda.current_stream(device).wait_stream(side)
            self._graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self._graph, capture_error_mode="thread_local"):
                self._outputs = step(self._inputs.clone(False), self._uniform)
        except RuntimeError as error:
            raise RuntimeError(
                "cuda_graph=True: the policy's step could not be captured as a CUDA graph "
                f"({error}). Pass cuda_graph=False."
            ) from error
        finally:
            torch.distributions.Distribution.set_default_validate_args(validate)

    def __call__(self, td: TensorDictBase, uniform) -> TensorDictBase:
        if td.batch_size != self._inputs.batch_size:
            raise RuntimeError(
                f"The CUDA graph was captured for chunks of {tuple(self._inputs.batch_size)} "
                f"rows, got {tuple(td.batch_size)}: the inference shape must stay fixed."
            )
        for key in self._keys:
            self._inputs.get(key).copy_(td.get(key), non_blocking=True)
        if uniform is not None:
            self._uniform.copy_(uniform, non_blocking=True)
        self._graph.replay()
        return self._outputs
