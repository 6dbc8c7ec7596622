"""Issue 6, defect 18: sort / topk / cumsum / cumprod / scatter / index_put ... compile
(ember-lower-tm-tensor) in strict mode, equal to eager, inputs left intact."""
import pytest
import torch

from helpers import compile_strict

torch.manual_seed(0)
_NAN = float("nan")


def _perm_rows(rows, n, k):
    return torch.stack([torch.randperm(n)[:k] for _ in range(rows)])


CASES = {
    "scatter_add": (lambda x, i, s: torch.scatter_add(x, 0, i, s),
                    (torch.randn(10, 5), torch.randint(0, 10, (5, 5)), torch.randn(5, 5))),
    "scatter_add dim -1": (lambda x, i, s: torch.scatter_add(x, -1, i, s),
                           (torch.randn(10, 5), torch.randint(0, 5, (10, 3)), torch.randn(10, 3))),
    "scatter": (lambda x, i, s: torch.scatter(x, 1, i, s),
                (torch.randn(4, 6), _perm_rows(4, 6, 3), torch.randn(4, 3))),
    "scatter_reduce amax": (lambda x, i, s: x.scatter_reduce(0, i, s, "amax"),
                            (torch.randn(10, 5), torch.randint(0, 10, (5, 5)), torch.randn(5, 5))),
    "scatter_reduce mean": (lambda x, i, s: x.scatter_reduce(0, i, s, "mean", include_self=False),
                            (torch.randn(10, 5), torch.randint(0, 10, (5, 5)), torch.randn(5, 5))),
    "index_put accumulate": (lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
                             (torch.randn(10, 5), torch.tensor([1, 7, 1]), torch.randn(3, 5))),
    "index_put negative": (lambda x, i, v: torch.index_put(x, (i,), v),
                           (torch.randn(10, 5), torch.tensor([-1, 2, -3]), torch.randn(3, 5))),
    "index_add": (lambda x, i, v: x.index_add(0, i, v),
                  (torch.randn(10, 5), torch.tensor([0, 9, 0]), torch.randn(3, 5))),
    "setitem": (lambda x, i: x.clone().index_put_((i,), torch.tensor(7.)),
                (torch.randn(10, 5), torch.tensor([1, 3]))),
    "cumsum": (lambda x: torch.cumsum(x, 1), (torch.randn(4, 6),)),
    "cumsum dim 0": (lambda x: torch.cumsum(x, 0) * 2, (torch.randn(40, 6),)),
    "cumsum int32": (lambda x: torch.cumsum(x, -1), (torch.randint(0, 5, (3, 7), dtype=torch.int32),)),
    "cumsum long row": (lambda x: torch.cumsum(x, 0), (torch.randn(3000),)),
    "cumprod": (lambda x: torch.cumprod(x, 1), (torch.rand(4, 6) + 0.5,)),
    "cumprod dtype": (lambda x: torch.cumprod(x, 0, dtype=torch.float64), (torch.rand(6) + 0.5,)),
    "sort": (lambda x: torch.sort(x, 1), (torch.randn(4, 600),)),
    "sort descending NaN": (lambda x: torch.sort(x, 0, descending=True),
                            (torch.tensor([1., _NAN, -2., 3., _NAN, 0.]),)),
    "sort NaN": (lambda x: torch.sort(x, 0), (torch.tensor([1., _NAN, -2., 3., _NAN, 0., 1.]),)),
    "sort int64": (lambda x: torch.sort(x, 1, descending=True).values,
                   (torch.randint(0, 100, (3, 50)),)),
    "argsort dim 0": (lambda x: torch.argsort(x, 0), (torch.randn(33, 4),)),
    "topk": (lambda x: torch.topk(x, 3, 1), (torch.randn(5, 10),)),
    "topk smallest": (lambda x: torch.topk(x, 2, 1, largest=False), (torch.randn(5, 10),)),
    "amax of a 0-d tensor": (lambda x: torch.amax(x, 0, keepdim=True), (torch.tensor(3.),)),
    "cumsum of a 0-d tensor": (lambda x: torch.cumsum(x, 0), (torch.tensor(3.),)),
    # index_reduce / put / histc decompose into these scatters (indexing_decompositions.py)
    "index_reduce amax": (lambda x, i, s: x.index_reduce(0, i, s, "amax"),
                          (torch.randn(6, 3), torch.tensor([0, 5, 0, 2]), torch.randn(4, 3))),
    "index_reduce mean no self": (lambda x, i, s: x.index_reduce(1, i, s, "mean", include_self=False),
                                  (torch.randn(3, 6), torch.tensor([4, 1, 4]), torch.randn(3, 3))),
    "index_reduce prod 0-d": (lambda x, i, s: x.index_reduce(0, i, s, "prod"),
                              (torch.tensor(1.5), torch.tensor([0]), torch.tensor(-2.0))),
    "put accumulate negative": (lambda x, i, s: x.put(i, s, accumulate=True),
                                (torch.randn(3, 4), torch.tensor([-1, 0, 11, 5]), torch.randn(4))),
    "histc": (lambda x: torch.histc(x, bins=7, min=-1, max=1),
              (torch.cat([torch.randn(50), torch.tensor([-1.0, 1.0, _NAN, 2.0])]),)),
    "histc data range": (lambda x: torch.histc(x, bins=5), (torch.randn(4, 6),)),
    "histc 0-d": (lambda x: torch.histc(x, bins=3, min=0, max=10), (torch.tensor(10.0),)),
    "as_strided_scatter": (lambda x, s: torch.as_strided_scatter(x, s, (2, 2), (1, 3), 1),
                           (torch.randn(3, 3), torch.randn(2, 2))),
    "as_strided_scatter 0-d": (lambda x, s: torch.as_strided_scatter(x, s, (), (), 0),
                               (torch.randn(1), torch.tensor(3.0))),
    "isin": (lambda x, t: torch.isin(x, t), (torch.tensor([1.0, 2, _NAN, 4, 5]), torch.tensor([2.0, _NAN, 5]))),
    "isin invert": (lambda x, t: torch.isin(x, t, invert=True), (torch.randint(0, 6, (4, 5)), torch.tensor([1, 3]))),
    "permute_copy": (lambda x: torch.permute_copy(x, (0, 2, 3, 1)), (torch.randn(1, 2, 3, 4),)),
    "cummax 0-d": (lambda x: torch.cummax(x, 0), (torch.tensor(2.5),)),
    "logcumsumexp 0-d": (lambda x: torch.logcumsumexp(x, 0), (torch.tensor(2.5),)),
    # order statistics: a stable sort and a gather, eager's indices (order_statistics.py)
    "median dim ties and NaN": (lambda x: torch.median(x, 1),
                                (torch.tensor([[3.0, 1, 3, 1, 2], [1, _NAN, 2, _NAN, 0], [2, 2, 2, 2, 2]]),)),
    "nanmedian dim": (lambda x: torch.nanmedian(x, 0, keepdim=True),
                      (torch.tensor([[_NAN, 1.0, 3.0], [2.0, _NAN, _NAN], [2.0, 5.0, _NAN], [0.0, 1.0, _NAN]]),)),
    "nanmedian all-NaN row": (lambda x: torch.nanmedian(x, 1).values, (torch.tensor([[_NAN, _NAN], [1.0, _NAN]]),)),
    "median all": (lambda x: (torch.median(x), torch.nanmedian(x)), (torch.randn(7, 5),)),
    "median all NaN": (lambda x: (torch.median(x), torch.nanmedian(x)), (torch.tensor([1.0, _NAN, 3.0, 2.0]),)),
    "median int": (lambda x: torch.median(x, -1), (torch.randint(0, 4, (3, 8)),)),
    # (eager's quickselect picks among tied elements in no documented order: values only)
    "kthvalue ties": (lambda x: torch.kthvalue(x, 3, 0).values, (torch.randint(0, 3, (9, 4)).float(),)),
    "kthvalue": (lambda x: torch.kthvalue(x, 3, 0), (torch.randn(9, 4),)),
    "kthvalue NaN": (lambda x: torch.kthvalue(x, 4), (torch.tensor([[1.0, _NAN, 0.0, 2.0], [_NAN, _NAN, 1.0, 1.0]]),)),
    "median 0-d": (lambda x: torch.median(x, 0), (torch.tensor(1.5),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_compiles_and_matches_eager_without_touching_inputs(name, grad):
    fn, inputs = CASES[name]
    if grad and not inputs[0].is_floating_point():
        pytest.skip("integer inputs take no grad")
    inputs = [t.clone().requires_grad_(grad and k == 0) for k, t in enumerate(inputs)]
    before = [t.detach().clone() for t in inputs]
    with torch.set_grad_enabled(grad):
        expected = fn(*[t.detach().clone() for t in inputs])
        actual = compile_strict(fn)(*inputs)
    torch.testing.assert_close(actual, expected, equal_nan=True,
                               check_dtype=True, rtol=1e-5, atol=1e-5)
    for t, b in zip(inputs, before):
        torch.testing.assert_close(t.detach(), b, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_true_compiles_and_keeps_tie_order(descending):
    x = torch.randint(0, 3, (3, 64)).float()
    fn = lambda t: torch.sort(t, dim=1, descending=descending, stable=True)  # noqa: E731
    actual, expected = compile_strict(fn)(x), fn(x)
    assert torch.equal(actual.values, expected.values)
    assert torch.equal(actual.indices, expected.indices)


def test_stable_sort_keeps_tie_order():
    x = torch.randint(0, 3, (3, 64)).float()
    actual = compile_strict(lambda t: torch.sort(t, dim=1).indices)(x)
    expected = torch.sort(x, dim=1, stable=True).indices
    assert torch.equal(actual, expected)


def test_topk_over_a_long_dim_runs_through_aten_without_a_warning():
    # A vocabulary-sized topk (sampling): ATen's partial selection, not the full sort.
    import warnings
    x = torch.randn(4, 5000)
    fn = lambda t: torch.topk(t * 2, 50, -1)  # noqa: E731
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = compile_strict(fn)(x)
    assert not [w for w in caught if "ember" in str(w.message)]
    expected = fn(x)
    assert torch.equal(actual.values, expected.values)
    assert torch.equal(actual.indices, expected.indices)
