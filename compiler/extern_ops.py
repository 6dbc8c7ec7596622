"""Which FX nodes run through ATen instead of an ember kernel, and why.

By design (no warning, also in strict mode):
  * random ops: they draw from torch's generator, so `torch.manual_seed` reproduces them,
    the generator state advances and separately compiled graphs draw different numbers
    (inductor's fallback_random behaves the same way); ember fuses what consumes them;
  * integer division / remainder: eager raises ZeroDivisionError on a zero divisor, a
    compiled loop would trap (SIGFPE) or return garbage;
  * ops that yield no tensor (`item`, sizes);
  * topk over a long dim (>= TOPK_ATEN_LENGTH): ATen's partial selection is 10-140x faster
    than the full merge sort ember lowers topk to (inductor falls back for topk too);
  * CPU flash attention, forward and backward (unless options={"attention": "ember"}):
    ATen's blocked kernel runs 1.6-2x faster than ember's GEMM + softmax + GEMM.
Because ember cannot lower them (a warning naming op, shapes and reason; an error in
strict mode):
  * ops known to have no lowering in ember's pipeline, and dtypes it does not compile.
"""
import operator

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from . import importer
from .fx_meta import value_of as _val
from .low_precision import EXTERN_TAG

aten = torch.ops.aten

_RANDOM_WORDS = ("rand", "bernoulli", "normal", "uniform", "exponential", "multinomial",
                 "poisson", "geometric", "cauchy", "log_normal", "dropout")
_INT_DIVISION = {"div", "remainder", "fmod", "floor_divide", "div_"}

# Ops whose lowering is missing or known wrong in ember's pipeline today, with the reason.
KNOWN_UNSUPPORTED = {
    "_embedding_bag": "torch-mlir's lowering drops per_sample_weights",
    "_embedding_bag_forward_only": "torch-mlir's lowering drops per_sample_weights",
    "mode": "no linalg lowering",
    "unique": "data-dependent output shape",
    "_unique2": "data-dependent output shape",
    "nonzero": "data-dependent output shape",
    "masked_select": "data-dependent output shape",
    "adaptive_avg_pool3d": "one-shot-bufferize fails on its lowering",
    "_adaptive_avg_pool3d": "one-shot-bufferize fails on its lowering",
    "adaptive_max_pool3d": "ember-form-fusion-groups cannot group its lowering yet",
    # torch-mlir's lowering leaves torch.constant ops behind: the whole graph would fail
    "avg_pool2d_backward": "torch-mlir cannot lower it",
    "avg_pool3d_backward": "torch-mlir cannot lower it",
    "max_pool3d_with_indices_backward": "torch-mlir cannot lower it",
}

SUPPORTED_DTYPES = {torch.float32, torch.float64, torch.int64, torch.int32, torch.bool,
                    torch.int8, torch.uint8, torch.int16}


def is_random(target):
    """An op that draws from torch's generator (rand*, bernoulli, normal, dropout, ...)."""
    return isinstance(target, torch._ops.OpOverload) and any(
        word in target.name() for word in _RANDOM_WORDS)


def is_pure(target):
    """An ATen op that neither mutates an input nor draws random numbers: evaluating it
    ahead of time (constant folding, freezing) gives what the call would."""
    return (isinstance(target, torch._ops.OpOverload) and not target._schema.is_mutable
            and not is_random(target))


def op_name(node):
    """'aten.sort' for aten.sort.default: the packet name of the node's target."""
    return importer.overload_name(node.target)


def _base_name(node):
    return op_name(node).split(".")[-1]


def _tensors(value):
    return [v for v in torch.utils._pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


def _arg_tensors(node):
    vals = [_val(a) for a in torch.utils._pytree.tree_leaves((node.args, node.kwargs))
            if isinstance(a, torch.fx.Node)]
    return [v for v in vals if isinstance(v, torch.Tensor)]


TOPK_ATEN_LENGTH = 256


def _uneven_adaptive_max_pool(node):
    """adaptive_max_pool2d whose windows may differ in size (an input size not a multiple
    of the output size, or a symbolic one: int() would read only this call's size):
    torch-mlir's lowering fails a run-time check or the whole graph."""
    if _base_name(node) != "adaptive_max_pool2d" or not isinstance(_val(node.args[0]), torch.Tensor):
        return False
    x, out = _val(node.args[0]), node.args[1]
    return any(isinstance(size, torch.SymInt) or int(size) % int(o) != 0
               for size, o in zip(x.shape[-len(out):], out))


def _long_topk(node):
    """topk(x, k, dim) whose dim is long enough that a partial selection wins."""
    if _base_name(node) != "topk" or not isinstance(_val(node.args[0]), torch.Tensor):
        return False
    x = _val(node.args[0])
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", -1)
    return x.dim() > 0 and x.shape[dim] >= TOPK_ATEN_LENGTH


def _nonzero_scalar_divisor(node):
    """x // 5, x % 5 (a constant divisor, as index arithmetic uses) cannot trap (int
    fmod stays in ATen: torch-mlir cannot lower it)."""
    if _base_name(node) == "fmod":
        return False
    divisor = node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
    return isinstance(divisor, (int, float)) and not isinstance(divisor, bool) and divisor != 0


_CONVOLUTIONS = (torch.ops.aten.convolution.default, torch.ops.aten.convolution_backward.default)
# Left undecomposed only with options={"attention": "aten"} (the CPU default)
_CPU_FLASH_ATTENTION = (aten._scaled_dot_product_flash_attention_for_cpu.default,
                        aten._scaled_dot_product_flash_attention_for_cpu_backward.default)


def _known_empty(t):
    # A symbolic size is not known to be 0 (and asking would add a guard).
    return statically_known_true(t.numel() == 0)


def classify(node, conv="ember", low_casts=False):
    """None if ember compiles `node`; else ('design' | 'unsupported', reason). With
    conv="aten", the convolutions the decompositions left (see
    conv_decomposition._cheap_in_ember) run through ATen. With low_casts (GPU targets),
    casts between f32 and f16 / bf16 are compiled."""
    if node.op != "call_function":
        return None
    if node.target is operator.getitem:
        return None  # follows its source (see extern_nodes)
    if EXTERN_TAG in node.meta:  # placed by an ember rewrite (low_precision.py)
        return ("design", node.meta[EXTERN_TAG])
    val = _val(node)
    outs = _tensors(val)
    if not outs:
        return ("design", "it yields no tensor")
    ins = _arg_tensors(node)
    if any(_known_empty(t) for t in outs + ins):
        return ("design", "a zero-size tensor (ATen has the exact semantics of degenerate "
                "shapes, e.g. (3, 0) @ (0, 4) is zeros(3, 4))")
    name = _base_name(node)
    if any(word in name for word in _RANDOM_WORDS):
        return ("design", "random ops draw from torch's generator")
    if (name in _INT_DIVISION and any(not t.dtype.is_floating_point for t in outs + ins)
            and not _nonzero_scalar_divisor(node)):
        return ("design", "integer division raises ZeroDivisionError on zero, as in eager")
    if conv == "aten" and node.target in _CONVOLUTIONS:
        return ("design", "ATen's convolution (oneDNN) beats im2col GEMMs "
                "(options={'conv': 'ember'} compiles it)")
    if node.target in _CPU_FLASH_ATTENTION:
        return ("design", "ATen's CPU flash attention (blocked: the score matrix is never "
                "written whole) beats GEMM + softmax + GEMM (options={'attention': 'ember'} "
                "compiles it)")
    if _long_topk(node):
        return ("design", "ATen's partial selection beats a full sort on a long dim")
    if name in KNOWN_UNSUPPORTED:
        return ("unsupported", KNOWN_UNSUPPORTED[name])
    if _grouped_convolution_backward(node):
        return ("design", "ATen computes a grouped convolution's backward (torch-mlir "
                "lowers it to invalid IR)")
    if _uneven_adaptive_max_pool(node):
        return ("unsupported", "windows of unequal sizes (input size not a multiple of "
                "the output size, or symbolic)")
    if low_casts and node.target in _CASTS and all(
            t.dtype in SUPPORTED_DTYPES or t.dtype in _LOW for t in outs + ins):
        return None  # GPU targets: a kernel rounds to / widens from f16 / bf16
    for t in outs + ins:
        if t.dtype not in SUPPORTED_DTYPES:
            return ("unsupported", f"dtype {str(t.dtype).replace('torch.', '')} is not compiled")
        if t.device.type != "cpu":
            return ("unsupported", f"device {t.device} for target cpu")
    return None


def _grouped_convolution_backward(node):
    """convolution_backward(grad, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, mask) with groups > 1: torch-mlir's lowering
    builds an invalid expand_shape, so ATen computes it (only the one op, not the graph)."""
    if node.target is not aten.convolution_backward.default:
        return False
    groups = node.args[9] if len(node.args) > 9 else node.kwargs.get("groups", 1)
    return groups != 1


_CASTS = (aten._to_copy.default, torch.ops.prims.convert_element_type.default)
_LOW = (torch.float16, torch.bfloat16)


def extern_nodes(gm, conv="ember", low_casts=False):
    """{node: (kind, reason)} for every node that runs through ATen by the static rules."""
    out = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
            if node.args[0] in out:
                out[node] = out[node.args[0]]
            continue
        why = classify(node, conv, low_casts)
        if why is not None:
            out[node] = why
    return out
