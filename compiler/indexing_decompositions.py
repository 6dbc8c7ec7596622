"""Indexed reductions torch-mlir cannot lower, as the scatters ember compiles
(tm_tensor.scatter -> ember-lower-tm-tensor's bounds-checked loops).

    index_reduce(x, dim, i, src, r)  -> x.scatter_reduce(dim, i broadcast along src, src, r)
                                        (the same reduction, with i's entries spread over
                                        src's other dims; prod/mean/amax/amin, include_self)
    put(x, i, src, accumulate)       -> x.flatten().index_put((i wrapped,), src.flatten(),
                                        accumulate).view(x.shape)
    as_strided_scatter(x, src, size, stride, offset) (x contiguous)
                                     -> x.flatten().index_put((offset + sum_k i_k stride_k,),
                                        src.flatten()).view(x.shape)
    isin(x, test)                    -> (x[..., None] == test.flatten()).any(-1) (one fused
                                        reduction; NaN is in nothing, as in eager)
    histc(x, bins, lo, hi)           -> zeros(bins).index_put((bin of x,), in-range mask,
                                        accumulate) with eager's bin formula; lo = hi = 0
                                        takes x's min and max (+-1 when they are equal)
    x[i0, i1, ...] with symbolic sizes (torch-mlir lowers one index tensor there, not
    several: CLIP's pooled x[arange(b), ids.argmax(-1)] at a second length)
                                     -> x.reshape(s0*s1*.., rest)[(i0 wrapped)*s1 + (i1
                                        wrapped) + ..]; an index out of its dim's range
                                        makes the flat index out of range, so the gather's
                                        bounds check raises IndexError as eager does
"""
import torch

aten = torch.ops.aten


def _index_reduce(x, dim, index, source, reduce, include_self=True):
    if x.dim() == 0:
        out = _index_reduce(x.reshape(1), 0, index, source.reshape(1), reduce, include_self)
        return out.reshape(())
    dim = dim % x.dim()
    if source.dim() == 0:
        source = source.reshape(1)
    shape = [1] * source.dim()
    shape[dim] = -1
    spread = index.reshape(shape).expand(source.shape)
    return aten.scatter_reduce.two(x, dim, spread, source, reduce, include_self=include_self)


def _put(x, index, source, accumulate=False):
    flat = x.reshape(-1)
    n = flat.numel()
    wrapped = torch.where(index < 0, index + n, index).reshape(-1)
    out = aten.index_put.default(flat, (wrapped,), source.reshape(-1).to(x.dtype), accumulate)
    return out.reshape(x.shape)


def _as_strided_scatter(x, src, size, stride, storage_offset=None):
    if not x.is_contiguous() or x.storage_offset() != 0:
        return NotImplemented  # offsets into a storage the graph does not see
    position = torch.full((), storage_offset or 0, dtype=torch.int64, device=x.device)
    for k, (n, step) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[k] = n
        position = position + (torch.arange(n, device=x.device) * step).reshape(shape)
    position = position.expand(tuple(size)).reshape(-1)
    values = src.to(x.dtype).expand(tuple(size)).reshape(-1)
    return aten.index_put.default(x.reshape(-1), (position,), values).reshape(x.shape)


def _isin(elements, test_elements, *, assume_unique=False, invert=False):
    if not isinstance(elements, torch.Tensor) or not isinstance(test_elements, torch.Tensor):
        return NotImplemented
    found = (elements.unsqueeze(-1) == test_elements.reshape(-1)).any(-1)
    return ~found if invert else found


def _histc(x, bins=100, min=0, max=0):
    if not x.dtype.is_floating_point or min > max:  # eager raises on min > max
        return NotImplemented
    lo = torch.as_tensor(min, dtype=x.dtype, device=x.device)
    hi = torch.as_tensor(max, dtype=x.dtype, device=x.device)
    if min == max and x.numel():  # eager: the data's range, widened by 1 if empty
        lo, hi = x.min(), x.max()
        equal = lo == hi
        lo, hi = torch.where(equal, lo - 1, lo), torch.where(equal, hi + 1, hi)
    elif min == max:
        lo, hi = lo - 1, hi + 1
    flat = x.reshape(-1)
    inside = (flat >= lo) & (flat <= hi)
    # ATen's HistogramKernel: pos = (x - lo) * bins / (hi - lo), the top edge in the last bin.
    position = ((flat - lo) * bins / (hi - lo)).to(torch.int64).clamp(0, bins - 1)
    counts = torch.zeros(bins, dtype=x.dtype, device=x.device)
    return aten.index_put.default(counts, (position,), inside.to(x.dtype), True)


def _index_leading_with_symbolic_sizes(x, indices):
    """See the module doc; other cases (static sizes, one index, None or bool indices)
    keep the op."""
    k = len(indices)
    if k < 2 or not any(isinstance(s, torch.SymInt) for s in x.shape) or any(
            i is None or i.dtype in (torch.bool, torch.uint8) for i in indices):
        return NotImplemented
    flat, valid, total = None, None, 1
    for index, size in zip(torch.broadcast_tensors(*indices), x.shape[:k]):
        index = torch.where(index < 0, index + size, index)
        inside = (index >= 0) & (index < size)
        valid = inside if valid is None else valid & inside
        flat = index if flat is None else flat * size + index
        total = total * size
    flat = torch.where(valid, flat, total)
    return aten.index.Tensor(x.reshape((total,) + tuple(x.shape[k:])), [flat])


INDEXING_DECOMPOSITIONS = {
    aten.index_reduce.default: _index_reduce,
    aten.put.default: _put,
    aten.histc.default: _histc,
    aten.as_strided_scatter.default: _as_strided_scatter,
    aten.isin.Tensor_Tensor: _isin,
    aten.index.Tensor: _index_leading_with_symbolic_sizes,
}
