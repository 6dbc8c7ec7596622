"""Max pooling with indices as ATen computes them (compiler/max_pool_indices.py): torch-
mlir's lowering gave index -1 for a window holding NaN and the padding's position for an
all -inf window, so the gradient of a NaN window was dropped; integer inputs failed."""
import pytest
import torch
import torch.nn.functional as F

import ember
from ember.compiler.fusion import fuse
from helpers import linalg_module

# (kernel, stride, padding, dilation, ceil_mode, spatial size): ResNet's stem pool, a
# ceil_mode pool whose last window passes the padding, dilation, a 1x1 window, 3-d
_GEOMETRIES = [
    (3, 2, 1, 1, False, (9, 9)),
    ((2, 4), (2, 2), (1, 0), (2, 1), True, (7, 9)),
    (3, 2, 0, 1, True, (6, 7)),
    ((1, 1), (1, 2), 0, 1, True, (3, 6)),
    ((2, 3, 2), (1, 2, 2), (1, 1, 0), 1, True, (5, 6, 4)),
]


def _odd_input(shape, seed):
    """Random values with ties, NaN (several per window now and then) and -inf."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-3, 4, shape, generator=g).float() + torch.randn(shape, generator=g) * \
        (torch.rand(shape, generator=g) < 0.5)
    mark = torch.rand(shape, generator=g)
    x[mark < 0.1] = float("nan")
    x[(mark > 0.1) & (mark < 0.3)] = float("-inf")
    return x


@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("geometry", _GEOMETRIES, ids=lambda g: f"{g[0]}-{g[4]}-{len(g[5])}d")
def test_max_pool_indices_are_aten_s(geometry, dynamic):
    kernel, stride, padding, dilation, ceil_mode, size = geometry
    pool = F.max_pool2d if len(size) == 2 else F.max_pool3d

    def fn(x):
        return pool(x, kernel, stride, padding, dilation, ceil_mode=ceil_mode,
                    return_indices=True)

    compiled = ember.compile(fn, dynamic=dynamic, options={"fallback": False})
    for seed, batch in enumerate((2, 3)):
        x = _odd_input((batch, 3) + size, seed)
        if batch == 3:
            x = x.transpose(0, 1).contiguous().transpose(0, 1)  # not contiguous
        want, got = fn(x), compiled(x)
        torch.testing.assert_close(got[0], want[0], equal_nan=True, rtol=0, atol=0)
        assert torch.equal(got[1], want[1])


def test_the_nan_window_s_gradient_reaches_the_nan():
    """The repro: a 2x2 pool over a 4x4 image with a NaN in one window and an all -inf
    window; eager sends the NaN window's gradient to the NaN, the -inf window's to its
    first element. Grad mode, strict."""
    def fn(x):
        return F.max_pool2d(x, 2) * 2

    x = torch.randn(1, 1, 4, 4)
    x[0, 0, 0, 1] = float("nan")
    x[0, 0, 2:, 2:] = float("-inf")
    grads = []
    for f in (fn, ember.compile(fn, options={"fallback": False})):
        leaf = x.clone().requires_grad_()
        out = f(leaf)
        out.backward(torch.ones_like(out))
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=0)
    assert grads[1][0, 0, 0, 1] == 2 and grads[1][0, 0, 2, 2] == 2


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_integer_max_pool_with_indices(dtype):
    """torch-mlir's index computation compared integers as floats and failed the graph;
    the dtype's lowest value must not be mistaken for padding."""
    def fn(x):
        return F.max_pool2d(x, 3, 2, 1, return_indices=True)

    x = torch.randint(0, 100, (2, 3, 7, 7)).to(dtype)
    x[0, 0, :3, :3] = torch.iinfo(dtype).min
    want, got = fn(x), ember.compile(fn, options={"fallback": False})(x)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_max_pool_with_indices_stores_no_masks():
    """Each chain of the decomposition is fused whole: the loop nests store the values
    and the indices and no boolean masks (a (best, index) select chain shares its masks
    between loop nests, which then stored them: 1.4x slower at ResNet's stem)."""
    module = linalg_module(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
                           torch.randn(2, 4, 16, 16))
    fuse(module)
    text = str(module)
    assert "tensor<2x4x8x8xi1>" not in text.split("return")[0].split("linalg.generic")[-1]
    assert text.count("-> tensor<2x4x8x8xi64>") == 1


@pytest.mark.parametrize("fn", [
    lambda x: torch.where(torch.isnan(x), 0, 0),
    lambda x: torch.where(x > 0, 1.5, 1.5),
    lambda x: torch.where(x > 0, 2, 2.0),
    lambda x: torch.where(x > 0, True, True),
], ids=["int", "float", "int-and-float", "bool"])
def test_where_of_two_equal_numbers_has_the_condition_s_shape(fn):
    """torch-mlir folded where(c, t, t) of the two 0-d constants to a 0-d result and the
    graph failed to lower."""
    x = torch.randn(2, 3, 4)
    got = ember.compile(fn, options={"fallback": False})(x)
    want = fn(x)
    assert got.shape == want.shape and got.dtype == want.dtype and torch.equal(got, want)
