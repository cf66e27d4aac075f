"""K-FAC (Martens & Grosse 2015; KFC for convolutions, Grosse & Martens 2016) with ACKTR's
KL-clipped step (Wu et al. 2017), for ``nn.Linear`` and ``nn.Conv2d`` layers.

The algebra is in small functions on tensors; :class:`KFAC` is a thin optimizer around them.
For a layer with weight matrix W ([out, in], the bias as an extra input column), the Fisher
block is approximated by A (x) G, with A = E[a a^T] over layer inputs a (a 1 appended for the
bias) and G = E[g g^T] over gradients g of the sampled-Fisher loss with respect to the layer's
outputs. The preconditioned gradient solves (A (x) G + damping * I) vec(P) = vec(grad), which
in the eigenbases of A and G is an elementwise division.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["KFAC"]


def _conv_padding(layer: nn.Conv2d) -> tuple[int, int, int, int]:
    """The layer's padding as ``F.pad`` takes it (left, right, top, bottom), as the layer pads:
    ``"same"`` puts the odd pixel of an even total on the right/bottom, as PyTorch does."""
    if layer.padding == "valid":
        return (0, 0, 0, 0)
    if layer.padding == "same":
        total_h, total_w = (
            d * (k - 1) for d, k in zip(layer.dilation, layer.kernel_size, strict=True)
        )
        return (total_w // 2, total_w - total_w // 2, total_h // 2, total_h - total_h // 2)
    pad_h, pad_w = layer.padding
    return (pad_w, pad_w, pad_h, pad_h)


def conv_patches(inputs: torch.Tensor, layer: nn.Conv2d) -> torch.Tensor:
    """The input patches the convolution multiplies its weight with, [N, L, C*kh*kw] for L
    output positions, in the weight's (C, kh, kw) order, padded as the layer pads (zeros,
    reflect, replicate or circular): ``patches @ weight.reshape(out, -1).T + bias`` is the
    layer's output."""
    padding = _conv_padding(layer)
    if any(padding):
        mode = "constant" if layer.padding_mode == "zeros" else layer.padding_mode
        inputs = F.pad(inputs, padding, mode=mode)
    patches = F.unfold(inputs, layer.kernel_size, dilation=layer.dilation, stride=layer.stride)
    return patches.transpose(1, 2)


def input_factor(inputs: torch.Tensor, layer: nn.Module) -> torch.Tensor:
    """A = E[a a^T] over the layer's input vectors (for a convolution: over its patches, every
    example and output position), with the bias as a homogeneous coordinate (a 1) last."""
    if isinstance(layer, nn.Conv2d):
        patches = conv_patches(inputs, layer)
        vectors = patches.reshape(-1, patches.shape[-1])
    else:
        vectors = inputs.reshape(-1, inputs.shape[-1])
    if layer.bias is not None:
        vectors = torch.cat([vectors, vectors.new_ones(vectors.shape[0], 1)], dim=1)
    return vectors.T @ vectors / vectors.shape[0]


def output_factor(grad_outputs: torch.Tensor, layer: nn.Module) -> torch.Tensor:
    """G = E_n[sum_t g_{n,t} g_{n,t}^T] over per-example output gradients g (one position t for
    a Linear layer; every spatial position for a convolution).

    For a convolution with L output positions this is KFC's approximation (Grosse & Martens
    2016: spatially uncorrelated, homogeneous derivatives), F ~ L * mean(a a^T) (x)
    mean(g g^T), with the L in G. OpenAI baselines' ``acktr/kfac.py`` and ikostrikov's
    ``algo/kfac.py`` divide the patches by L and multiply the gradients by L instead: their A
    is ours / L and their G ours * L, the same Kronecker product, and since the damping is
    added to the product of the eigenvalues the same preconditioned step (tested against both
    formulas in ``tests/optim/test_kfac.py``). ikostrikov keeps the bias as a separate
    block; baselines by default, and we, keep it as the homogeneous coordinate of A."""
    batch = grad_outputs.shape[0]
    if isinstance(layer, nn.Conv2d):
        vectors = grad_outputs.permute(0, 2, 3, 1).reshape(-1, grad_outputs.shape[1])
    else:
        vectors = grad_outputs.reshape(-1, grad_outputs.shape[-1])
    # The loss is a mean over the batch: multiply back to per-example gradients.
    vectors = vectors * batch
    return vectors.T @ vectors / batch


def eigen(factor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (clamped at 0: a covariance has no negative ones) and eigenvectors."""
    values, vectors = torch.linalg.eigh(factor.double())
    return values.clamp_min(0).to(factor.dtype), vectors.to(factor.dtype)


def precondition(
    grad: torch.Tensor,
    eig_a: tuple[torch.Tensor, torch.Tensor],
    eig_g: tuple[torch.Tensor, torch.Tensor],
    damping: float,
) -> torch.Tensor:
    """P with (A (x) G + damping * I) vec(P) = vec(grad), for grad of shape [out, in]."""
    values_a, vectors_a = eig_a
    values_g, vectors_g = eig_g
    rotated = vectors_g.T @ grad @ vectors_a
    rotated = rotated / (values_g[:, None] * values_a[None, :] + damping)
    return vectors_g @ rotated @ vectors_a.T


def kl_clip_scale(
    preconditioned: Iterable[torch.Tensor], grads: Iterable[torch.Tensor], lr: float, kl_clip: float
) -> float:
    """ACKTR's trust region: scale nu = min(1, sqrt(kl_clip / (lr^2 * sum(P . grad))))."""
    quadratic = (
        sum(float((p * g).sum()) for p, g in zip(preconditioned, grads, strict=True)) * lr**2
    )
    if not math.isfinite(quadratic) or quadratic <= 0:
        return 1.0
    return min(1.0, math.sqrt(kl_clip / quadratic))


def _matrix(layer: nn.Module) -> torch.Tensor:
    """The layer's gradient as [out, in] with the bias gradient as the last column."""
    grad = layer.weight.grad.reshape(layer.weight.shape[0], -1)
    if layer.bias is not None:
        grad = torch.cat([grad, layer.bias.grad[:, None]], dim=1)
    return grad


def _map_kfac_state(kfac: dict, convert) -> dict:
    """K-FAC's state (factors, eigendecompositions, steps) with ``convert(layer name, tensor)``
    applied to every tensor."""
    return {
        "factors": {
            name: {kind: convert(name, t) for kind, t in factors.items()}
            for name, factors in kfac["factors"].items()
        },
        "eigen": {
            name: tuple(tuple(convert(name, t) for t in pair) for pair in pairs)
            for name, pairs in kfac["eigen"].items()
        },
        "steps": kfac["steps"],
    }


class _StatisticsHook:
    """KFAC's forward hook on a layer: inside :meth:`KFAC.fisher_pass` it records the layer's
    input factor, and its output factor through a hook on the output's gradient.

    A copy of the hook (the model deep-copied or pickled, e.g. a policy sent to a collector's
    worker process) is inert: the copy's statistics are not the learner's, and the optimizer
    stays behind.
    """

    def __init__(self, optimizer: KFAC | None, name: str):
        self.optimizer = optimizer
        self.name = name

    def __reduce__(self):
        return (_StatisticsHook, (None, self.name))

    def __call__(self, layer: nn.Module, args: tuple, output: torch.Tensor) -> None:
        optimizer = self.optimizer
        if optimizer is None or not optimizer._recording:
            return
        name = self.name
        optimizer._update_factor(name, "A", input_factor(args[0].detach(), layer))
        if output.requires_grad:

            def grad_hook(grad):
                optimizer._update_factor(name, "G", output_factor(grad.detach(), layer))

            output.register_hook(grad_hook)


class KFAC(torch.optim.Optimizer):
    """K-FAC with momentum and ACKTR's KL clip, over a model's Linear and Conv2d layers.

    Statistics come from :meth:`fisher_pass`: inside it, a backward of a sampled-Fisher loss
    (actions sampled from the policy; the value output with Gaussian noise) records the layer
    inputs and output gradients into running averages with ``stat_decay``. Use
    ``torch.autograd.grad`` there so that the policy-gradient ``.grad`` buffers stay untouched.
    ``step()`` then preconditions each layer's ``.grad`` with the damped inverse of A (x) G
    (eigendecompositions refreshed every ``inv_update_interval`` steps), scales all updates by
    the KL clip, and applies SGD with momentum at the learning rate ``lr * (1 - momentum)``,
    as OpenAI baselines and ikostrikov's ACKTR do: the momentum buffer sums the past updates
    to ``1 / (1 - momentum)`` times their size, so a constant KL-clipped update ``lr * nu * P``
    is also the step the parameters take in the steady state, and the trust region bounds it.
    :meth:`state_dict` carries the factors, the eigendecompositions and the step count beside
    the momentum buffers, so that a run resumed from a checkpoint continues exactly.

    Args:
        model: the module whose Linear/Conv2d layers are preconditioned. Any other layer with
            parameters is an error unless its type or qualified name is in ``skip``; skipped
            layers get plain SGD-with-momentum steps.

    Example:
        >>> net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        >>> optimizer = KFAC(net, lr=0.1)
        >>> x = torch.randn(8, 3)
        >>> with optimizer.fisher_pass():
        ...     logits = net(x)
        ...     sampled = torch.distributions.Categorical(logits=logits).sample()
        ...     fisher_loss = F.cross_entropy(logits, sampled)
        ...     _ = torch.autograd.grad(fisher_loss, list(net.parameters()))
        >>> net(x).pow(2).mean().backward()
        >>> optimizer.step()
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        lr: float = 0.25,
        momentum: float = 0.9,
        stat_decay: float = 0.99,
        damping: float = 1e-2,
        kl_clip: float = 1e-3,
        weight_decay: float = 0.0,
        inv_update_interval: int = 10,
        skip: Iterable[type | str] = (),
    ):
        skip = tuple(skip)
        self.layers: dict[str, nn.Module] = {}
        for name, module in model.named_modules():
            if any(name == s or (isinstance(s, type) and isinstance(module, s)) for s in skip):
                continue
            if isinstance(module, nn.Conv2d) and module.groups != 1:
                raise ValueError(
                    f"KFAC's Conv2d factors assume groups=1; {name!r} has groups="
                    f"{module.groups} (a grouped or depthwise convolution). Add its name to "
                    "skip=... to give it plain SGD-with-momentum steps."
                )
            if isinstance(module, (nn.Linear, nn.Conv2d)):
                self.layers[name] = module
            elif list(module.parameters(recurse=False)):
                raise ValueError(
                    f"KFAC preconditions Linear and Conv2d layers; {name!r} "
                    f"({type(module).__name__}) has parameters. Add its type or name to "
                    "skip=... to give it plain SGD-with-momentum steps."
                )
        super().__init__(
            list(model.parameters()),
            dict(lr=lr, momentum=momentum, weight_decay=weight_decay),
        )
        self.stat_decay = stat_decay
        self.damping = damping
        self.kl_clip = kl_clip
        self.inv_update_interval = inv_update_interval
        self.factors: dict[str, dict[str, torch.Tensor]] = {}
        self._eigen: dict[str, tuple] = {}
        self._steps = 0
        self._recording = False
        for name, layer in self.layers.items():
            layer.register_forward_hook(_StatisticsHook(self, name))

    def _update_factor(self, name: str, kind: str, value: torch.Tensor) -> None:
        factors = self.factors.setdefault(name, {})
        if not torch.isfinite(value).all():
            warnings.warn(f"KFAC: non-finite {kind} statistics for {name!r} skipped", stacklevel=2)
            return
        if kind not in factors:
            factors[kind] = value.clone()
        else:
            factors[kind].mul_(self.stat_decay).add_(value, alpha=1 - self.stat_decay)

    @contextmanager
    def fisher_pass(self) -> Iterator[None]:
        """Record Fisher statistics from the forward and backward passes run inside."""
        self._recording = True
        try:
            yield
        finally:
            self._recording = False

    def statistics(self) -> list[torch.Tensor]:
        """The running factors themselves (not copies), A then G for each layer in the model's
        module order, for the layers that have both: the same order on every process with the
        same model, so that a data-parallel strategy can average them in place (before
        ``step()``, which refreshes the inverses from them)."""
        return [
            self.factors[name][kind]
            for name in self.layers
            if {"A", "G"} <= self.factors.get(name, {}).keys()
            for kind in ("A", "G")
        ]

    def state_dict(self) -> dict:
        """The standard optimizer state (momentum buffers, param groups) plus a ``"kfac"`` entry:
        the running factors, the eigendecompositions in use (refreshed only every
        ``inv_update_interval`` steps, so not recomputable from the factors) and the step count.
        Loading it into a K-FAC optimizer over the same model makes the next steps bitwise
        identical to those of this one. The tensors are copies, as a checkpoint holds them."""
        state = super().state_dict()
        kfac = {"factors": self.factors, "eigen": self._eigen, "steps": self._steps}
        state["kfac"] = _map_kfac_state(kfac, lambda name, tensor: tensor.clone())
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Load :meth:`state_dict`'s output. A plain optimizer state without the ``"kfac"`` entry
        (a checkpoint written before K-FAC saved it) loads with a warning: the factors and the
        step count start afresh, so the run is not an exact continuation."""
        state_dict = dict(state_dict)
        kfac = state_dict.pop("kfac", None)
        if kfac is not None:
            unknown = (set(kfac["factors"]) | set(kfac["eigen"])) - set(self.layers)
            if unknown:
                raise ValueError(
                    f"The K-FAC state has factors for layers {sorted(unknown)} that this "
                    f"optimizer's model does not have (its layers: {sorted(self.layers)}). "
                    "Load it into a K-FAC optimizer over the same model architecture."
                )
        super().load_state_dict(state_dict)
        if kfac is None:
            warnings.warn(
                "KFAC.load_state_dict: no 'kfac' entry (factors, eigendecompositions, step "
                "count) in the state; they start afresh and the run does not continue exactly.",
                stacklevel=2,
            )
            self.factors, self._eigen, self._steps = {}, {}, 0
            return

        def place(name: str, tensor: torch.Tensor) -> torch.Tensor:
            weight = self.layers[name].weight
            return tensor.to(device=weight.device, dtype=weight.dtype, copy=True)

        kfac = _map_kfac_state(kfac, place)
        self.factors, self._eigen, self._steps = kfac["factors"], kfac["eigen"], int(kfac["steps"])

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:  # Lightning passes one even in manual optimization
            with torch.enable_grad():
                loss = closure()
        if self._steps % self.inv_update_interval == 0 or not self._eigen:
            for name, factors in self.factors.items():
                if "A" in factors and "G" in factors:
                    self._eigen[name] = (eigen(factors["A"]), eigen(factors["G"]))
        self._steps += 1
        updates: dict[torch.Tensor, torch.Tensor] = {}
        pairs = []
        for name, layer in self.layers.items():
            if layer.weight.grad is None or name not in self._eigen:
                continue
            grad = _matrix(layer)
            preconditioned = precondition(grad, *self._eigen[name], self.damping)
            pairs.append((preconditioned, grad))
            weight_columns = layer.weight[0].numel()
            updates[layer.weight] = preconditioned[:, :weight_columns].reshape(layer.weight.shape)
            if layer.bias is not None:
                updates[layer.bias] = preconditioned[:, -1]
        group = self.param_groups[0]
        scale = kl_clip_scale(
            [p for p, _ in pairs], [g for _, g in pairs], group["lr"], self.kl_clip
        )
        self.last_kl_scale = scale
        for p in group["params"]:
            if p.grad is None:
                continue
            update = updates[p] * scale if p in updates else p.grad
            if group["weight_decay"]:
                update = update + group["weight_decay"] * p
            buffer = self.state[p].get("momentum")
            if buffer is None:
                buffer = self.state[p]["momentum"] = update.clone()
            else:
                buffer.mul_(group["momentum"]).add_(update)
            p.add_(buffer, alpha=-group["lr"] * (1 - group["momentum"]))
        return loss
