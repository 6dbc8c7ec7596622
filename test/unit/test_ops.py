"""ATen op coverage: each op compiled by ember (fallback off) and compared to eager."""
import pytest
import torch
import torch.nn.functional as F

from helpers import assert_matches_eager

R = lambda *s: torch.randn(*s)
P = lambda *s: torch.rand(*s) + 0.1  # strictly positive


_bn = torch.nn.BatchNorm2d(4).eval()
with torch.no_grad():
    _bn.running_mean.uniform_(-1, 1)
    _bn.running_var.uniform_(0.5, 2)


_conv = torch.nn.Conv2d(3, 8, 3, padding=1)
_conv_s2 = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, bias=False)
_dwconv = torch.nn.Conv2d(6, 6, 3, padding=1, groups=6)
_conv1x1 = torch.nn.Conv2d(4, 8, 1)
_conv_dil = torch.nn.Conv2d(3, 4, 3, padding=2, dilation=2)
_conv_grouped = torch.nn.Conv2d(4, 6, 3, groups=2)  # keeps torch-mlir's own lowering
_dwconv7 = torch.nn.Conv2d(8, 8, 7, padding=3, groups=8)
_patchify = torch.nn.Conv2d(3, 8, 4, stride=4)  # ViT / ConvNeXt stems
_ln = torch.nn.LayerNorm(16)
_gn = torch.nn.GroupNorm(2, 4)
_emb = torch.nn.Embedding(20, 8)
_lin = torch.nn.Linear(16, 12)

CASES = {
    # elementwise math
    "add": (lambda a, b: a + b, [R(4, 8), R(4, 8)]),
    "sub_broadcast": (lambda a, b: a - b, [R(4, 8), R(8)]),
    "mul": (lambda a, b: a * b, [R(4, 8), R(4, 8)]),
    "div": (lambda a, b: a / b, [R(4, 8), P(4, 8)]),
    "neg": (lambda a: -a, [R(4, 8)]),
    "abs": (torch.abs, [R(4, 8)]),
    "exp": (torch.exp, [R(4, 8)]),
    "log": (torch.log, [P(4, 8)]),
    "sqrt": (torch.sqrt, [P(4, 8)]),
    "rsqrt": (torch.rsqrt, [P(4, 8)]),
    "pow_scalar": (lambda a: a ** 3, [R(4, 8)]),
    "pow_tensor": (torch.pow, [P(4, 8), R(4, 8)]),
    "sin": (torch.sin, [R(4, 8)]),
    "cos": (torch.cos, [R(4, 8)]),
    "tanh": (torch.tanh, [R(4, 8)]),
    "sigmoid": (torch.sigmoid, [R(4, 8)]),
    "erf": (torch.erf, [R(4, 8)]),
    "relu": (torch.relu, [R(4, 8)]),
    "gelu": (F.gelu, [R(4, 8)]),
    "gelu_tanh": (lambda a: F.gelu(a, approximate="tanh"), [R(4, 8)]),
    "silu": (F.silu, [R(4, 8)]),
    "leaky_relu": (F.leaky_relu, [R(4, 8)]),
    "hardswish": (F.hardswish, [R(4, 8)]),
    "clamp": (lambda a: torch.clamp(a, -0.5, 0.5), [R(4, 8)]),
    "floor": (torch.floor, [R(4, 8)]),
    "maximum": (torch.maximum, [R(4, 8), R(4, 8)]),
    "reciprocal": (torch.reciprocal, [P(4, 8)]),
    # comparisons / where
    "gt": (lambda a, b: a > b, [R(4, 8), R(4, 8)]),
    "eq_scalar": (lambda a: (a.round() == 0), [R(4, 8)]),
    "where": (lambda a, b: torch.where(a > 0, a, b), [R(4, 8), R(4, 8)]),
    "masked_fill": (lambda a: a.masked_fill(a < 0, -1.0), [R(4, 8)]),
    # reductions
    "sum": (lambda a: a.sum(), [R(4, 8)]),
    "sum_dim": (lambda a: a.sum(dim=1), [R(4, 8, 3)]),
    "mean": (lambda a: a.mean(dim=-1, keepdim=True), [R(4, 8)]),
    "max_dim": (lambda a: a.max(dim=1).values, [R(4, 8)]),
    "amax": (lambda a: torch.amax(a, dim=0), [R(4, 8)]),
    "argmax": (lambda a: torch.argmax(a, dim=1), [R(4, 8)]),
    "var": (lambda a: a.var(dim=1), [R(4, 8)]),
    "softmax": (lambda a: F.softmax(a, dim=-1), [R(4, 8)]),
    "log_softmax": (lambda a: F.log_softmax(a, dim=1), [R(4, 8)]),
    # matmuls
    "matmul": (torch.matmul, [R(6, 16), R(16, 5)]),
    "mm_batched_broadcast": (torch.matmul, [R(2, 6, 16), R(16, 5)]),
    "bmm": (torch.bmm, [R(3, 6, 16), R(3, 16, 5)]),
    "linear": (_lin, [R(4, 16)]),
    "addmm": (lambda b, x, w: torch.addmm(b, x, w), [R(5), R(6, 16), R(16, 5)]),
    "linear_epilogue": (lambda x: torch.relu(_lin(x)) * 2 + 1, [R(4, 16)]),
    # conv / norms / embedding
    "conv2d": (_conv, [R(2, 3, 8, 8)]),
    "conv2d_stride": (_conv_s2, [R(2, 4, 9, 9)]),
    "conv2d_depthwise": (_dwconv, [R(1, 6, 8, 8)]),
    "conv2d_depthwise_7x7": (_dwconv7, [R(2, 8, 9, 9)]),
    "conv2d_patchify": (_patchify, [R(2, 3, 16, 16)]),
    "conv2d_patchify_cropped": (_patchify, [R(2, 3, 18, 17)]),  # rows/cols past the last patch
    "conv2d_1x1": (_conv1x1, [R(2, 4, 5, 5)]),
    # 64+ pixels, no more output channels than pixels: one GEMM per image
    "conv2d_1x1_per_image": (_conv1x1, [R(3, 4, 9, 9)]),
    "conv2d_1x1_per_image_channels_last":
        (_conv1x1, [R(3, 4, 9, 9).contiguous(memory_format=torch.channels_last)]),
    "conv2d_dilated": (_conv_dil, [R(1, 3, 9, 9)]),
    "conv2d_grouped": (_conv_grouped, [R(1, 4, 7, 7)]),
    "batch_norm": (_bn, [R(2, 4, 5, 5)]),
    "layer_norm": (_ln, [R(3, 5, 16)]),
    "group_norm": (_gn, [R(2, 4, 3, 3)]),
    "embedding": (_emb, [torch.randint(0, 20, (3, 5))]),
    # indexing
    "gather": (lambda a, i: torch.gather(a, 1, i), [R(4, 8), torch.randint(0, 8, (4, 3))]),
    "index_select": (lambda a, i: torch.index_select(a, 0, i), [R(6, 4), torch.tensor([0, 5, 2])]),
    # shapes
    "cat": (lambda a, b: torch.cat([a, b], dim=1), [R(4, 3), R(4, 5)]),
    "stack": (lambda a, b: torch.stack([a, b]), [R(4, 3), R(4, 3)]),
    "split": (lambda a: torch.split(a, 3, dim=1)[1] * 2, [R(4, 8)]),
    "slice": (lambda a: a[:, 1:7:2] + 1, [R(4, 8)]),
    "view": (lambda a: a.view(8, 4) * 2, [R(4, 8)]),
    "reshape": (lambda a: a.reshape(2, -1) + 1, [R(4, 8)]),
    "permute": (lambda a: a.permute(2, 0, 1) * 1.5, [R(2, 3, 4)]),
    "transpose": (lambda a: a.transpose(0, 1) + 1, [R(4, 8)]),
    "expand": (lambda a: a.expand(3, 4, 8) * 1.0 + 0.5, [R(4, 8)]),
    "unsqueeze_squeeze": (lambda a: a.unsqueeze(0).squeeze(0) - 1, [R(4, 8)]),
    "flatten": (lambda a: torch.flatten(a, 1) * 3, [R(2, 3, 4)]),
    # pooling
    "max_pool2d": (lambda a: F.max_pool2d(a, 2), [R(1, 2, 8, 8)]),
    "avg_pool2d": (lambda a: F.avg_pool2d(a, 2), [R(1, 2, 8, 8)]),
    "adaptive_avg_pool2d": (lambda a: F.adaptive_avg_pool2d(a, 1), [R(2, 3, 6, 6)]),
    # dtype
    "to_int_and_back": (lambda a: (a * 10).to(torch.int64).to(torch.float32), [R(4, 8)]),
    "min_dim": (lambda a: a.min(dim=0).values, [R(4, 8)]),
    "prod": (lambda a: a.prod(dim=1), [P(4, 8)]),
    "cumsum": (lambda a: torch.cumsum(a, dim=1), [R(4, 8)]),
    "cumsum_bool": (lambda a: torch.cumsum(a > 0, dim=0), [R(4, 8)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_eager(name):
    fn, inputs = CASES[name]
    assert_matches_eager(fn, *inputs)


def test_coverage_is_broad():
    assert len(CASES) >= 60


def test_1x1_conv_of_big_images_is_one_gemm_per_image_without_transposes():
    """A 1x1 convolution over 9x9 images: (8, 4) x (4, 81) per image reads and writes
    NCHW as it is; the one GEMM over the batch would transpose input and output."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from ember.compiler.capture import decomposition_table

    aten = torch.ops.aten
    for x, per_image in ((R(3, 4, 9, 9), True), (R(3, 4, 5, 5), False), (R(1, 4, 9, 9), False)):
        gm = make_fx(_conv1x1, decomposition_table=decomposition_table(conv="aten"))(x)
        targets = {n.target for n in gm.graph.nodes}
        assert (aten.bmm.default in targets) == per_image, gm.code
        assert (aten.permute.default in targets) != per_image


@pytest.mark.parametrize("conv", ["aten", "ember"])
@pytest.mark.parametrize("name", sorted(k for k in CASES if k.startswith("conv2d")))
def test_convolution_both_ways_forward_and_backward(name, conv):
    """Both convolution paths (ATen's oneDNN, the default; ember's im2col GEMMs) give
    eager's output and gradients (input and weight)."""
    import copy

    import ember

    module, inputs = CASES[name]
    eager, compiled_module = copy.deepcopy(module), copy.deepcopy(module)
    # torch-mlir cannot lower a grouped convolution's backward: with conv="ember" that
    # one op runs through ATen between ember partitions; nothing falls back.
    compiled = ember.compile(compiled_module, options={"fallback": False, "conv": conv})
    x_eager = inputs[0].clone().requires_grad_(True)
    x_compiled = inputs[0].clone().requires_grad_(True)
    expected, actual = eager(x_eager), compiled(x_compiled)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
    grad = torch.randn_like(expected)
    expected.backward(grad)
    actual.backward(grad)
    torch.testing.assert_close(x_compiled.grad, x_eager.grad, rtol=1e-4, atol=1e-4)
    for p, q in zip(compiled_module.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
