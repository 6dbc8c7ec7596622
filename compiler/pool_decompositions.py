"""Pooling decompositions: pools of an unbatched (C, *spatial) input get a batch dim of 1
(`_with_batch_dim`), and avg_pool2d's backward is computed as shifted, padded copies of
the scaled gradient (torch has no decomposition and torch-mlir cannot lower the op, so
PoolFormer's training ran it through ATen).

    g          = grad_out / divisor[oh, ow]        (ATen's per-window divisor: the window
                                                    clipped to the padded input, or to the
                                                    input when count_include_pad=False,
                                                    or divisor_override)
    grad_in_p  = sum over (i, j) < (kh, kw) of g, strided by the pool's stride, placed at
                 (i, j) of the padded input     -- kh*kw pads: one fused elementwise sum
    grad_in    = grad_in_p[pad_h : pad_h + H, pad_w : pad_w + W]

A big window (EfficientNet's pooler: a 1280x1280 window with ceil_mode over a 7x7 image,
ResNet-style global pools) would take kh*kw pads (1.6M nodes: the trace ran for minutes
and the compile ran out of memory), and its forward through torch-mlir pads the input
out to the window. Both are two small GEMMs with 0/1 window matrices instead, since a
window is a product of a row range and a column range:

    M_h[p, y]  = 1 if output row p's window covers input row y      (oh, H); M_w likewise
    out        = (M_h @ x @ M_w^T) / divisor                           per (n, c)
    grad_in    = M_h^T @ g @ M_w
"""
import torch
import torch.nn.functional as F
from torch._meta_registrations import pooling_output_shape

from .conv_decomposition import _pair, per_dim, spread_by_stride
from .max_pool_indices import max_pool_with_indices

aten = torch.ops.aten


def _window_sizes(out, size, kernel, stride, pad, include_pad, device):
    """Per-output-position window extent along one dim, as ATen's kernel computes it."""
    start = torch.arange(out, device=device) * stride - pad
    end = torch.clamp(start + kernel, max=size + pad)
    if include_pad:
        return end - start
    return torch.clamp(end, max=size) - torch.clamp(start, min=0)


SHIFTED_COPIES_MAX = 16  # windows up to 4x4 always take the pads (PoolFormer's 3x3)


def _shifted_copies_pay(kh, kw, oh, ow):
    """kh*kw pads (or, forward, torch-mlir's window loop) cost kh*kw adds per element;
    the window matrices about oh + ow multiply-adds. Symbolic output sizes: the pads up
    to SHIFTED_COPIES_MAX (no guard)."""
    if kh * kw <= SHIFTED_COPIES_MAX:
        return True
    if isinstance(oh, int) and isinstance(ow, int):
        return kh * kw <= oh + ow
    return False


def _window_matrix(out, size, kernel, stride, pad, like):
    """(out, size): 1 where output position p's window [p*stride - pad, ... + kernel)
    covers input position y (ceil_mode's windows past the input just cover less)."""
    start = torch.arange(out, device=like.device).unsqueeze(1) * stride - pad
    pos = torch.arange(size, device=like.device).unsqueeze(0)
    return ((pos >= start) & (pos < start + kernel)).to(like.dtype)


def _per_plane(t, rows, cols):
    """rows @ t[n, c] @ cols^T for every (n, c): t (n, c, a, b), rows (A, a), cols (B, b)
    -> (n, c, A, B), as two GEMMs over all planes at once."""
    n, c, a, b = t.shape
    right = torch.mm(t.reshape(n * c * a, b), cols.t()).reshape(n * c, a, cols.shape[0])
    left = torch.mm(right.transpose(1, 2).reshape(-1, a), rows.t())
    return left.reshape(n, c, cols.shape[0], rows.shape[0]).transpose(2, 3).contiguous()


def _window_matrices(h, w, oh, ow, kernel, stride, padding, like):
    return (_window_matrix(oh, h, kernel[0], stride[0], padding[0], like),
            _window_matrix(ow, w, kernel[1], stride[1], padding[1], like))


def _divided(t, h, w, kernel, stride, padding, count_include_pad, divisor_override):
    """t (n, c, oh, ow) / ATen's per-window divisor."""
    if divisor_override:
        return t / divisor_override
    oh, ow = t.shape[2], t.shape[3]
    rows = _window_sizes(oh, h, kernel[0], stride[0], padding[0], count_include_pad, t.device)
    cols = _window_sizes(ow, w, kernel[1], stride[1], padding[1], count_include_pad, t.device)
    return t / (rows.unsqueeze(1) * cols.unsqueeze(0)).to(t.dtype)


def _pool_geometry(x, kernel_size, stride, padding, ceil_mode):
    """(kernel, stride, padding, ceil_mode) as pairs and a flag, simplified to what
    torch-mlir lowers without a window-sized buffer:

    - a window longer than the padded input (EfficientNet's 1280 over 7 pixels, with
      ceil_mode) covers the same elements as one exactly as long with stride 1: every
      window starts at -pad and ends at size + pad, one output either way;
    - ceil_mode is dropped where it adds no output (static sizes): torch-mlir pads the
      input by stride - 1 for it (EfficientNet's stride 1280: a 68 GB buffer)."""
    kernel = _pair(kernel_size)
    stride, padding = per_dim(stride, 2, kernel), per_dim(padding, 2, [0, 0])
    sizes = x.shape[-2:]
    reach = [isinstance(size, int) and k > size + 2 * p
             for k, size, p in zip(kernel, sizes, padding)]
    kernel = tuple(size + 2 * p if r else k for r, k, size, p in zip(reach, kernel, sizes,
                                                                       padding))
    stride = tuple(1 if r else s for r, s in zip(reach, stride))
    if ceil_mode and all(isinstance(size, int) for size in sizes):
        ceil_mode = any(pooling_output_shape(size, k, p, s, 1, True) !=
                        pooling_output_shape(size, k, p, s, 1, False)
                        for size, k, p, s in zip(sizes, kernel, padding, stride))
    return kernel, stride, tuple(padding), bool(ceil_mode)


def _simplified(given, geometry):
    """Whether _pool_geometry changed the op's (kernel, stride, ceil_mode)."""
    kernel_size, stride, ceil_mode = given
    return geometry[0] != tuple(_pair(kernel_size)) or geometry[3] != bool(ceil_mode) or \
        geometry[1] != tuple(per_dim(stride, 2, _pair(kernel_size)))


def avg_pool2d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """A big window's pool as M_h @ x @ M_w^T / divisor, where torch-mlir's pooling sums
    kh*kw values per output. Small windows: the op itself, its kernel within reach."""
    if x.dim() == 3:  # the op again, batched: this decomposition sees the 4-d call
        return aten.avg_pool2d.default(x.unsqueeze(0), kernel_size, stride, padding,
                                       ceil_mode, count_include_pad,
                                       divisor_override).squeeze(0)
    if x.dim() != 4:
        return NotImplemented
    geometry = _pool_geometry(x, kernel_size, stride, padding, ceil_mode)
    simplified = _simplified((kernel_size, stride, ceil_mode), geometry)  # the op's stride
    kernel, stride, padding, ceil = geometry
    h, w = x.shape[2], x.shape[3]
    if kernel[0] * kernel[1] > SHIFTED_COPIES_MAX:  # output sizes only here (symbolic: guards)
        oh, ow = (pooling_output_shape(size, k, p, s, 1, ceil)
                  for size, k, p, s in zip((h, w), kernel, padding, stride))
        if not _shifted_copies_pay(kernel[0], kernel[1], oh, ow):
            rows, cols = _window_matrices(h, w, oh, ow, kernel, stride, padding, x)
            return _divided(_per_plane(x, rows, cols), h, w, kernel, stride, padding,
                            count_include_pad, divisor_override)
    if not simplified:
        return NotImplemented  # the op itself
    return aten.avg_pool2d.default(x, kernel, stride, padding, ceil, count_include_pad,
                                   divisor_override)


def avg_pool2d_backward(grad_out, x, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override=None):
    if x.dim() == 3:
        return avg_pool2d_backward(grad_out.unsqueeze(0), x.unsqueeze(0), kernel_size, stride,
                                   padding, ceil_mode, count_include_pad,
                                   divisor_override).squeeze(0)
    if x.dim() != 4:
        return NotImplemented
    (kh, kw), (sh, sw), (ph, pw), _ = _pool_geometry(x, kernel_size, stride, padding,
                                                     ceil_mode)
    h, w = x.shape[2], x.shape[3]
    oh, ow = grad_out.shape[2], grad_out.shape[3]
    g = _divided(grad_out, h, w, (kh, kw), (sh, sw), (ph, pw), count_include_pad,
                 divisor_override)
    if not _shifted_copies_pay(kh, kw, oh, ow):
        rows, cols = _window_matrices(h, w, oh, ow, (kh, kw), (sh, sw), (ph, pw), g)
        return _per_plane(g, rows.t(), cols.t()).to(x.dtype)
    spread = spread_by_stride(g, (sh, sw))
    # ceil_mode's last window may reach past the padded input: room for it, cropped below
    big_h = torch.sym_max(h + 2 * ph, (oh - 1) * sh + kh)
    big_w = torch.sym_max(w + 2 * pw, (ow - 1) * sw + kw)
    total = None
    for i in range(kh):
        for j in range(kw):
            term = F.pad(spread, (j, big_w - spread.shape[3] - j, i, big_h - spread.shape[2] - i))
            total = term if total is None else total + term
    return total[:, :, ph:ph + h, pw:pw + w].to(x.dtype)


def _with_batch_dim(op, rank, batched_args):
    """op on an unbatched input (C, *spatial) as op on (1, C, *spatial): torch-mlir's
    pooling lowerings take N, C, *spatial only (an unbatched avg_pool1d failed the whole
    graph, an unbatched avg_pool3d segfaulted the codegen worker). batched_args: the
    positions of the tensors that carry the input's dims (grad_out, x, indices)."""
    def decomposition(*args, **kwargs):
        if args[0].dim() != rank - 1 or len(args) <= max(batched_args):
            return NotImplemented  # the op itself
        args = [a.unsqueeze(0) if k in batched_args else a for k, a in enumerate(args)]
        return torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.squeeze(0),
                                                 op(*args, **kwargs))
    return decomposition


def _max_pool2d_simplified(op, x_position):
    """A 2-d max pool (or its backward) as the same op with `_pool_geometry`'s window,
    stride and ceil_mode. Dilated pools as they are. Arguments after x: kernel, stride,
    padding, dilation, ceil_mode, ..."""
    def decomposition(*args, **kwargs):
        if kwargs or len(args) <= x_position + 1 or args[x_position].dim() != 4:
            return NotImplemented
        args = list(args)
        args += [[], [], [], [], False][len(args) - x_position - 1:]  # the defaults
        kernel_size, stride, padding, dilation, ceil_mode = args[x_position + 1:x_position + 6]
        if any(d != 1 for d in per_dim(dilation, 2, [1, 1])):
            return NotImplemented
        geometry = _pool_geometry(args[x_position], kernel_size, stride, padding, ceil_mode)
        if not _simplified((kernel_size, stride, ceil_mode), geometry):
            return NotImplemented  # the op itself
        kernel, stride, padding, ceil = geometry
        args[x_position + 1:x_position + 6] = [list(kernel), list(stride), list(padding),
                                               [1, 1], ceil]
        return op(*args)
    return decomposition


def _first_of(*decompositions):
    """The first decomposition's result that is not NotImplemented."""
    def decomposition(*args, **kwargs):
        for attempt in decompositions:
            result = attempt(*args, **kwargs)
            if result is not NotImplemented:
                return result
        return NotImplemented
    return decomposition


_CLIPPED_WINDOW_X = {aten.max_pool2d.default: 0, aten.max_pool2d_with_indices.default: 0,
                     aten.max_pool2d_with_indices_backward.default: 1}
_WITH_INDICES = (aten.max_pool2d_with_indices.default, aten.max_pool3d_with_indices.default)

POOL_DECOMPOSITIONS = {aten.avg_pool2d_backward.default: avg_pool2d_backward,
                       aten.avg_pool2d.default: avg_pool2d}
for _op, _rank, _batched in [
        (aten.avg_pool3d.default, 5, (0,)),
        (aten.max_pool2d.default, 4, (0,)), (aten.max_pool2d_with_indices.default, 4, (0,)),
        (aten.max_pool3d_with_indices.default, 5, (0,)),
        (aten.max_pool2d_with_indices_backward.default, 4, (0, 1, 7)),
        (aten.max_pool3d_with_indices_backward.default, 5, (0, 1, 7))]:
    _steps = [_with_batch_dim(_op, _rank, _batched)]
    if _op in _WITH_INDICES:  # indices as ATen computes them (NaN, -inf)
        _steps.append(max_pool_with_indices)
    if _op in _CLIPPED_WINDOW_X:  # a big window: the op again, clipped (then small enough
        _steps.append(_max_pool2d_simplified(_op, _CLIPPED_WINDOW_X[_op]))  # for the above)
    POOL_DECOMPOSITIONS[_op] = _first_of(*_steps)
