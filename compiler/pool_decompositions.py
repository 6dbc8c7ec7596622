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
"""
import torch
import torch.nn.functional as F

from .conv_decomposition import _pair, spread_by_stride

aten = torch.ops.aten


def _window_sizes(out, size, kernel, stride, pad, include_pad, device):
    """Per-output-position window extent along one dim, as ATen's kernel computes it."""
    start = torch.arange(out, device=device) * stride - pad
    end = torch.clamp(start + kernel, max=size + pad)
    if include_pad:
        return end - start
    return torch.clamp(end, max=size) - torch.clamp(start, min=0)


def avg_pool2d_backward(grad_out, x, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override=None):
    if x.dim() == 3:
        return avg_pool2d_backward(grad_out.unsqueeze(0), x.unsqueeze(0), kernel_size, stride,
                                   padding, ceil_mode, count_include_pad,
                                   divisor_override).squeeze(0)
    if x.dim() != 4:
        return NotImplemented
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride or kernel_size)  # stride=[] means the kernel's size
    ph, pw = _pair(padding or [0])
    h, w = x.shape[2], x.shape[3]
    oh, ow = grad_out.shape[2], grad_out.shape[3]
    if divisor_override:
        g = grad_out / divisor_override
    else:
        rows = _window_sizes(oh, h, kh, sh, ph, count_include_pad, grad_out.device)
        cols = _window_sizes(ow, w, kw, sw, pw, count_include_pad, grad_out.device)
        g = grad_out / (rows.unsqueeze(1) * cols.unsqueeze(0)).to(grad_out.dtype)
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


POOL_DECOMPOSITIONS = {aten.avg_pool2d_backward.default: avg_pool2d_backward}
for _op, _rank, _batched in [
        (aten.avg_pool2d.default, 4, (0,)), (aten.avg_pool3d.default, 5, (0,)),
        (aten.max_pool2d.default, 4, (0,)), (aten.max_pool2d_with_indices.default, 4, (0,)),
        (aten.max_pool3d_with_indices.default, 5, (0,)),
        (aten.max_pool2d_with_indices_backward.default, 4, (0, 1, 7)),
        (aten.max_pool3d_with_indices_backward.default, 5, (0, 1, 7))]:
    POOL_DECOMPOSITIONS[_op] = _with_batch_dim(_op, _rank, _batched)
