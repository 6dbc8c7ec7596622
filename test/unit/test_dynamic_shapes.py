"""Dynamic shapes: one compiled graph serves every size (compiler/symbolic.py, the
ember_shape passes), with eager's results."""
import pytest
import torch
import torch.nn.functional as F

import ember
from ember.runtime.cache import GLOBAL_CACHE
from test_ops import CASES


def _grown(t, batch, extra):
    """`t` with `extra` more rows along dim 0 when dim 0 is the batch (same values)."""
    if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != batch:
        return t
    reps = -(-(batch + extra) // batch)
    return torch.cat([t] * reps)[:batch + extra].clone()


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_with_dynamic_batch_matches_eager(name):
    fn, inputs = CASES[name]
    batch = inputs[0].shape[0] if inputs[0].dim() else None
    compiled = ember.compile(fn, options={"fallback": False})
    for extra in (0, 3, 1):
        args = [_grown(t, batch, extra) if batch else t for t in inputs]
        for t in args:
            if isinstance(t, torch.Tensor) and t.dim() and t.shape[0] == batch + extra:
                torch._dynamo.maybe_mark_dynamic(t, 0)
        with torch.no_grad():
            try:
                expected = fn(*args)
            except RuntimeError:
                assert extra, "the case's own inputs must run"
                continue  # the op fixes this size (view(8, 4)): nothing to vary
            actual = compiled(*args)
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)


def _count_compiles():
    return GLOBAL_CACHE.misses


_CONV = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)  # parameters: static, as in models

FUNCTIONS = {
    "gelu_cat_sum": (lambda x, y: torch.cat([F.gelu(x @ y), x], 1).sum(-1) + x.shape[0],
                     lambda n: (torch.randn(n, 8), torch.randn(8, 16))),
    "arange_of_size": (lambda x: x + torch.arange(x.shape[1]).float()[None, :, None],
                       lambda n: (torch.randn(2, n, 4),)),
    "attention": (lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True),
                  lambda n: (torch.randn(2, 4, n, 8),)),
    "heads_view": (lambda x: x.view(x.shape[0], x.shape[1], 4, 8).transpose(1, 2) * 2,
                   lambda n: (torch.randn(3, n, 32),)),
    "flatten_linear": (lambda x, w: (x.reshape(-1, 32) @ w).view(x.shape[0], -1, 16),
                       lambda n: (torch.randn(n, 3, 32), torch.randn(32, 16))),
    "sort_cumsum": (lambda x: torch.sort(x, dim=-1).values.cumsum(-1),
                    lambda n: (torch.randn(3, n),)),
    "layer_norm_softmax": (lambda x: torch.softmax(F.layer_norm(x, (16,)), -1),
                           lambda n: (torch.randn(n, 7, 16),)),
    # A dynamic image size: sizes inside the graph are `(s1 - 1)//2 + 1`, read back by
    # sym_size nodes (they used to split the graph into partitions that could not compile).
    "cnn_dynamic_image": (lambda x, w2: F.adaptive_avg_pool2d(F.max_pool2d(F.relu(
        _CONV(x)), 3, 2, 1), 1).flatten(1) @ w2,
        lambda n: (torch.randn(2, 3, n + 8, n + 8), torch.randn(4, 5))),
}


@pytest.mark.parametrize("mode", ["no_grad", "grad"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_dynamic_true_compiles_once_for_all_sizes(name, mode):
    fn, make = FUNCTIONS[name]
    torch._dynamo.reset()
    compiled = ember.compile(fn, dynamic=True, options={"fallback": False})
    before = _count_compiles()
    for n in (5, 2, 9, 33, 16):
        args = make(n)
        with torch.set_grad_enabled(mode == "grad"):
            expected = fn(*args)
            actual = compiled(*args)
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
        if n == 5:
            first = _count_compiles() - before
    # forward (+ backward); the CNN's partition after ATen's convolution is one graph:
    # the max pool's window positions are computed from the input's sizes
    assert first <= 1 + (mode == "grad")
    assert _count_compiles() - before == first  # no size compiles again


def test_size_returned_by_the_graph():
    """A graph that returns a size (`x.shape[0] - 1`) next to a tensor compiles whole."""
    fn = lambda x: (torch.relu(x) * 2, x.shape[0] - 1)
    torch._dynamo.reset()
    compiled = ember.compile(fn, dynamic=True, options={"fallback": False})
    for n in (3, 5, 11):
        x = torch.randn(n, 4)
        with torch.no_grad():
            out, size = compiled(x)
        torch.testing.assert_close(out, fn(x)[0])
        assert size == n - 1


def test_automatic_dynamic_recompiles_once():
    fn = lambda x: F.silu(x) * x.sum(-1, keepdim=True)
    torch._dynamo.reset()
    compiled = ember.compile(fn, options={"fallback": False})  # dynamic=None: torch's default
    before = _count_compiles()
    for n in (4, 6, 7, 12, 30, 2):
        x = torch.randn(n, 8)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), fn(x))
    assert _count_compiles() - before == 2  # the first size, then one dynamic graph


def test_torch_compile_backend_dynamic_true():
    fn = lambda x: torch.tanh(x).mean(0)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="ember", dynamic=True)
    for n in (3, 8, 100):
        x = torch.randn(n, 5)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), fn(x))


def test_size_arguments_are_checked():
    """The compiled graph checks the facts about sizes that its code relies on: sizes
    that are one symbol must agree (the kernel reads only the size arguments)."""
    from ember.runtime.compiled_graph import CompiledGraph

    torch._dynamo.reset()
    known = set(GLOBAL_CACHE._entries)
    fn = lambda x, y: x * 2 + y
    compiled = ember.compile(fn, dynamic=True, options={"fallback": False})
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    (graph,) = [g for k, g in GLOBAL_CACHE._entries.items() if k not in known
                and isinstance(g, CompiledGraph) and g.shapes is not None]
    tensor_spec = next(spec for spec in graph.input_specs if spec.is_tensor)
    value = dict(zip(tensor_spec.shape, (3, 4)))  # symbol name -> size
    args = [value[spec.shape[0]] if not spec.is_tensor else torch.randn(3, 4)
            for spec in graph.input_specs]
    torch.testing.assert_close(graph(*args)[0], args[-2] * 2 + args[-1])
    args[-1] = torch.randn(3, 5)  # y's dim 1 is x's symbol
    with pytest.raises(RuntimeError, match="shape assumptions"):
        graph(*args)


def test_data_dependent_sizes_run_eagerly_and_match():
    fns = [lambda x: x[x > 0] * 2, lambda x: torch.nonzero(x).float().sum(0) + x.sum(),
           lambda x: torch.unique(x.round()) + 1]
    for fn in fns:
        torch._dynamo.reset()
        compiled = ember.compile(fn, dynamic=True)
        for n in (5, 9):
            x = torch.randn(n, 3)
            with torch.no_grad():
                torch.testing.assert_close(compiled(x), fn(x))


@pytest.mark.parametrize("fn", [
    lambda v: v.repeat(2, 3),
    lambda v: v.repeat(2, 1, 3, 2),
    lambda v: v.roll(2, 1),
    lambda v: torch.cat([v[:, 1:], v[:, :1]], 1) * 2,
    lambda v: v.unsqueeze(0).repeat(3, 1, 1).view(3 * v.shape[0], v.shape[1]),
], ids=["repeat_2d", "repeat_4d", "roll", "cat_of_unequal_slices", "view_of_repeat"])
def test_repeat_and_roll_over_symbolic_sizes(fn):
    """repeat(2, 3) over two symbolic dims corrupted the heap (a write out of bounds:
    'double free or corruption'); roll's two slices of different run-time sizes made the
    concat-to-gather rewrite fail a size check (an error where eager works). WavLM's
    view of a repeat failed in tracing: the expand + reshape was a stride-0 view, not
    repeat's fresh contiguous tensor."""
    compiled = ember.compile(fn, dynamic=True, options={"fallback": False})
    for b, s in [(2, 5), (3, 7), (4, 9)]:
        v = torch.randn(b, s)
        torch.testing.assert_close(compiled(v), fn(v))


def test_adaptive_max_pool_over_symbolic_sizes_matches_eager():
    """A symbolic input size cannot be proven a multiple of the output size: the op runs
    through ATen for every size (int() of the size read only the first call's)."""
    fn = lambda x: F.adaptive_max_pool2d(x, (2, 2)) * 2
    compiled = ember.compile(fn, dynamic=True)
    for shape in [(2, 3, 8, 8), (3, 3, 6, 10), (2, 3, 7, 9)]:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), fn(x))



def test_lifted_sizes_are_defined_before_use_when_inputs_are_declared_late():
    """ConvBERT at its second shape: an ATen convolution splits the graph, and the
    partition after it declared a weight where it first used it, below a reshape by
    `2 * s1 * s0`. The lifted size argument was appended after that late input, below
    the reshape that reads it: 'scalar_1 was used before it has been defined' (strict:
    an error; otherwise the whole model ran eagerly)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from ember.compiler.scalar_prologue import lift_scalar_computations

    def f(x, w):
        return (x.reshape(x.shape[0] * 2, -1) * 2) @ w

    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(4, 6), torch.randn(3, 5))
    w = next(n for n in gm.graph.nodes if n.name == "w_1")
    mm = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.mm.default)
    mm.prepend(w)  # declared where it is first used, as a partition does
    gm.recompile()
    prologue = lift_scalar_computations(gm)
    gm.graph.lint()
    x, wv = torch.randn(6, 10), torch.randn(5, 7)
    torch.testing.assert_close(gm(x, wv, *prologue.run([x, wv])), f(x, wv))


def test_convolution_weight_passed_as_input_under_dynamic_true():
    """A weight passed as an input gets symbolic sizes under dynamic=True, and its 3x3
    kernel dims are SymInts whose value Dynamo specialized to 3. torch-mlir typed them
    `?` while the im2col GEMM collapsed them to a static 27: an invalid
    tensor.collapse_shape, so the whole graph ran eagerly (strict: an error)."""
    def fn(x, w):
        y = F.conv2d(x, w, stride=2, padding=1).relu()
        return y.reshape(y.shape[0], -1).sum(1) * 2

    compiled = ember.compile(fn, dynamic=True, options={"fallback": False})
    for shape, out in [((2, 3, 16, 16), 8), ((3, 3, 20, 12), 8), ((1, 3, 9, 9), 5)]:
        x, w = torch.randn(shape), torch.randn(out, 3, 3, 3) / 3
        with torch.no_grad():
            torch.testing.assert_close(compiled(x, w), fn(x, w), rtol=1e-4, atol=1e-4)


def test_indexing_by_several_tensors_over_symbolic_sizes():
    """CLIP's pooled output x[arange(b), ids.argmax(-1)]: torch-mlir cannot lower an
    index by two tensors with dynamic sizes (strict: an error; otherwise the op ran
    through ATen). It is a gather by one flat index now, with eager's negative indices,
    gradients, and an IndexError for an index out of its dim's range."""
    pooled = lambda x, ids: x[torch.arange(x.shape[0]), ids.argmax(-1)] * 2  # noqa: E731
    pairs = lambda x, i, j: x[i, j] + 1  # noqa: E731
    fast_pooled = ember.compile(pooled, dynamic=True, options={"fallback": False})
    fast_pairs = ember.compile(pairs, dynamic=True, options={"fallback": False})
    for b, s in [(2, 5), (3, 7), (4, 6)]:
        x = torch.randn(b, s, 8, requires_grad=True)
        ids = torch.randint(0, 50, (b, s))
        i, j = torch.randint(-b, b, (5,)), torch.randint(-s, s, (5,))
        with torch.no_grad():
            torch.testing.assert_close(fast_pooled(x, ids), pooled(x, ids))
        fast_pairs(x, i, j).pow(2).sum().backward()
        ours, x.grad = x.grad, None
        pairs(x, i, j).pow(2).sum().backward()
        torch.testing.assert_close(ours, x.grad)
    with pytest.raises(IndexError):
        fast_pairs(torch.randn(4, 6, 8), torch.tensor([0, 1]), torch.tensor([2, 6]))


def test_partition_after_an_aten_convolution_gets_the_symbols_it_needs():
    """A speech model's feature extractor: an overlapping conv1d runs through ATen, and
    the partition after it sees only (b, 8, (n - 10)//5 + 1), from which n cannot be
    read ("sizes s1 are not sizes of its inputs": strict raised, else it ran through
    ATen). The partition now takes the missing symbols as int arguments."""
    torch.manual_seed(0)
    w, proj = torch.randn(8, 1, 10) / 3, torch.randn(8, 16) / 3

    def fn(x):
        y = F.conv1d(x.unsqueeze(1), w, stride=5).transpose(1, 2)
        y = F.layer_norm(F.gelu(y), (8,)) @ proj
        return y[:, 1:] - y[:, :-1]

    compiled = ember.compile(fn, dynamic=True, options={"fallback": False})
    for b, n in [(2, 400), (3, 523), (1, 200)]:
        x = torch.randn(b, n)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), fn(x), rtol=1e-4, atol=1e-5)


def test_channels_last_pooled_gradient_over_a_symbolic_batch_compiles():
    """A channels-last image through a conv and a global average pool, trained after two
    contiguous batch sizes (so the graph is symbolic): AOTAutograd gives the (b, 16, 1, 1) tangent channels-last strides
    through as_strided(buffer, [s0, 16, 1, 1], [16, 1, 1, 1]) with symbolic sizes, which
    ember could not lower (strict raised, else it ran through ATen). A dense as_strided
    is a reshape, and compiles as one."""
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1),
                                torch.nn.AdaptiveAvgPool2d(1))
    eager, compiled_model = copy.deepcopy(model), copy.deepcopy(model)
    compiled = ember.compile(compiled_model, options={"fallback": False})
    for b, layout in ((4, torch.contiguous_format), (3, torch.contiguous_format),
                      (2, torch.channels_last)):
        x = torch.randn(b, 3, 12, 12).contiguous(memory_format=layout)
        eager.zero_grad()
        compiled_model.zero_grad()
        expected, actual = eager(x), compiled(x)
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
        expected.sum().backward()  # the tangent: ones expanded (stride 0), re-strided
        actual.sum().backward()
        for p, q in zip(compiled_model.parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
