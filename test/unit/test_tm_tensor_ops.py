"""Issue 6, defect 18: sort / topk / cumsum / cumprod / scatter / index_put ... compile
(ember-lower-tm-tensor) in strict mode, equal to eager, inputs left intact."""
import pytest
import torch

from helpers import assert_compiles_like_eager_inputs_intact, compile_strict

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
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_compiles_and_matches_eager_without_touching_inputs(name, grad):
    fn, inputs = CASES[name]
    assert_compiles_like_eager_inputs_intact(fn, inputs, grad)


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
