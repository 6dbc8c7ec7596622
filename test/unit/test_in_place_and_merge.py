"""Multi-output fusion (ember-merge-elementwise) and mutated inputs written in place.

An optimizer step is the case both exist for: AdamW's update of one parameter reads
param, grad, exp_avg and exp_avg_sq and writes three of them back, which should be one
loop nest writing straight into the three state tensors."""
import pytest
import torch

import ember
from ember.compiler.fusion import fuse
from ember.runtime import CompiledGraph
from helpers import linalg_module


def _new_graphs(fn):
    """The CompiledGraphs built while fn runs."""
    built = []
    init = CompiledGraph.__init__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        built.append(self)

    CompiledGraph.__init__ = recording_init
    try:
        fn()
    finally:
        CompiledGraph.__init__ = init
    return built


def test_gelu_diamond_is_one_kernel():
    fn = lambda x: x * 0.5 * (1.0 + torch.erf(x * 0.7071067811865476)) + x.exp()
    module = linalg_module(fn, torch.randn(8, 32))
    stats = {}
    fuse(module, stats)
    assert stats["kernels"] == 1


def test_multi_use_value_and_its_consumer_are_one_kernel_with_two_outputs():
    fn = lambda x, y: (lambda a: (a, a * y + 1))(torch.sin(x) - y)
    module = linalg_module(fn, torch.randn(8, 32), torch.randn(8, 32))
    stats = {}
    fuse(module, stats)
    assert stats["kernels"] == 1
    x, y = torch.randn(8, 32), torch.randn(8, 32)
    compiled = ember.compile(fn, options={"fallback": False})
    for actual, expected in zip(compiled(x, y), fn(x, y)):
        torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("kind", ["adamw", "sgd"])
def test_optimizer_step_is_few_kernels_writes_in_place_and_matches_eager(kind, foreach):
    torch.manual_seed(0)
    # (32, 1, 7, 7) with a gradient strided differently in its size-1 dim (as ATen's
    # depthwise convolution backward returns it): torch's lerp decomposition re-strides
    # the moment with prims.copy_strided
    shapes = [(64, 32), (32,), (16, 8, 3, 3), (5,), (32, 1, 7, 7)]
    params = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]

    def make(ps):
        if kind == "adamw":
            return torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=foreach)
        return torch.optim.SGD(ps, lr=1e-2, momentum=0.9, foreach=foreach)

    opt, ref = make(params), make(twins)
    step = torch.compile(opt.step, backend="ember", options={"fallback": False})
    pointers = [p.data_ptr() for p in params]
    graphs = []
    for i in range(4):
        grads = [torch.randn(s) for s in shapes]
        grads[-1] = grads[-1].as_strided(shapes[-1], (49, 1, 7, 1))
        for p, q, g in zip(params, twins, grads):
            p.grad, q.grad = g.clone(), g.clone()
        graphs += _new_graphs(step)
        ref.step()
        for p, q in zip(params, twins):
            torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
        for p, q in zip(params, twins):
            for name, value in opt.state[p].items():
                torch.testing.assert_close(value, ref.state[q][name], rtol=1e-5, atol=1e-6)
    assert [p.data_ptr() for p in params] == pointers
    # The graph that runs every step: one loop nest per parameter (plus the 0-d step
    # counters, merged into one), every updated state tensor written in place.
    steady = graphs[-1]
    assert steady._in_place, "no output written in place"
    state_tensors = len(shapes) * (3 if kind == "adamw" else 2)
    assert len(steady._in_place) >= state_tensors


@pytest.mark.parametrize("fn", [
    # x[j, i] (old) is read in the loop nest that writes the new x[i, j]
    lambda x: (lambda y: (x.add_(1), y + x)[1])(x.t() * 2),
    # the old x is read by a reduction after the update
    lambda x: (lambda old: (x.mul_(3), old.sum(0) + x)[1])(x.clone()),
], ids=["transposed_read_in_same_loop", "read_by_later_kernel"])
def test_old_value_read_after_the_update_is_not_overwritten(fn):
    x = torch.randn(32, 32)
    expected_x = x.clone()
    expected = fn(expected_x)
    actual = ember.compile(fn, options={"fallback": False})(x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(x, expected_x)


def test_in_place_update_with_the_old_value_returned():
    def fn(x, y):
        before = x * 2
        x.mul_(y).add_(1)
        return before

    x, y = torch.randn(32, 16), torch.randn(32, 16)
    ex, ey = x.clone(), y.clone()
    expected = fn(ex, ey)
    compiled = ember.compile(fn, options={"fallback": False})
    graphs = _new_graphs(lambda: torch.testing.assert_close(compiled(x, y), expected))
    torch.testing.assert_close(x, ex)
    assert graphs and graphs[0]._in_place


def test_mutated_non_contiguous_input_is_still_updated():
    def fn(x):
        x.mul_(2)
        return x.sum()

    base = torch.randn(8, 6)
    x, ex = base.t(), base.clone().t()
    expected = fn(ex)
    actual = ember.compile(fn, options={"fallback": False})(x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(x, ex)
    torch.testing.assert_close(base, ex.t())


def test_batch_norm_running_stats_update_in_place_in_training():
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(8)
    twin = torch.nn.BatchNorm2d(8)
    compiled = ember.compile(bn, options={"fallback": False})
    for _ in range(3):
        x = torch.randn(4, 8, 5, 5)
        y = compiled(x)
        torch.testing.assert_close(y, twin(x), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(bn.running_mean, twin.running_mean)
        torch.testing.assert_close(bn.running_var, twin.running_var)
