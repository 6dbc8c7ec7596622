"""Hand ATen's convolutions their inputs in the layout they compute in.

oneDNN (and cuDNN) convolve a contiguous or a channels-last tensor; given anything else,
ATen first copies it (`.contiguous()`), a whole extra pass over the activation plus a
freshly mapped buffer (page faults) per call. When the input comes out of an ember
kernel, that kernel can write the layout the convolution wants instead, at no cost:

    before:  y = gelu(layer_norm(c.transpose(1, 2)).transpose(1, 2))   # strides (CT, 1, C)
             z = aten.convolution(y, w, ...)                           # ATen copies y
    after:   y = ...; y2 = aten.clone(y, memory_format=contiguous)     # fused into y's kernel
             z = aten.convolution(y2, w, ...)

(wav2vec2's feature encoder: 7 such copies, 66 MB per batch-8 call.) Only inputs that an
ember partition produces are rewritten: for a graph input the copy would merely move.
"""
import torch
from torch._prims_common import (is_channels_last_contiguous_or_false,
                                 is_contiguous_or_false, suggest_memory_format)

aten = torch.ops.aten

# convolution(x, weight, ...) and convolution_backward(grad_out, x, weight, ...): the
# positions of their activations and weights
_TENSOR_ARGS = {aten.convolution.default: (0, 1),
                aten.convolution_backward.default: (0, 1, 2)}


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _channels_last(t):
    return t.dim() in (4, 5) and is_channels_last_contiguous_or_false(t)


def _conv_layout(node):
    """ATen's choice (mkldnn_conv_use_channels_last / cudnn alike): channels-last when the
    activation's or the weight's suggested memory format is, else contiguous. Suggested,
    not "is channels-last contiguous": a 1x1 weight (C, K, 1, 1) is both, ATen computes
    it contiguous, and taking it for channels-last had RegNet's kernels write a
    transposed copy of the activation for every 1x1 convolution through ATen."""
    vals = [_val(a) for a in node.args[:3] if isinstance(_val(a), torch.Tensor)]
    if any(t.dim() in (4, 5) and suggest_memory_format(t) != torch.contiguous_format
           for t in vals):
        return torch.channels_last if vals[0].dim() == 4 else torch.channels_last_3d
    return torch.contiguous_format


def _has_layout(t, memory_format):
    if memory_format == torch.contiguous_format:
        return is_contiguous_or_false(t)
    return _channels_last(t)


def conv_inputs_in_conv_layout(gm, extern):
    """Insert a layout-changing clone (compiled, so it fuses into its producer's kernel)
    before every convolution in `extern` whose activation or weight an ember kernel
    produces in another layout. The producer's other compiled readers read the clone too,
    so the kernel writes one layout, not both (a residual branch beside the next
    convolution). Returns the number of clones inserted."""
    inserted, clones = 0, {}
    for node in list(gm.graph.nodes):
        positions = _TENSOR_ARGS.get(node.target) if node in extern else None
        if not positions:
            continue
        memory_format = _conv_layout(node)
        args = list(node.args)
        for i in positions:
            arg, val = args[i], _val(args[i])
            if (not isinstance(val, torch.Tensor) or arg.op != "call_function"
                    or arg in extern or _has_layout(val, memory_format)):
                continue
            clone = clones.get((arg, memory_format))
            if clone is None:
                with gm.graph.inserting_after(arg):
                    clone = gm.graph.call_function(aten.clone.default, (arg,),
                                                   {"memory_format": memory_format})
                with val.fake_mode:
                    clone.meta["val"] = val.clone(memory_format=memory_format)
                clones[(arg, memory_format)] = clone
                inserted += 1
                for user in list(arg.users):
                    if user is not clone and user.op == "call_function" and user not in extern:
                        user.replace_input_with(arg, clone)
            args[i] = clone
        node.args = tuple(args)
    if inserted:
        gm.recompile()
    return inserted
