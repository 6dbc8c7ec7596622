"""rand / rand_like (dropout's masks) computed in ember's kernels from one seed drawn from
torch's generator (compiler/random_decompositions.py): no ATen uniform fill, seeded,
uniform on [0, 1) in every float dtype, fused with dropout forward and backward."""
import math

import pytest
import torch
import torch.nn.functional as F

import ember

from helpers import compile_strict


def _aten_ops_run(fn, *args):
    with torch.profiler.profile() as prof:
        fn(*args)
    return {e.key for e in prof.key_averages()}


def test_dropout_draws_one_seed_not_a_tensor_of_random_numbers():
    compiled = compile_strict(lambda x: F.dropout(x, 0.1, training=True) * 3)
    x = torch.randn(64, 100)
    compiled(x)
    ops = _aten_ops_run(compiled, x)
    assert "aten::randint" in ops
    assert not {"aten::rand_like", "aten::uniform_", "aten::bernoulli_"} & ops, ops


@pytest.mark.parametrize("dtype, bits", [(torch.float32, 24), (torch.float64, 53),
                                         (torch.bfloat16, 8), (torch.float16, 11)])
def test_rand_is_uniform_on_the_dtype_s_grid_below_one(dtype, bits):
    compiled = compile_strict(lambda x: torch.rand_like(x))
    u = compiled(torch.empty(200_000, dtype=dtype))
    assert u.dtype == dtype and u.shape == (200_000,)
    v = u.double()
    assert v.min() >= 0 and v.max() < 1
    assert torch.equal(v * 2 ** bits, torch.floor(v * 2 ** bits))  # on the 2**-bits grid
    # 16 bins (each holds as many grid points): chi-square with 15 degrees of freedom,
    # below its 1e-6 tail (~49)
    counts = torch.histc(v, bins=16, min=0, max=1)
    expected = v.numel() / 16
    assert ((counts - expected) ** 2 / expected).sum() < 49
    assert abs(v.mean().item() - 0.5) < 0.005 and abs(v.var().item() - 1 / 12) < 0.002


def test_neighbours_and_calls_are_uncorrelated():
    compiled = compile_strict(lambda n: torch.rand(n, 500))
    a, b = compiled(200).flatten(), compiled(200).flatten()
    bound = 5 / math.sqrt(a.numel())
    for x, y in ((a[:-1], a[1:]), (a, b), (a[:-500], a[500:])):  # along rows, columns, calls
        assert abs(torch.corrcoef(torch.stack([x, y]))[0, 1].item()) < bound


def test_seeded_runs_repeat_and_the_generator_advances():
    compiled = compile_strict(lambda x: F.dropout(x, 0.5, training=True))
    x = torch.ones(4000)
    torch.manual_seed(5)
    a = compiled(x)
    torch.manual_seed(5)
    b, c = compiled(x), compiled(x)
    assert torch.equal(a, b) and not torch.equal(b, c)
    state = torch.get_rng_state()
    compiled(x)
    assert not torch.equal(state, torch.get_rng_state())


def test_dropout_at_symbolic_sizes_forward_and_backward():
    compiled = ember.compile(lambda x, w: F.dropout(x @ w, 0.2, training=True),
                             dynamic=True, options={"fallback": False})
    w = torch.randn(16, 24)
    for n in (7, 33, 120):
        x = torch.randn(n, 16, requires_grad=True)
        y = compiled(x, w)
        kept = y != 0
        assert 0.1 < 1 - kept.float().mean().item() < 0.3
        torch.testing.assert_close(y[kept], ((x @ w) / 0.8)[kept])
        y.backward(torch.ones_like(y))
        torch.testing.assert_close(x.grad, (kept.float() / 0.8) @ w.t())


def test_channels_last_rand_like_keeps_its_strides():
    fn = lambda x: torch.rand_like(x) * 0 + x
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    out = ember.compile(fn)(x)
    assert out.stride() == fn(x).stride()
    torch.testing.assert_close(out, x)
