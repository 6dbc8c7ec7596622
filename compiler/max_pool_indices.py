"""max_pool{2,3}d_with_indices as ATen's CPU kernel computes it, instead of torch-mlir's
lowering, whose index is the first element equal to the max, from -1: a window holding
NaN got index -1, an all -inf window the padding's position; the gradient follows the
indices (a NaN window's gradient was dropped), and integer inputs failed to lower.
ATen's rule, per window, in row-major order:

    best, index = lowest, the window's first in-bounds element
    for each element v at position p:  if v > best or isnan(v): best, index = v, p

so the value is the max (NaN if any), the index the first element equal to it, or the
last NaN, or (nothing won: all elements are `lowest`) the first in-bounds element.

Before (grad mode, the forward of F.max_pool2d):
    %values, %indices = aten.max_pool2d_with_indices(%x, [3,3], [2,2], [1,1], [1,1], false)
After (kh*kw strided slices %v_k of the input padded with `lowest`; padding never wins):
    %best, %unused = aten.max_pool2d_with_indices(%x, ...)  torch-mlir's pooling loop
    %first = where(%v_0 == %best, off_0, where(%v_1 == %best, off_1, ...))
    %nan   = where(isnan(%v_8), off_8, where(isnan(%v_7), off_7, ...))
    %index = where(%best == lowest, first_in_bounds,
                   start + where(isnan(%best), %nan, %first))        one loop nest
Every intermediate of the chains has one use, so they fuse whole, at symbolic sizes too
(a select chain carrying (best, index), or eager's NaN-propagating maximum, reads each
running value twice: split into loop nests that stored masks, 1.4x slower at ResNet's
stem, 3.6x at symbolic sizes).

Windows over MAX_WINDOW elements (global pools) keep the op itself.
"""
import itertools
import math
import threading

import torch
import torch.nn.functional as F
from torch._meta_registrations import pooling_output_shape

from .conv_decomposition import per_dim

# set while this decomposition calls the op it decomposes, for its values
_TRACING_THE_OP = threading.local()
MAX_WINDOW = 64  # a 7x7 or 4x4x4 window; each element adds two compares and two selects


def _first_in_bounds(start, dilation):
    """The first position start + m * dilation >= 0 (ATen's `while (i0 < 0) i0 += d`)."""
    if dilation == 1:
        return start.clamp(min=0)
    return torch.where(start < 0, start + ((-start + dilation - 1) // dilation) * dilation,
                       start)


def max_pool_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """(values, indices) of an n-d max pool over x (N, C, *spatial), n = 2 or 3, float
    and integer dtypes (padding: the dtype's lowest value, which never wins `>` either;
    torch-mlir's lowering failed on integers); NotImplemented (the op itself) otherwise."""
    n = x.dim() - 2
    if getattr(_TRACING_THE_OP, "active", False):
        return NotImplemented  # the call below: the op itself
    if n not in (2, 3) or x.dtype == torch.bool or x.is_complex():
        return NotImplemented
    lowest = float("-inf") if x.dtype.is_floating_point else torch.iinfo(x.dtype).min
    kernel = per_dim(kernel_size, n)
    stride = per_dim(stride, n, kernel)
    padding = per_dim(padding, n)
    dilation = per_dim(dilation, n)
    if math.prod(kernel) > MAX_WINDOW:
        return NotImplemented
    sizes = list(x.shape[2:])
    outs = [pooling_output_shape(size, k, p, s, d, ceil_mode)
            for size, k, p, s, d in zip(sizes, kernel, padding, stride, dilation)]
    pads = []
    for size, k, p, s, d, out in zip(sizes, kernel, padding, stride, dilation, outs):
        right = p  # floor mode: the last window ends inside the padding
        if ceil_mode:  # its last window may pass the padding, by up to s - 1
            reach = (out - 1) * s + (k - 1) * d + 1
            # symbolic sizes: the most it can be (a Max of sizes is not affine)
            right = max(p, reach - size - p) if isinstance(reach, int) else p + s - 1
        pads.append((p, right))
    xp = F.pad(x, [side for pair in reversed(pads) for side in pair], value=lowest)
    flat_strides = [1] * n
    for dim in range(n - 2, -1, -1):
        flat_strides[dim] = flat_strides[dim + 1] * sizes[dim + 1]
    values, offsets_in_window = [], []
    for offsets in itertools.product(*(range(k) for k in kernel)):
        slices = tuple(slice(o * d, o * d + (out - 1) * s + 1, s)
                       for o, d, out, s in zip(offsets, dilation, outs, stride))
        values.append(xp[(slice(None), slice(None)) + slices])
        offsets_in_window.append(sum(o * d * f for o, d, f in zip(offsets, dilation,
                                                                  flat_strides)))
    # the values: the op itself (torch-mlir's pooling loop, NaN wins; its indices are
    # dropped); the offsets: chains with one use per intermediate (see above)
    pool = (torch.ops.aten.max_pool2d_with_indices if n == 2 else
            torch.ops.aten.max_pool3d_with_indices).default
    _TRACING_THE_OP.active = True
    try:
        best = pool(x, kernel, stride, padding, dilation, ceil_mode)[0]
    finally:
        _TRACING_THE_OP.active = False
    first_equal = None  # `>` keeps the first of equal maxima: scan backwards, last hit wins
    for value, here in zip(reversed(values), reversed(offsets_in_window)):
        first_equal = here if first_equal is None else torch.where(value == best, here,
                                                                   first_equal)
    local = first_equal
    if x.dtype.is_floating_point:  # `isnan(val)` takes every NaN: the last one wins
        last_nan = 0
        for value, here in zip(values, offsets_in_window):
            last_nan = torch.where(torch.isnan(value), here, last_nan)
        local = torch.where(torch.isnan(best), last_nan, first_equal)
    start, initial = 0, 0
    for dim, (out, s, p, d, f) in enumerate(zip(outs, stride, padding, dilation, flat_strides)):
        shape = [1] * n
        shape[dim] = out
        first = (torch.arange(out, device=x.device) * s - p).reshape(shape)
        start = start + first * f
        initial = initial + _first_in_bounds(first, d) * f
    # best == lowest: no element won `>` (nor was NaN), and ATen keeps its initial index
    index = torch.where(best == lowest, initial, start + local)
    # The values "read" the indices (torch-mlir folds where(c, t, t) to t): AOTAutograd's
    # partitioner then counts the indices as forward work and saves them, where it would
    # move a chain only the backward reads into the backward (recomputed there from the
    # saved input: 1.6x slower backward at ResNet's stem, 3x at symbolic sizes).
    return torch.where(index >= 0, best, best), index

