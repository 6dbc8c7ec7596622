"""aten.convolution (2-D) as ops that reach fast kernels:
  * groups == 1: im2col by strided slices (one permute for non-overlapping patches),
    laid out (C*kh*kw, N*oh*ow) so that the whole
    batch is ONE GEMM `W (F, C*kh*kw) @ cols` (the BLAS path; no per-image weight copy),
    whose (F, N, oh*ow) result is permuted back to NCHW inside the fused epilogue;
  * depthwise (groups == C_in == C_out): a sum of shifted slices times per-channel
    weights, an elementwise chain that fuses into one kernel.
Anything else (transposed, other group counts, 1-D/3-D) keeps torch-mlir's lowering.
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


def _pair(values):
    """ATen passes one value for all spatial dims as a 1-list (stride=[2], padding=[0])."""
    values = list(values)
    return values * 2 if len(values) == 1 else values


def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    if transposed or x.dim() != 4 or weight.dim() != 4 or len(stride) != 2 \
            or len(padding) != 2 or len(dilation) != 2:
        return NotImplemented
    n, c, h, w = x.shape
    f, cg, kh, kw = weight.shape
    ph, pw = padding
    oh = (h + 2 * ph - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * pw - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    xp = F.pad(x, (pw, pw, ph, ph)) if ph or pw else x
    if groups == 1:
        xt = xp.permute(1, 0, 2, 3)  # (c, n, h, w): the batch joins the GEMM's N
        if kh == kw == 1 and tuple(stride) == (1, 1):
            cols = xt.reshape(c, n * oh * ow)
        elif tuple(stride) == (kh, kw) and tuple(dilation) == (1, 1):
            # Non-overlapping patches (ViT / ConvNeXt patchify): im2col is one permute,
            # not kh*kw slice copies (which LLVM unrolls into seconds of compile time).
            xc = xp[:, :, :oh * kh, :ow * kw].reshape(n, c, oh, kh, ow, kw)
            cols = xc.permute(1, 3, 5, 0, 2, 4).reshape(c * kh * kw, n * oh * ow)
        else:
            patches = torch.stack(list(_shifted_slices(xt, kh, kw, oh, ow, stride, dilation)), dim=1)
            cols = patches.reshape(c * kh * kw, n * oh * ow)  # (c, kh*kw) order = weight's
        out = torch.mm(weight.reshape(f, c * kh * kw), cols)
        # Reshape first, permute last: the permute then meets the epilogue (bias, norm,
        # activation) with no reshape in between, and fuses into it.
        out = out.reshape(f, n, oh, ow).permute(1, 0, 2, 3)
    elif groups == c and cg == 1 and f == c:
        out = None
        for k, sl in enumerate(_shifted_slices(xp, kh, kw, oh, ow, stride, dilation)):
            term = sl * weight[:, 0, k // kw, k % kw].reshape(1, c, 1, 1)
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
