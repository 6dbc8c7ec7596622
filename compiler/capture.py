"""Capture: the decomposition table AOTAutograd applies before import.

torch-mlir's own table (ops it prefers decomposed) plus the composite ops that must
reach linalg as simpler ATen ops: batch/layer/group norm, gelu, softmax, embedding, ...
"""
import torch
from torch._decomp import get_decompositions
from torch_mlir.extras.fx_decomp_util import get_decomposition_table as _torch_mlir_table

from .attention_decompositions import ATTENTION_DECOMPOSITIONS
from .batch_norm_decomposition import make_batch_norm_decompositions
from .conv_decomposition import (convolution, convolution_backward,
                                 convolution_backward_unless_aten_is_faster,
                                 convolution_unless_aten_is_faster)
from .cumulative_extrema import CUMULATIVE_EXTREMA
from .nan_decompositions import NAN_DECOMPOSITIONS
from .special_decompositions import SPECIAL_DECOMPOSITIONS
from .indexing_decompositions import INDEXING_DECOMPOSITIONS
from .order_statistics import ORDER_STATISTICS
from .distance_decompositions import DISTANCE_DECOMPOSITIONS
from .pool_decompositions import POOL_DECOMPOSITIONS
from .random_decompositions import RANDOM_DECOMPOSITIONS
from .foreach_decompositions import FOREACH_DECOMPOSITIONS

aten = torch.ops.aten

_EXTRA = [
    aten.unbind_copy,
    aten.permute_copy,
    aten._native_batch_norm_legit_no_training,
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_functional,
    aten.native_batch_norm,
    aten.gelu,
    aten._softmax,
    aten._log_softmax,
    aten.embedding,
    aten.silu,
    aten.hardswish,
    aten.hardsigmoid,
    aten.mish,
    aten.addmm,
    aten.linear,
    aten.t,
    aten.native_dropout,
    aten.upsample_nearest2d,
    aten.rsub,
    aten.glu,
    aten.logsumexp,
    aten.var_mean,
    aten.addcmul,
    aten.addcdiv,
    aten.leaky_relu,
    aten.elu,
    aten.softplus,
    aten.hardtanh,
    aten.threshold_backward,
    aten._softmax_backward_data,
    aten._log_softmax_backward_data,
    aten.native_layer_norm_backward,
    aten.native_batch_norm_backward,
    aten.gelu_backward,
    aten.silu_backward,
    aten.embedding_dense_backward,
    aten.sigmoid_backward,
    aten.tanh_backward,
    # ops torch-mlir leaves as torch.operator: their ATen decompositions lower fine
    aten.addmv,
    aten.hypot,
    aten.dist,
    aten.narrow_copy,
    aten.copysign,
    aten.view_copy,
    aten.as_strided_copy,
    aten.logaddexp,
    aten.logaddexp2,
    aten.fmax,
    aten.fmin,
    aten.linalg_vector_norm,
]


# torch's decompositions of these emit prims (broadcast_in_dim) that torch-mlir cannot
# take; torch-mlir decomposes the ATen ops itself.
_KEEP = [aten.native_layer_norm, aten.native_group_norm]
# ... and these compile as calls (compiler/passes/scalar_library.py), not through prims.
_CALLED = [aten.copysign, aten.fmod]


# torch-mlir's scatter lowerings mishandle a negative dim: scatter_add runs out of memory
# (an LLVM abort), scatter(-1) crashes LLVM, scatter(-3) of a 3-d tensor writes wrong values.
_SCATTERS_BY_DIM = [aten.scatter.src, aten.scatter.value, aten.scatter.reduce,
                    aten.scatter.value_reduce, aten.scatter_add.default, aten.scatter_reduce.two]


def _scatter_with_reduce(x, dim, index, src, reduce):
    """The deprecated scatter(..., reduce="add"/"multiply") as scatter_add /
    scatter_reduce("prod") (torch-mlir cannot lower its reduce string)."""
    if not isinstance(src, torch.Tensor):
        src = torch.full(index.shape, src, dtype=x.dtype)
    if reduce == "add":
        return aten.scatter_add.default(x, dim, index, src)
    return aten.scatter_reduce.two(x, dim, index, src, "prod")


def _with_nonnegative_dim(op, decomposition):
    """The op (or its decomposition) with `dim` wrapped to >= 0."""
    def wrapped(x, dim, *args, **kwargs):  # scatter_reduce's include_self is keyword-only
        if dim >= 0:
            return _table_default(decomposition, x, dim, *args, **kwargs)
        return (decomposition or op)(x, dim % max(x.dim(), 1), *args, **kwargs)
    return wrapped


def _constant_pad_nd(x, pad, value=0.0):
    """Negative padding (a crop: the backward of a pad is one) as narrow + the
    non-negative rest; torch-mlir's tensor.pad with a negative width fails bufferization."""
    if all(p >= 0 for p in pad):
        return NotImplemented
    for i in range(len(pad) // 2):
        dim = x.dim() - 1 - i
        low, high = pad[2 * i], pad[2 * i + 1]
        if low < 0:
            x = x.narrow(dim, -low, x.shape[dim] + low)
        if high < 0:
            x = x.narrow(dim, 0, x.shape[dim] + high)
    rest = [max(p, 0) for p in pad]
    if not any(rest):
        return x.clone()
    return aten.constant_pad_nd.default(x, rest, value)


def _table_default(decomposition, *args, **kwargs):
    """What the table did where an ember wrapper has nothing to change: its own
    decomposition, else NotImplemented (the op stays)."""
    return NotImplemented if decomposition is None else decomposition(*args, **kwargs)


def _along_dim_zero(decomposition):
    """unfold's backward along dim > 0 as along dim 0 of the moved tensors: torch's
    decomposition indexes with (None, ..., idx), a list torch-mlir cannot import."""
    def wrapped(grad, input_size, dim, size, step):
        if len(input_size) == 0 or dim % len(input_size) == 0:
            return _table_default(decomposition, grad, input_size, dim, size, step)
        dim = dim % len(input_size)
        moved = [input_size[dim]] + [s for k, s in enumerate(input_size) if k != dim]
        grad_input = aten.unfold_backward.default(grad.movedim(dim, 0), moved, 0, size, step)
        return grad_input.movedim(0, dim).contiguous()
    return wrapped


def _with_vector_indices(decomposition):
    """embedding_dense_backward of an index that is not a vector (a 0-d index, a batch of
    sequences) as of the flattened index vector: torch-mlir's scatter rejects a 0-d
    index, and with dynamic sizes its index_put reads only position 0 of each sequence
    of a 2-d index (GPT-2's embedding gradient was wrong by 90%)."""
    def wrapped(grad_output, indices, *args):
        if indices.dim() == 1:
            return _table_default(decomposition, grad_output, indices, *args)
        return aten.embedding_dense_backward.default(
            grad_output.reshape(-1, grad_output.shape[-1]), indices.reshape(-1), *args)
    return wrapped


def _with_flat_index(op, decomposition):
    """index_put(x, [index of rank > 1], values) as index_put with the index flattened and
    the values broadcast to index.shape + x.shape[1:] and flattened alike: the same
    writes, in the form torch-mlir lowers correctly with dynamic sizes too."""
    def wrapped(x, indices, values, accumulate=False):
        index = indices[0] if len(indices) == 1 else None
        if index is None or index.dim() <= 1 or index.dtype == torch.bool:
            return _table_default(decomposition, x, indices, values, accumulate)
        rows = tuple(x.shape[1:])
        values = torch.broadcast_to(values, tuple(index.shape) + rows)
        return op(x, [index.reshape(-1)], values.reshape((-1,) + rows), accumulate)
    return wrapped


def _repeat_by_one_expand(decomposition):
    """repeat with symbolic sizes as ONE expand of x viewed (1, s0, 1, s1, ...) to
    (r0, s0, r1, s1, ...) and a reshape merging each pair: torch's decomposition of
    repeat(2, 3) over two symbolic dims gave code that wrote out of bounds (a heap
    corruption); static sizes keep the table's."""
    def wrapped(x, repeats):
        if not any(isinstance(size, torch.SymInt) for size in x.shape):
            return _table_default(decomposition, x, repeats)
        x = x.reshape((1,) * (len(repeats) - x.dim()) + tuple(x.shape))
        interleaved = x
        for d in reversed(range(x.dim())):
            interleaved = interleaved.unsqueeze(d)
        pairs = [v for r, size in zip(repeats, x.shape) for v in (r, size)]
        out = interleaved.expand(pairs).reshape([r * size for r, size in zip(repeats, x.shape)])
        # repeat returns a fresh contiguous tensor; the reshape of an expand can be a view
        # with stride 0 (repeat(b, 1, 1, 1) of (1, h, t, t)), which WavLM's .view after
        # it cannot take, or x itself (all repeats 1)
        return out.clone(memory_format=torch.contiguous_format)
    return wrapped


def _integer_power(x, exponent):
    """An integer tensor to a non-negative integer power by squaring (torch-mlir lowers
    pow for floats only); the products wrap as eager's do. Other cases keep the op."""
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool \
            or not isinstance(exponent, int) or isinstance(exponent, bool) or exponent < 0:
        return NotImplemented
    result, square = None, x
    while exponent:
        if exponent & 1:
            result = square if result is None else result * square
        exponent >>= 1
        if exponent:
            square = square * square
    if result is None:
        return torch.ones_like(x)
    return result.clone() if result is x else result  # never the input itself


def _scalar_as_tensor(tensor_op):
    """op(x, scalar) -> op(x, scalar_tensor) (bitwise_or/xor, fmod, copysign): torch-mlir
    lowers only the tensor-tensor form, and fmod's scalar form left a
    `torch.constant.float` that failed the whole graph (grid_sample's reflection padding)."""
    def decomposition(x, other):
        dtype = torch.result_type(x, other)
        return tensor_op(x.to(dtype), torch.scalar_tensor(other, dtype=dtype, device=x.device))
    return decomposition


def _fmod_in_one_dtype(a, b):
    """fmod(f32, f64) computes in the promoted dtype: the exact C-library fmod
    (scalar_library.py) takes operands of its result's type; otherwise torch-mlir's
    a - b * trunc(a / b) ran (fmod(1e20, 3) gave 0, not 2)."""
    dtype = torch.result_type(a, b)
    if a.dtype == dtype and b.dtype == dtype:
        return NotImplemented  # the op itself
    return aten.fmod.Tensor(a.to(dtype), b.to(dtype))


def _float_floor_division(a, b, *, rounding_mode=None):
    """div(a, b, rounding_mode="floor") on floats as eager's div_floor_floating computes
    it, from the exact fmod: torch-mlir's floor(a / b) gave 3.3 // 1.1 = 3 (eager, and
    Python: 2)."""
    dtype = torch.result_type(a, b)
    if rounding_mode != "floor" or not dtype.is_floating_point:
        return NotImplemented
    a = a.to(dtype)
    b = (b.to(dtype) if isinstance(b, torch.Tensor)
         else torch.scalar_tensor(b, dtype=dtype, device=a.device))
    mod = torch.fmod(a, b)
    div = (a - mod) / b
    div = torch.where((mod != 0) & ((a < 0) ^ (b < 0)), div - 1, div)
    floor_div = torch.floor(div)
    floor_div = torch.where(div - floor_div > 0.5, floor_div + 1, floor_div)
    basic_div = a / b
    signed_zero = torch.copysign(torch.zeros_like(basic_div), basic_div)
    floor_div = torch.where(div != 0, floor_div, signed_zero)
    return torch.where(b != 0, floor_div, basic_div)


_SMALL_INTS = (torch.int8, torch.uint8, torch.int16)


def _small_int_and_number(tensor_op):
    """int8 / uint8 / int16 tensor (+, -, *) a Python int as the op with a 0-d tensor of
    that dtype: torch-mlir's lowering of the scalar form segfaulted the codegen worker
    (`x.to(torch.int8) * 3`, `u8 - 5`)."""
    def decomposition(x, other, **kwargs):
        if (not isinstance(x, torch.Tensor) or x.dtype not in _SMALL_INTS
                or isinstance(other, bool) or not isinstance(other, int)
                or not torch.iinfo(x.dtype).min <= other <= torch.iinfo(x.dtype).max):
            return NotImplemented  # the op itself
        return tensor_op(x, torch.scalar_tensor(other, dtype=x.dtype, device=x.device), **kwargs)
    return decomposition


def _integer_sum_in_result_dtype(op, previous):
    """sum of an integer or bool tensor sums values cast to the result dtype first (int64,
    or the dtype asked): torch-mlir's lowering summed a uint8 tensor in 8 bits, and read it
    as signed for a float32 sum (459 came back as -53). Other sums go to `previous` (the
    table's decomposition, if any)."""
    def decomposition(x, *args, dtype=None, **kwargs):
        result = dtype or torch.int64
        if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == result:
            if previous is None:
                return NotImplemented  # the op itself
            return previous(x, *args, dtype=dtype, **kwargs)
        return op(x.to(result), *args, **kwargs)
    return decomposition


def _xlogy_scalar_self(scalar, y):
    """xlogy(s, y) for a Python number s: NaN where y is, else 0 if s == 0, else s * log(y).
    (As xlogy(scalar_tensor(0), y), torch-mlir's folding segfaulted on it.)"""
    y = y.to(torch.result_type(scalar, y))
    value = torch.zeros_like(y) if scalar == 0 else scalar * torch.log(y)
    return torch.where(torch.isnan(y), float("nan"), value)


def _where_of_zero_dim(condition, self, other):
    """where(c, a, b) with 0-d a and b (`torch.where(mask, 0, 0)`: torch makes its numbers
    0-d constants): torch-mlir folds where(c, t, t) to t, a 0-d result where c's shape is
    due, and the graph failed. `a` expanded to the result's shape is not b."""
    if self.dim() or other.dim() or not condition.dim():
        return NotImplemented
    return torch.where(condition, self.expand(condition.shape), other)


def _signbit(x):
    """copysign(1, x) < 0: exact for -0.0 and a negative NaN (torch-mlir cannot bitcast)."""
    if not x.dtype.is_floating_point:
        return x < 0
    return torch.copysign(torch.ones_like(x), x) < 0


def _reciprocal(x):
    """1 / x as a division: torch-mlir's reciprocal lowering asserts x != 0 at run time
    (an abort of the user's process where eager gives inf)."""
    dtype = x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else torch.get_default_dtype()
    return torch.full_like(x, 1, dtype=dtype) / x


def _without_dtype(op):
    """torch-mlir rejects cumprod's and mean's dtype argument (mean's left a
    `torch.constant.int` that failed the whole graph): cast first, then the plain op."""
    def decomposition(x, *args, dtype=None, **kwargs):
        if dtype is None:
            return NotImplemented
        return op(x.to(dtype), *args, **kwargs)
    return decomposition


def _weight_norm_interface_backward(grad_w, v, g, norm, dim):
    """Gradients of w = v * g / |v| (norms over every dim but `dim`, kept as size 1), as
    ATen's kernel computes them; torch has no decomposition, so weight-normed layers
    (HuBERT's, WavLM's positional conv) ran their backward through ATen.
        s = sum(grad_w * v),  grad_g = s / |v|,  grad_v = g / |v| * (grad_w - v * s / |v|^2)"""
    dims = [d for d in range(v.dim()) if d != dim % max(v.dim(), 1)]
    compute = torch.float32 if v.dtype in (torch.float16, torch.bfloat16) else v.dtype
    grad_w, v_c, g_c, norm = (t.to(compute) for t in (grad_w, v, g, norm))
    s = (grad_w * v_c).sum(dims, keepdim=True)
    grad_v = (g_c / norm) * (grad_w - v_c * (s / (norm * norm)))
    grad_g = s / norm
    return grad_v.to(v.dtype), grad_g.reshape(g.shape).to(g.dtype)


def _roll(x, shifts, dims=()):
    """roll as a concatenation of two slices per rolled dim (torch-mlir's roll lowering
    does not bufferize); a new tensor even when nothing moves, as in eager."""
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        return _roll(x.reshape(-1), shifts, [0]).reshape(x.shape)
    out = x
    for shift, dim in zip(shifts, dims):
        n = out.shape[dim]
        shift = shift % n if n else 0
        if shift:
            out = torch.cat([out.narrow(dim, n - shift, shift), out.narrow(dim, 0, n - shift)], dim)
    return out.clone() if out is x else out


def _diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    """where(on the diagonal, src gathered along it, x) (functionalized `x.diagonal().
    zero_()`; torch-mlir cannot lower diagonal_scatter)."""
    d1, d2 = dim1 % x.dim(), dim2 % x.dim()
    moved = x.movedim((d1, d2), (-2, -1))
    n1, n2, length = moved.shape[-2], moved.shape[-1], src.shape[-1]
    if length == 0:
        return x.clone()
    i = torch.arange(n1, device=x.device).unsqueeze(1)
    j = torch.arange(n2, device=x.device).unsqueeze(0)
    position = (i if offset >= 0 else j).expand(n1, n2).clamp(max=length - 1)
    values = src.index_select(-1, position.reshape(-1)).reshape(*src.shape[:-1], n1, n2)
    out = torch.where((j - i) == offset, values.to(x.dtype), moved)
    return out.movedim((-2, -1), (d1, d2))


def _empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                    pin_memory=None):
    """empty in the physical order, permuted back: eager's strides (torch-mlir has no
    lowering for the op)."""
    physical = [size[k] for k in physical_layout]
    inverse = [list(physical_layout).index(k) for k in range(len(size))]
    return torch.empty(physical, dtype=dtype, device=device).permute(inverse)


def _copy_strided(a, stride):
    """prims.copy_strided (torch's lerp decomposition re-strides its result to eager's):
    the same values in the dense layout the strides order, from permute + contiguous
    (torch-mlir has no lowering for the prim)."""
    physical = sorted(range(a.dim()), key=lambda d: -stride[d])
    if physical == list(range(a.dim())):
        return a.clone(memory_format=torch.contiguous_format)
    inverse = [physical.index(k) for k in range(a.dim())]
    return a.permute(physical).contiguous().permute(inverse)


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    """(var, mean) from two reductions; torch's decomposition emits prims torch-mlir lacks."""
    dims = list(range(x.dim())) if dim is None or len(dim) == 0 else [d % max(x.dim(), 1) for d in dim]
    count = 1
    for d in dims:
        count *= x.shape[d] if x.dim() else 1
    mean = x.mean(dims, keepdim=True) if x.dim() else x
    centered = x - mean
    var = (centered * centered).sum(dims, keepdim=keepdim) if x.dim() else centered * centered
    var = var / (count - (1 if correction is None else correction))
    return var, (mean if keepdim or not x.dim() else mean.squeeze(dims))


def _std_mean(x, dim=None, *, correction=None, keepdim=False):
    var, mean = _var_mean(x, dim, correction=correction, keepdim=keepdim)
    return torch.sqrt(var), mean


def decomposition_table(conv="ember", attention="ember"):
    """AOTAutograd's decompositions. conv="aten": convolutions that im2col would make
    costly (overlapping windows, groups) stay `aten.convolution` / `convolution_backward`
    and run through ATen (oneDNN), which extern_ops.classify then sends there; "ember":
    every 2-D convolution it can decomposes into GEMMs (conv_decomposition.py).
    attention="aten": CPU flash attention (what scaled_dot_product_attention dispatches
    to on CPU tensors) and its backward stay ATen ops, as inductor keeps them; "ember":
    they become GEMMs and a softmax (attention_decompositions.py). Other devices'
    attention ops decompose either way."""
    table = dict(_torch_mlir_table())
    table.update(get_decompositions(_EXTRA))
    for op in _KEEP + _CALLED:
        for overload in op.overloads():
            table.pop(getattr(op, overload), None)
    if conv == "aten":
        table[aten.convolution.default] = convolution_unless_aten_is_faster
        table[aten.convolution_backward.default] = convolution_backward_unless_aten_is_faster
    else:
        table[aten.convolution.default] = convolution
        table[aten.convolution_backward.default] = convolution_backward
    table.update(NAN_DECOMPOSITIONS)
    table.update(CUMULATIVE_EXTREMA)
    table.update(SPECIAL_DECOMPOSITIONS)
    table.update(INDEXING_DECOMPOSITIONS)
    table.update(ORDER_STATISTICS)
    table.update(DISTANCE_DECOMPOSITIONS)
    table.update(POOL_DECOMPOSITIONS)
    table.update(ATTENTION_DECOMPOSITIONS)
    if attention == "aten":
        for op in ATTENTION_DECOMPOSITIONS:
            table.pop(op)
    table.update(FOREACH_DECOMPOSITIONS)
    table.update(RANDOM_DECOMPOSITIONS)
    for op in (aten.cumprod.default, aten.mean.dim, aten.mean.default):
        table[op] = _without_dtype(op)
    table[aten.roll.default] = _roll
    table[aten._weight_norm_interface_backward.default] = _weight_norm_interface_backward
    table[aten.diagonal_scatter.default] = _diagonal_scatter
    table[aten.signbit.default] = _signbit
    table[aten.where.self] = _where_of_zero_dim
    table[aten.reciprocal.default] = _reciprocal
    table[aten.empty_permuted.default] = _empty_permuted
    table[torch.ops.prims.copy_strided.default] = _copy_strided
    table[aten.pow.Tensor_Scalar] = _integer_power
    table[aten.constant_pad_nd.default] = _constant_pad_nd
    table[aten.repeat.default] = _repeat_by_one_expand(table.get(aten.repeat.default))
    for name in ("bitwise_or", "bitwise_xor", "fmod", "copysign"):
        table[getattr(aten, name).Scalar] = _scalar_as_tensor(getattr(aten, name).Tensor)
    table[aten.xlogy.Scalar_Self] = _xlogy_scalar_self
    table[aten.fmod.Tensor] = _fmod_in_one_dtype
    for name in ("add", "sub", "mul"):
        table[getattr(aten, name).Tensor] = _small_int_and_number(getattr(aten, name).Tensor)
    for op in (aten.sum.default, aten.sum.dim_IntList):
        table[op] = _integer_sum_in_result_dtype(op, table.get(op))
    table[aten.div.Tensor_mode] = table[aten.div.Scalar_mode] = _float_floor_division
    table[aten.var_mean.correction] = _var_mean
    table[aten.std_mean.correction] = _std_mean
    table.update(make_batch_norm_decompositions(dict(table)))
    table[aten.scatter.reduce] = table[aten.scatter.value_reduce] = _scatter_with_reduce
    table[aten.unfold_backward.default] = _along_dim_zero(table.get(aten.unfold_backward.default))
    for op in (aten.index_put.default, aten._unsafe_index_put.default):
        table[op] = _with_flat_index(op, table.get(op))
    table[aten.embedding_dense_backward.default] = _with_vector_indices(
        table.get(aten.embedding_dense_backward.default))
    for op in _SCATTERS_BY_DIM:
        table[op] = _with_nonnegative_dim(op, table.get(op))
    return table
