"""K-FAC against explicit Kronecker algebra on tiny nets."""

from __future__ import annotations

import copy
import io

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hts_lightning.optim import KFAC
from hts_lightning.optim.kfac import conv_patches, eigen, precondition
from tests.optim.helpers import assert_same


def _fisher_pass(optimizer, net, x):
    with optimizer.fisher_pass():
        logits = net(x).flatten(1)
        sampled = torch.distributions.Categorical(logits=logits).sample()
        fisher_loss = F.cross_entropy(logits, sampled)
        torch.autograd.grad(fisher_loss, list(net.parameters()))


def _grad_matrix(layer):
    grad = layer.weight.grad.reshape(layer.weight.shape[0], -1)
    return torch.cat([grad, layer.bias.grad[:, None]], dim=1)


def _explicit_solve(a, g, grad, damping):
    # vec is column-major: vec(G X A) = (A^T (x) G) vec(X), and A is symmetric.
    kron = torch.kron(a.double(), g.double())
    eye = torch.eye(kron.shape[0], dtype=torch.float64)
    vec = grad.double().T.reshape(-1)
    solution = torch.linalg.solve(kron + damping * eye, vec)
    return solution.reshape(grad.shape[1], grad.shape[0]).T.float()


NETS = {
    "linear": (lambda: nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3)), (16, 3)),
    "conv2d": (
        lambda: nn.Sequential(
            nn.Conv2d(2, 3, 3, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 2 * 2, 3)
        ),
        (8, 2, 6, 6),
    ),
}


@pytest.mark.parametrize("kind", list(NETS))
def test_preconditioned_gradient_is_the_explicit_kronecker_solve(kind):
    torch.manual_seed(0)
    make, shape = NETS[kind]
    net = make()
    optimizer = KFAC(net, lr=0.1, momentum=0.0, damping=0.03, kl_clip=1e9)
    x = torch.randn(shape)
    _fisher_pass(optimizer, net, x)
    net(x).pow(2).mean().backward()
    layers = [m for m in net if isinstance(m, (nn.Linear, nn.Conv2d))]
    before = [(m.weight.detach().clone(), m.bias.detach().clone()) for m in layers]
    grads = [_grad_matrix(m) for m in layers]
    optimizer.step()
    for name, layer, (w0, b0), grad in zip(optimizer.layers, layers, before, grads, strict=True):
        factors = optimizer.factors[name]
        expected = _explicit_solve(factors["A"], factors["G"], grad, 0.03)
        eig_a, eig_g = optimizer._eigen[name]
        torch.testing.assert_close(
            precondition(grad, eig_a, eig_g, 0.03), expected, atol=1e-5, rtol=1e-5
        )
        # The step applied it: w1 = w0 - lr * P (no momentum, KL clip not binding).
        applied = torch.cat(
            [(w0 - layer.weight).reshape(w0.shape[0], -1), (b0 - layer.bias)[:, None]], 1
        )
        torch.testing.assert_close(applied / 0.1, expected, atol=1e-5, rtol=1e-4)


def test_linear_factors_are_the_input_and_output_gradient_covariances():
    torch.manual_seed(1)
    layer = nn.Linear(3, 2)
    optimizer = KFAC(layer, stat_decay=0.0)
    x = torch.randn(5, 3)
    with optimizer.fisher_pass():
        out = layer(x)
        target = torch.randn(5, 2)
        loss = (out - target).pow(2).sum(-1).mean()
        torch.autograd.grad(loss, list(layer.parameters()))
    a = torch.cat([x, torch.ones(5, 1)], 1)
    per_example = 2 * (out.detach() - target)  # d l_n / d s_n
    torch.testing.assert_close(optimizer.factors[""]["A"], a.T @ a / 5)
    torch.testing.assert_close(optimizer.factors[""]["G"], per_example.T @ per_example / 5)


def test_kl_clip_bounds_the_step():
    torch.manual_seed(2)
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3))
    x = torch.randn(16, 3)
    for kl_clip, clipped in ((1e-8, True), (1e9, False)):
        optimizer = KFAC(net, lr=0.5, momentum=0.0, kl_clip=kl_clip)
        _fisher_pass(optimizer, net, x)
        net.zero_grad()
        net(x).pow(2).mean().backward()
        before = [p.detach().clone() for p in net.parameters()]
        grads = [p.grad.clone() for p in net.parameters()]
        optimizer.step()
        steps = [b - p.detach() for b, p in zip(before, net.parameters(), strict=True)]
        # The applied step is lr * nu * P; ACKTR's KL estimate of it, (lr nu)^2 sum(P . g),
        # equals lr * nu * sum(step . g) and must not exceed kl_clip.
        nu = optimizer.last_kl_scale
        kl = 0.5 * nu * sum(float((s * g).sum()) for s, g in zip(steps, grads, strict=True))
        if clipped:
            assert nu < 1.0
            assert kl == pytest.approx(kl_clip, rel=1e-3)
        else:
            assert nu == 1.0 and kl < kl_clip


def test_fisher_pass_leaves_policy_gradient_buffers_untouched():
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3))
    optimizer = KFAC(net)
    x = torch.randn(8, 3)
    net(x).sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    _fisher_pass(optimizer, net, x)
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, net.parameters(), strict=True))
    assert set(optimizer.factors) == {"0", "2"}


def test_unsupported_layer_is_refused_unless_skipped():
    net = nn.Sequential(nn.Embedding(4, 3), nn.Linear(3, 2))
    with pytest.raises(ValueError, match=r"Embedding.*skip="):
        KFAC(net)
    optimizer = KFAC(net, skip=[nn.Embedding])
    assert list(optimizer.layers) == ["1"]


def test_non_finite_statistics_are_skipped_with_a_warning():
    layer = nn.Linear(2, 2)
    optimizer = KFAC(layer)
    x = torch.tensor([[float("nan"), 1.0]])
    with pytest.warns(UserWarning, match="non-finite"), optimizer.fisher_pass():
        layer(x)
    assert "A" not in optimizer.factors.get("", {})


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_momentum_step_converges_to_the_kl_clipped_update(momentum):
    # SGD with momentum at lr * (1 - momentum), as in OpenAI baselines and ikostrikov's ACKTR:
    # with a constant gradient the step tends to lr * nu * P, the step the KL clip bounds,
    # not to lr * nu * P / (1 - momentum).
    torch.manual_seed(4)
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3))
    optimizer = KFAC(net, lr=0.5, momentum=momentum, damping=0.03, kl_clip=1e-4)
    x = torch.randn(16, 3)
    _fisher_pass(optimizer, net, x)  # factors fixed from here on
    net(x).pow(2).mean().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    layers = [net[0], net[2]]
    steps = []
    for _ in range(150):
        for p, g in zip(net.parameters(), grads, strict=True):
            p.grad = g.clone()
        before = [p.detach().clone() for p in net.parameters()]
        optimizer.step()
        steps.append([b - p.detach() for b, p in zip(before, net.parameters(), strict=True)])
    nu = optimizer.last_kl_scale
    assert nu < 1.0  # the clip binds
    expected = []
    for name, layer in zip(optimizer.layers, layers, strict=True):
        preconditioned = precondition(_grad_matrix(layer), *optimizer._eigen[name], 0.03)
        expected += [preconditioned[:, :-1], preconditioned[:, -1]]
    for step, p in zip(steps[-1], expected, strict=True):
        torch.testing.assert_close(step, 0.5 * nu * p, atol=1e-6, rtol=1e-4)
    # ACKTR's KL estimate of the step taken, (lr nu)^2 sum(P . g) = lr * nu * sum(step . g),
    # sits at kl_clip.
    kl = 0.5 * nu * sum(float((s * g).sum()) for s, g in zip(steps[-1], grads, strict=True))
    assert kl == pytest.approx(optimizer.kl_clip, rel=1e-3)


def test_statistics_are_the_live_factors_in_module_order():
    torch.manual_seed(5)
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3))
    optimizer = KFAC(net)
    assert optimizer.statistics() == []
    _fisher_pass(optimizer, net, torch.randn(8, 3))
    stats = optimizer.statistics()
    f = optimizer.factors
    assert [t.shape for t in stats] == [(4, 4), (4, 4), (5, 5), (3, 3)]
    assert all(
        s is t
        for s, t in zip(stats, [f["0"]["A"], f["0"]["G"], f["2"]["A"], f["2"]["G"]], strict=True)
    )


def _through_a_file(state: dict) -> dict:
    """``state`` saved and loaded as a checkpoint holds it (no tensor shared with the source)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def _train_steps(optimizer, net, inputs, seeds):
    for x, seed in zip(inputs, seeds, strict=True):
        torch.manual_seed(seed)  # the Fisher pass samples actions
        _fisher_pass(optimizer, net, x)
        optimizer.zero_grad()
        net(x).flatten(1).pow(2).mean().backward()
        optimizer.step()


@pytest.mark.parametrize("kind", list(NETS))
def test_state_dict_round_trip_continues_bitwise_identically(kind):
    torch.manual_seed(6)
    make, shape = NETS[kind]
    inputs = [torch.randn(shape) for _ in range(10)]
    options = dict(lr=0.2, momentum=0.9, damping=0.03, kl_clip=1e-3, inv_update_interval=4)
    net = make()
    optimizer = KFAC(net, **options)
    # 6 steps: the inverses were refreshed at step 5, the factors have changed since, so the
    # eigendecompositions in use must be carried, not recomputed from the factors.
    _train_steps(optimizer, net, inputs[:6], range(6))
    saved = _through_a_file(optimizer.state_dict())
    assert set(saved) == {"state", "param_groups", "kfac"}
    assert saved["kfac"]["steps"] == 6
    restored_net = make()
    restored_net.load_state_dict(net.state_dict())
    restored = KFAC(restored_net, **options)
    restored.load_state_dict(saved)
    assert_same(restored.state_dict(), optimizer.state_dict())
    # Four more steps each, the third of them refreshing the inverses: bitwise the same.
    _train_steps(optimizer, net, inputs[6:], range(6, 10))
    _train_steps(restored, restored_net, inputs[6:], range(6, 10))
    for p, q in zip(net.parameters(), restored_net.parameters(), strict=True):
        assert torch.equal(p, q)
    assert_same(restored.state_dict(), optimizer.state_dict())
    assert restored.last_kl_scale == optimizer.last_kl_scale


def test_plain_optimizer_state_loads_with_a_warning_and_fresh_factors():
    torch.manual_seed(7)
    make, shape = NETS["linear"]
    net = make()
    optimizer = KFAC(net, lr=0.2)
    _train_steps(optimizer, net, [torch.randn(shape)], [0])
    plain = {k: v for k, v in optimizer.state_dict().items() if k != "kfac"}
    other = KFAC(make(), lr=0.2)
    with pytest.warns(UserWarning, match="start afresh"):
        other.load_state_dict(plain)
    assert other.factors == {} and other._steps == 0
    assert_same(other.state_dict()["state"], optimizer.state_dict()["state"])


def test_state_of_another_model_is_refused():
    make, shape = NETS["linear"]
    net = make()
    optimizer = KFAC(net)
    _train_steps(optimizer, net, [torch.randn(shape)], [0])
    wider = nn.Sequential(nn.Identity(), nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3))
    with pytest.raises(ValueError, match="same model architecture"):
        KFAC(wider).load_state_dict(optimizer.state_dict())


def _reference_patches(x, layer):
    """Patches as ikostrikov's ``_extract_patches`` takes them (pad, ``Tensor.unfold`` over
    height then width, channels outermost), [N, L, C*kh*kw]; zero padding, no dilation."""
    (kh, kw), (sh, sw), (ph, pw) = layer.kernel_size, layer.stride, layer.padding
    x = F.pad(x, (pw, pw, ph, ph))
    x = x.unfold(2, kh, sh).unfold(3, kw, sw)  # [N, C, oh, ow, kh, kw]
    x = x.permute(0, 2, 3, 1, 4, 5)  # [N, oh, ow, C, kh, kw]
    return x.reshape(x.shape[0], x.shape[1] * x.shape[2], -1)


def _sampled_fisher_grads(optimizer, layer, head, x):
    """One Fisher pass through ``layer`` then ``head``: returns d(mean sampled loss)/d(output)."""
    with optimizer.fisher_pass():
        out = layer(x)
        logits = head(out.flatten(1))
        sampled = torch.distributions.Categorical(logits=logits).sample()
        loss = F.cross_entropy(logits, sampled)  # a mean over the batch, as ACKTR's
        (grad_out,) = torch.autograd.grad(loss, [out])
    return grad_out


def test_conv_factors_against_the_baselines_and_ikostrikov_formulas():
    torch.manual_seed(8)
    conv = nn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=1)
    x = torch.randn(5, 2, 7, 6)
    out_h, out_w = conv(x).shape[-2:]
    head = nn.Linear(3 * out_h * out_w, 4)
    optimizer = KFAC(conv, stat_decay=0.0)  # the factors are this batch's
    grad_out = _sampled_fisher_grads(optimizer, conv, head, x)
    ours_a, ours_g = optimizer.factors[""]["A"], optimizer.factors[""]["G"]
    n, positions = x.shape[0], out_h * out_w
    patches = _reference_patches(x, conv).reshape(n * positions, -1)
    ones = torch.ones(n * positions, 1)
    # OpenAI baselines acktr/kfac.py (blockdiag_bias=False, approxT2=False): patches and the
    # homogeneous coordinate divided by Oh*Ow, cov / B; gradients times Oh*Ow and times B,
    # cov / (B*Oh*Ow).
    f = torch.cat([patches, ones], 1) / positions
    baselines_a = f.T @ f / n
    b = grad_out.permute(0, 2, 3, 1).reshape(-1, 3) * positions * n
    baselines_g = b.T @ b / (n * positions)
    # KFC (Grosse & Martens): F ~ L E[a a^T] (x) E[g g^T] over positions and examples.
    torch.testing.assert_close(ours_a, positions * baselines_a)
    torch.testing.assert_close(ours_g, baselines_g / positions)
    torch.testing.assert_close(
        torch.kron(ours_a, ours_g), torch.kron(baselines_a, baselines_g), rtol=1e-5, atol=1e-6
    )
    # ikostrikov a2c_ppo_acktr/algo/kfac.py (fast_cnn=False): the same weight block, the bias
    # split off into its own layer (A = 1, G over the spatial sums of the gradients).
    a = patches / positions
    ikostrikov_a = a.T @ (a / n)
    g = grad_out.permute(0, 2, 3, 1).reshape(-1, 3) * positions * n
    ikostrikov_g = g.T @ (g / (n * positions))
    torch.testing.assert_close(
        torch.kron(ours_a[:-1, :-1], ours_g),
        torch.kron(ikostrikov_a, ikostrikov_g),
        rtol=1e-5,
        atol=1e-6,
    )
    # The preconditioned gradient is the same as with baselines' factors (damping is added to
    # the product of the eigenvalues, which the 1/L moved between factors leaves unchanged).
    grad = torch.randn(3, patches.shape[1] + 1)
    theirs = precondition(grad, eigen(baselines_a), eigen(baselines_g), 0.03)
    torch.testing.assert_close(
        precondition(grad, eigen(ours_a), eigen(ours_g), 0.03), theirs, rtol=1e-4, atol=1e-5
    )


def test_linear_factors_against_the_baselines_formula():
    torch.manual_seed(9)
    layer, head = nn.Linear(3, 4), nn.Linear(4, 2)
    x = torch.randn(6, 3)
    optimizer = KFAC(layer, stat_decay=0.0)
    grad_out = _sampled_fisher_grads(optimizer, layer, head, x)
    f = torch.cat([x, torch.ones(6, 1)], 1)
    b = grad_out * 6  # "assume sampled loss is averaged": times B, cov / B
    torch.testing.assert_close(optimizer.factors[""]["A"], f.T @ f / 6)
    torch.testing.assert_close(optimizer.factors[""]["G"], b.T @ b / 6)


CONVS = {
    "zeros": dict(padding=1),
    "stride-dilation": dict(padding=(2, 1), stride=2, dilation=2),
    "same-even-kernel": dict(kernel_size=(2, 4), padding="same"),
    "valid": dict(padding="valid"),
    "reflect": dict(padding=1, padding_mode="reflect"),
    "circular": dict(padding=(1, 2), padding_mode="circular"),
    "replicate": dict(padding=1, padding_mode="replicate", bias=False),
}


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
@pytest.mark.parametrize("kind", list(CONVS))
def test_conv_patches_reproduce_the_layer_output(kind):
    torch.manual_seed(10)
    options = {"kernel_size": 3, **CONVS[kind]}
    conv = nn.Conv2d(2, 3, **options)
    x = torch.randn(4, 2, 7, 8)
    patches = conv_patches(x, conv)
    out = patches @ conv.weight.reshape(3, -1).T
    if conv.bias is not None:
        out = out + conv.bias
    expected = conv(x)
    torch.testing.assert_close(out.transpose(1, 2).reshape(expected.shape), expected)
    if kind == "zeros":
        torch.testing.assert_close(patches, _reference_patches(x, conv))


def test_grouped_convolution_is_refused_unless_skipped():
    net = nn.Sequential(nn.Conv2d(4, 4, 3, groups=2), nn.Flatten(), nn.Linear(4, 2))
    with pytest.raises(ValueError, match=r"groups=2.*skip="):
        KFAC(net)
    assert list(KFAC(net, skip=["0"]).layers) == ["2"]


@pytest.mark.parametrize("copy_with", ["pickle", "deepcopy"])
def test_a_copy_of_the_model_pickles_and_records_nothing(copy_with):
    # TorchRL's multi-process collectors pickle the policy (layers K-FAC hooks) to their
    # workers; a copy's forward passes must not feed the learner's factors.
    torch.manual_seed(11)
    make, shape = NETS["conv2d"]
    net = make()
    optimizer = KFAC(net, stat_decay=0.5)
    x = torch.randn(shape)
    _fisher_pass(optimizer, net, x)
    before = copy.deepcopy(optimizer.factors)
    if copy_with == "pickle":
        buffer = io.BytesIO()
        torch.save(net, buffer)
        buffer.seek(0)
        twin = torch.load(buffer, weights_only=False)
    else:
        twin = copy.deepcopy(net)
    torch.testing.assert_close(twin(x), net(x))
    _fisher_pass(optimizer, twin, torch.randn(shape))
    assert_same(optimizer.factors, before)
    _fisher_pass(optimizer, net, torch.randn(shape))  # the original still records
    assert not torch.equal(optimizer.factors["0"]["A"], before["0"]["A"])
