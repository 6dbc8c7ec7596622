"""Layer norm / softmax / RMS norm as ONE loop over rows (ember-fuse-reduction-rows), and
ATen convolutions handed their inputs in their own layout (compiler/extern_layouts.py)."""
import pytest
import operator

import torch
import torch.nn.functional as F

from ember.compiler import extern_layouts
from ember.compiler.fusion import fuse
from ember.targets.cpu.reduction_rows import fuse_reduction_rows
from helpers import compile_strict, linalg_module


def _layer_norm_gelu(x, w, b):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))


def _rms_norm(x, w, b):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w + b


def _softmax_scaled(x, w, b):
    return torch.softmax(x * 0.125 + b, dim=-1) * w


def _channels_first_layer_norm(x, w, b):
    # wav2vec2 / ConvNeXt: normalise over channels of a (N, C, T) tensor via transposes
    return F.layer_norm(x.transpose(1, 2), (x.shape[1],), w[: x.shape[1]],
                        b[: x.shape[1]]).transpose(1, 2)


def _softmax_dim1(x, w, b):
    return torch.softmax(x, dim=1) + b


CASES = [_layer_norm_gelu, _rms_norm, _softmax_scaled, _channels_first_layer_norm,
         _softmax_dim1]


def test_layer_norm_becomes_one_loop_over_rows():
    w, b = torch.randn(64), torch.randn(64)
    module = linalg_module(lambda x: _layer_norm_gelu(x, w, b), torch.randn(4, 32, 64))
    fuse(module)
    assert str(module).count("linalg.generic") >= 3  # mean, variance, normalise+gelu
    fuse_reduction_rows(module.operation)
    text = str(module)
    assert text.count("scf.forall (") == 1
    body = text[text.index("scf.forall ("):]
    assert text.count("linalg.generic") == body.count("linalg.generic")  # all inside
    assert "tensor<1x1x64xf32>" in body and "erf" in body


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__.strip("_"))
def test_row_chains_match_eager(fn, grad):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 24, 40, generator=g) * 2 + 0.5
    w, b = torch.randn(40, generator=g), torch.randn(40, generator=g)
    x[1, 5, 7] = float("nan")  # one row of NaN, the others untouched
    inputs = [x.clone().requires_grad_(grad), w.clone().requires_grad_(grad), b.clone()]
    with torch.set_grad_enabled(grad):
        expected = fn(x, w, b)
        actual = compile_strict(fn)(*inputs)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert torch.isnan(actual).any() and not torch.isnan(actual[0]).any()
    if grad:
        cot = torch.randn_like(expected).nan_to_num_(0)
        ref = [x.clone().requires_grad_(), w.clone().requires_grad_()]
        torch.autograd.backward(fn(*ref, b), cot)
        torch.autograd.backward(actual, cot)
        for a, e in zip(inputs[:2], ref):
            torch.testing.assert_close(a.grad, e.grad, rtol=1e-4, atol=1e-4, equal_nan=True)


def test_row_chain_after_a_transposed_producer():
    """ConvNeXt's stem: a patchify conv (an im2col GEMM whose epilogue transposes) and a
    channels-first layer norm. A fused producer sharing the loop's output buffer wrote
    its rows across other iterations' results (values off by 7)."""
    g = torch.Generator().manual_seed(0)
    w, b, cb = (torch.randn(8, generator=g) for _ in range(3))
    weight = torch.randn(8, 3, 4, 4, generator=g) * 0.3

    def stem(x):
        y = F.conv2d(x, weight, cb, stride=4).permute(0, 2, 3, 1)
        return F.layer_norm(y, (8,), w, b).permute(0, 3, 1, 2)

    x = torch.randn(2, 3, 32, 32, generator=g)
    with torch.no_grad():
        torch.testing.assert_close(compile_strict(stem)(x), stem(x), rtol=1e-5, atol=1e-5)


def test_row_chain_on_non_contiguous_input():
    x = torch.randn(40, 24, 3).permute(2, 1, 0)  # (3, 24, 40), last dim strided
    w, b = torch.randn(40), torch.randn(40)
    with torch.no_grad():
        torch.testing.assert_close(compile_strict(_layer_norm_gelu)(x, w, b),
                                   _layer_norm_gelu(x, w, b), rtol=1e-5, atol=1e-5)


def test_conv_gets_its_input_contiguous_from_the_producing_kernel(monkeypatch):
    """wav2vec2's feature encoder: conv1d of a transposed layer norm. The kernel making
    the norm's output writes it contiguous, so ATen's convolution copies nothing."""
    conv1, conv2 = torch.nn.Conv1d(8, 16, 3), torch.nn.Conv1d(16, 16, 3)
    norm = torch.nn.LayerNorm(16)

    def fn(x):
        y = conv1(x)
        y = F.gelu(norm(y.transpose(1, 2)).transpose(1, 2))
        return conv2(y)

    inserted = []
    real = extern_layouts.conv_inputs_in_conv_layout
    monkeypatch.setattr(extern_layouts, "conv_inputs_in_conv_layout",
                        lambda gm, extern: inserted.append(real(gm, extern)) or inserted[-1])
    x = torch.randn(2, 8, 50)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            torch.testing.assert_close(compile_strict(fn)(x), fn(x), rtol=1e-4, atol=1e-4)
    assert inserted and max(inserted) >= 1


def test_a_1x1_conv_of_a_contiguous_model_gets_no_channels_last_copy(monkeypatch):
    """A (C, K, 1, 1) weight is channels-last contiguous as well as contiguous; ATen
    convolves it contiguous (its suggested format), so the kernel feeding a 1x1 strided
    convolution (RegNet's and ResNet's shortcuts) writes no transposed copy for it."""
    conv = torch.nn.Conv2d(8, 16, 1, stride=2)
    norm = torch.nn.BatchNorm2d(8).eval()

    def fn(x):
        return conv(torch.relu(norm(x)))

    inserted = []
    real = extern_layouts.conv_inputs_in_conv_layout
    monkeypatch.setattr(extern_layouts, "conv_inputs_in_conv_layout",
                        lambda gm, extern: inserted.append(real(gm, extern)) or inserted[-1])
    x = torch.randn(2, 8, 10, 10)
    with torch.no_grad():
        out = compile_strict(fn)(x)
        torch.testing.assert_close(out, fn(x), rtol=1e-5, atol=1e-5)
    assert out.is_contiguous() and inserted == [0]


def test_a_kernel_feeding_a_channels_last_conv_and_a_residual_writes_one_layout(monkeypatch):
    """A residual block of a channels-last model: the kernel making the block's input
    feeds the convolution (which wants channels-last) and the residual add. It writes
    that one channels-last tensor, not a contiguous copy beside it."""
    from ember.compiler import graph_compiler

    torch.manual_seed(0)
    conv1 = torch.nn.Conv2d(8, 8, 3, padding=1).to(memory_format=torch.channels_last)
    conv2 = torch.nn.Conv2d(8, 8, 3, padding=1).to(memory_format=torch.channels_last)
    norm = torch.nn.BatchNorm2d(8).eval()

    def fn(x):
        h = torch.relu(conv1(x)).contiguous()  # made contiguous, as a max pool's decomposition does
        return conv2(torch.relu(norm(conv2(h)) + h))

    fused = []
    real = graph_compiler._try_partitioned
    monkeypatch.setattr(graph_compiler, "_try_partitioned",
                        lambda *a: (lambda r: fused.append(r[0]) or r)(real(*a)))
    x = torch.randn(2, 8, 10, 10).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        torch.testing.assert_close(compile_strict(fn)(x), fn(x), rtol=1e-4, atol=1e-4)
    partitions = [n for n in fused[0].graph.nodes
                  if n.op == "call_module" and n.target.startswith("ember_")]
    assert partitions
    for node in partitions:  # one result each: no getitem picks a second layout
        assert not any(u.target is operator.getitem for u in node.users), node.target
