"""Issue 6, defect 18 (coverage): ops torch-mlir cannot lower compile through ember's own
decompositions (indexing_decompositions.py, order_statistics.py, distance_decompositions.py,
cumulative_extrema.py), equal to eager in no_grad and grad mode, inputs left intact."""
import pytest
import torch

from helpers import assert_compiles_like_eager_inputs_intact

torch.manual_seed(0)
_NAN = float("nan")

CASES = {
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
    # cdist / pdist with eager's arithmetic (distance_decompositions.py)
    "cdist p=0": (lambda a, b: torch.cdist(a, b, p=0.0), (torch.randn(5, 5, 2), torch.randn(5, 6, 2))),
    "cdist p=2 matmul form": (lambda a, b: torch.cdist(a, b), (torch.randn(2, 30, 4), torch.randn(2, 7, 4))),
    "cdist p=2 direct": (lambda a, b: torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist"),
                         (torch.randn(4, 6), torch.randn(7, 6))),
    "cdist p=1.5": (lambda a, b: torch.cdist(a, b, p=1.5), (torch.randn(4, 6), torch.randn(7, 6))),
    "cdist p=inf": (lambda a, b: torch.cdist(a, b, p=float("inf")), (torch.randn(4, 6), torch.randn(7, 6))),
    "pdist": (lambda x: torch.nn.functional.pdist(x), (torch.randn(6, 3),)),
    "pdist p=1": (lambda x: torch.nn.functional.pdist(x, 1.0), (torch.randn(5, 1),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_compiles_and_matches_eager_without_touching_inputs(name, grad):
    fn, inputs = CASES[name]
    assert_compiles_like_eager_inputs_intact(fn, inputs, grad)
