"""aten.convolution (2-D) as ops that reach fast kernels:
  * groups == 1: im2col by strided slices (one permute for non-overlapping patches),
    laid out (C*kh*kw, N*oh*ow) so that the whole
    batch is ONE GEMM `W (F, C*kh*kw) @ cols` (the BLAS path; no per-image weight copy),
    whose (F, N, oh*ow) result is permuted back to NCHW inside the fused epilogue;
  * depthwise (groups == C_in == C_out): a sum of shifted slices times per-channel
    weights, an elementwise chain that fuses into one kernel.
Anything else (transposed, other group counts, 1-D/3-D) keeps torch-mlir's lowering.

`convolution_backward` reuses the same pieces (training):
  * grad_weight (groups == 1): `grad_out (F, N*oh*ow) @ cols^T`, the im2col recomputed;
    depthwise: the stacked shifted slices times grad_out, summed over (N, oh, ow);
  * grad_input: non-overlapping patches: `W^T @ grad_out` folded back by one permute;
    otherwise the convolution of grad_out (stride > 1: zeros inserted between its rows
    and columns) with the flipped, channel-transposed weight, through `convolution` above;
  * grad_bias: grad_out summed over (N, oh, ow).
"""
import torch
import torch.nn.functional as F
from torch._prims_common import suggest_memory_format

aten = torch.ops.aten


def _shifted_slices(xp, kh, kw, oh, ow, stride, dilation):
    sh, sw = stride
    dh, dw = dilation
    for i in range(kh):
        for j in range(kw):
            yield xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                     j * dw: j * dw + sw * (ow - 1) + 1: sw]


def per_dim(values, n, default=()):
    """ATen's spatial int[] arguments, one value per dim: given as [] or None (then
    `default`), one value for every dim (stride=[2], padding=[0]), or one per dim."""
    values = [] if values is None else (
        list(values) if isinstance(values, (list, tuple)) else [values])
    if not values:
        return list(default)
    return values * n if len(values) == 1 else values


def _pair(values):
    return per_dim(values, 2)


def spread_by_stride(g, stride):
    """g (N, C, H, W) with stride - 1 zeros between neighbours along H and W: where a
    strided window's output lands on the input grid (the backward of a strided conv/pool)."""
    sh, sw = stride
    if (sh, sw) == (1, 1):
        return g
    n, c, oh, ow = g.shape
    wide = g.new_zeros(n, c, oh, (ow - 1) * sw + 1).slice_scatter(g, 3, 0, None, sw)
    return g.new_zeros(n, c, (oh - 1) * sh + 1, wide.shape[3]).slice_scatter(wide, 2, 0, None, sh)


def _geometry(x, weight, stride, padding, dilation):
    n, c, h, w = x.shape
    f, cg, kh, kw = weight.shape
    ph, pw = padding
    oh = (h + 2 * ph - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * pw - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    return n, c, h, w, f, kh, kw, oh, ow


def _non_overlapping(kh, kw, stride, dilation):
    return tuple(stride) == (kh, kw) and tuple(dilation) == (1, 1)


def _im2col(xp, kh, kw, oh, ow, stride, dilation):
    """(c*kh*kw, n*oh*ow) patches of the padded input, rows in the weight's (c, kh, kw)
    order, columns in (n, oh, ow) order."""
    n, c = xp.shape[0], xp.shape[1]
    xt = xp.permute(1, 0, 2, 3)  # (c, n, h, w): the batch joins the GEMM's N
    if kh == kw == 1 and tuple(stride) == (1, 1):
        return xt.reshape(c, n * oh * ow)
    if _non_overlapping(kh, kw, stride, dilation):
        # Non-overlapping patches (ViT / ConvNeXt patchify): im2col is one permute,
        # not kh*kw slice copies (which LLVM unrolls into seconds of compile time).
        xc = xp[:, :, :oh * kh, :ow * kw].reshape(n, c, oh, kh, ow, kw)
        return xc.permute(1, 3, 5, 0, 2, 4).reshape(c * kh * kw, n * oh * ow)
    patches = torch.stack(list(_shifted_slices(xt, kh, kw, oh, ow, stride, dilation)), dim=1)
    return patches.reshape(c * kh * kw, n * oh * ow)


def _supported(x, weight, stride, padding, dilation, transposed):
    return not transposed and x.dim() == 4 and weight.dim() == 4 and len(stride) == 2 \
        and len(padding) == 2 and len(dilation) == 2


# A 1x1 convolution's GEMM per image: the weight is broadcast over the batch (a copy of
# n*f*c floats), which pays where the image has at least this many pixels and no more
# output channels than pixels (the copy no bigger than the image it spares transposing).
PER_IMAGE_MIN_PIXELS = 64


def _pointwise_per_image(xp, weight, n, c, f, oh, ow):
    """A 1x1 stride-1 convolution as one (f, c) x (c, oh*ow) GEMM per image: NCHW in and
    out, where the single GEMM over the batch transposes the input to (c, n*oh*ow) first
    and the output back (RegNet's and MobileNetV2's 1x1 convolutions: 10-12% faster at
    batch 8, 2 cores)."""
    n, c = xp.shape[0], xp.shape[1]
    out = torch.bmm(weight.reshape(1, f, c).expand(n, f, c), xp.reshape(n, c, oh * ow))
    return out.reshape(n, f, oh, ow)


def _per_image_pays(n, kh, kw, stride, f, oh, ow):
    if not all(isinstance(v, int) for v in (n, f, oh, ow)):
        return False  # symbolic sizes: no guard on a size threshold, one code for all
    return kh == kw == 1 and tuple(stride) == (1, 1) and n > 1 and \
        PER_IMAGE_MIN_PIXELS <= oh * ow and f <= oh * ow


def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    if not _supported(x, weight, stride, padding, dilation, transposed):
        return NotImplemented
    n, c, h, w, f, kh, kw, oh, ow = _geometry(x, weight, stride, padding, dilation)
    ph, pw = padding
    xp = F.pad(x, (pw, pw, ph, ph)) if ph or pw else x
    if groups == 1 and _per_image_pays(n, kh, kw, stride, f, oh, ow):
        out = _pointwise_per_image(xp, weight, n, c, f, oh, ow)
    elif groups == 1:
        cols = _im2col(xp, kh, kw, oh, ow, stride, dilation)
        out = torch.mm(weight.reshape(f, c * kh * kw), cols)
        # Reshape first, permute last: the permute then meets the epilogue (bias, norm,
        # activation) with no reshape in between, and fuses into it.
        out = out.reshape(f, n, oh, ow).permute(1, 0, 2, 3)
    elif groups == c and weight.shape[1] == 1 and f == c:
        out = None
        # Tap k is one slice of this view, already shaped to broadcast: a 7x7 kernel is
        # traced as 49 * 5 ops instead of 49 * 8 (AOTAutograd traces them on every start).
        taps = weight.reshape(1, c, kh * kw, 1)
        for k, sl in enumerate(_shifted_slices(xp, kh, kw, oh, ow, stride, dilation)):
            term = sl * taps[:, :, k:k + 1]
            out = term if out is None else out + term
        # Keep the reshape round trip: without it the 49-term sum fuses on into what
        # follows (ConvNeXt's channels-last layer norm) and ConvNeXt ran 3x slower.
        out = out.reshape(n, f, oh * ow)
        if bias is not None:
            out = out + bias.reshape(1, f, 1)
        return _eager_layout(out.reshape(n, f, oh, ow), x, weight)
    else:
        return NotImplemented
    if bias is not None:
        out = out + bias.reshape(1, f, 1, 1)
    return _eager_layout(out, x, weight)


def _eager_layout(out, x, weight):
    """Give the result the memory format eager's CPU convolution returns: channels_last
    when the input or the weight is channels_last, else contiguous. The copy is a plain
    elementwise op that fuses into the epilogue; without it a returned conv result had
    the strides of the GEMM's permuted output."""
    channels_last = torch.channels_last in (suggest_memory_format(x), suggest_memory_format(weight))
    return out.contiguous(memory_format=torch.channels_last if channels_last
                          else torch.contiguous_format)


def _grad_weight(grad_out, x, weight, stride, padding, dilation, groups):
    n, c, h, w, f, kh, kw, oh, ow = _geometry(x, weight, stride, padding, dilation)
    ph, pw = padding
    xp = F.pad(x, (pw, pw, ph, ph)) if ph or pw else x
    if groups == 1:
        cols = _im2col(xp, kh, kw, oh, ow, stride, dilation)
        go = grad_out.permute(1, 0, 2, 3).reshape(f, n * oh * ow)
        return torch.mm(go, cols.t()).reshape(weight.shape)
    # depthwise: one (c, kh*kw) reduction over the stacked shifted slices
    patches = torch.stack(list(_shifted_slices(xp, kh, kw, oh, ow, stride, dilation)), dim=2)
    summed = (patches * grad_out.unsqueeze(2)).sum(dim=(0, 3, 4))
    return summed.reshape(weight.shape)


def _grad_input(grad_out, x, weight, stride, padding, dilation, groups):
    n, c, h, w, f, kh, kw, oh, ow = _geometry(x, weight, stride, padding, dilation)
    ph, pw = padding
    if groups == 1 and _non_overlapping(kh, kw, stride, dilation):
        go = grad_out.permute(1, 0, 2, 3).reshape(f, n * oh * ow)
        dcols = torch.mm(weight.reshape(f, c * kh * kw).t(), go)
        folded = dcols.reshape(c, kh, kw, n, oh, ow).permute(3, 0, 4, 1, 5, 2)
        grad_xp = folded.reshape(n, c, oh * kh, ow * kw)
        grad_xp = F.pad(grad_xp, (0, w + 2 * pw - ow * kw, 0, h + 2 * ph - oh * kh))
        return grad_xp[:, :, ph:ph + h, pw:pw + w]
    sh, sw = stride
    dh, dw = dilation
    grad_out = spread_by_stride(grad_out, (sh, sw))  # a stride-1 problem now
    # the rows and columns the forward's floor division dropped get no gradient
    extra_h = h + 2 * ph - dh * (kh - 1) - 1 - (oh - 1) * sh
    extra_w = w + 2 * pw - dw * (kw - 1) - 1 - (ow - 1) * sw
    if extra_h or extra_w:
        grad_out = F.pad(grad_out, (0, extra_w, 0, extra_h))
    if groups == 1:
        flipped = weight.flip(2, 3).transpose(0, 1)
    else:  # depthwise: (c, 1, kh, kw) stays, flipped
        flipped = weight.flip(2, 3)
    qh, qw = dh * (kh - 1) - ph, dw * (kw - 1) - pw
    if qh < 0 or qw < 0:  # more padding than kernel reach: crop grad_out's border
        grad_out = grad_out[:, :, max(-qh, 0):grad_out.shape[2] - max(-qh, 0),
                            max(-qw, 0):grad_out.shape[3] - max(-qw, 0)]
        qh, qw = max(qh, 0), max(qw, 0)
    out = convolution(grad_out, flipped, None, [1, 1], [qh, qw], [dh, dw], False, [0, 0],
                      groups)
    return out if out is not NotImplemented else None


def _cheap_in_ember(x, weight, stride, padding, dilation, transposed, groups):
    """Convolutions whose decomposition costs no more memory traffic than the conv itself:
    depthwise (a fused elementwise chain), 1x1 stride 1 (a plain GEMM) and
    non-overlapping patches (one permute, then a GEMM). Measured at batch 8 (2 cores):
    MobileNetV2 (1x1 + depthwise) 2.47x eager decomposed against 1.32x through oneDNN;
    ResNet (3x3, 7x7 stems) 1.02x decomposed against 1.36x through oneDNN."""
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    if not _supported(x, weight, stride, padding, dilation, transposed):
        return False
    # Under symbolic sizes too: a partition after an ATen conv gets the sizes no input of
    # its own carries (`(s - 1)//2 + 1`) from the parent graph (partition_symbols.py).
    # Decomposing every conv there cost MobileViT 12 s of tracing per compile, and a 3x3
    # im2col runs slower than oneDNN.
    kh, kw = weight.shape[2], weight.shape[3]
    if groups == x.shape[1] and weight.shape[1] == 1 and weight.shape[0] == x.shape[1]:
        return True
    if groups != 1 or any(padding):
        return False
    return (kh == kw == 1 and tuple(stride) == (1, 1)) or _non_overlapping(kh, kw, stride,
                                                                            dilation)


def convolution_unless_aten_is_faster(x, weight, bias, stride, padding, dilation, transposed,
                                      output_padding, groups):
    """The `conv="aten"` option's choice: the convolutions `_cheap_in_ember` accepts are
    decomposed; the others stay aten.convolution for ATen's oneDNN kernels."""
    if not _cheap_in_ember(x, weight, stride, padding, dilation, transposed, groups):
        return NotImplemented
    return convolution(x, weight, bias, stride, padding, dilation, transposed,
                       output_padding, groups)


def convolution_backward_unless_aten_is_faster(grad_out, x, weight, bias_sizes, stride,
                                               padding, dilation, transposed, output_padding,
                                               groups, output_mask):
    if not _cheap_in_ember(x, weight, stride, padding, dilation, transposed, groups):
        return NotImplemented
    return convolution_backward(grad_out, x, weight, bias_sizes, stride, padding, dilation,
                                transposed, output_padding, groups, output_mask)


def convolution_backward(grad_out, x, weight, bias_sizes, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask):
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    if not _supported(x, weight, stride, padding, dilation, transposed):
        return NotImplemented
    c, f, cg = x.shape[1], weight.shape[0], weight.shape[1]
    if not (groups == 1 or (groups == c and cg == 1 and f == c)):
        return NotImplemented
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        grad_input = _grad_input(grad_out, x, weight, stride, padding, dilation, groups)
        if grad_input is None:
            return NotImplemented
        grad_input = grad_input.contiguous(memory_format=suggest_memory_format(x))
    if output_mask[1]:
        grad_weight = _grad_weight(grad_out, x, weight, stride, padding, dilation, groups)
    if output_mask[2]:
        grad_bias = grad_out.sum(dim=(0, 2, 3))
    return grad_input, grad_weight, grad_bias
