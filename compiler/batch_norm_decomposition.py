"""Train-mode batch norm as plain ATen reductions and elementwise ops.

torch's own decomposition of the training path emits `prims.broadcast_in_dim`, which
torch-mlir cannot import, so train-mode BatchNorm (and `F.batch_norm(..., training=True)`
without running statistics, as in BiT's weight standardisation) fell back. Here:

    mean = x.mean(dims);  var = ((x - mean)^2).mean(dims);  rstd = rsqrt(var + eps)
    out  = (x - mean) * rstd * weight + bias
    running_mean' = (1 - m) * running_mean + m * mean
    running_var'  = (1 - m) * running_var  + m * var * n / (n - 1)     (unbiased, as eager)

Eval mode keeps torch's decomposition (it imports fine).
"""
import torch

aten = torch.ops.aten


def _stats(x, eps):
    dims = [0] + list(range(2, x.dim()))
    shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
    acc = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    mean = acc.mean(dims, keepdim=True)
    centered = acc - mean
    var = (centered * centered).mean(dims, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    n = x.numel() // x.shape[1]
    return dims, shape, centered, mean, var, rstd, n


def _normalize(x, weight, bias, eps):
    dims, shape, centered, mean, var, rstd, n = _stats(x, eps)
    out = centered * rstd
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    # Eager's CPU kernel returns the saved statistics in the input's dtype.
    return (out.to(x.dtype), mean.reshape(-1).to(x.dtype), var.reshape(-1),
            rstd.reshape(-1).to(x.dtype), n)


def _updated(running, stat, momentum):
    return running * (1 - momentum) + stat.to(running.dtype) * momentum


def make_batch_norm_decompositions(fallback_table):
    """{op: decomposition} for the training paths; eval defers to `fallback_table`'s."""

    def functional(x, weight, bias, running_mean, running_var, training, momentum, eps):
        if not training:
            return fallback_table[aten._native_batch_norm_legit_functional.default](
                x, weight, bias, running_mean, running_var, training, momentum, eps)
        out, mean, var, rstd, n = _normalize(x, weight, bias, eps)
        unbiased = var * (n / max(n - 1, 1))
        return (out, mean, rstd, _updated(running_mean, mean, momentum),
                _updated(running_var, unbiased, momentum))

    def no_stats(x, weight, bias, training, momentum, eps):
        out, mean, var, rstd, n = _normalize(x, weight, bias, eps)
        return out, mean, rstd

    def native(x, weight, bias, running_mean, running_var, training, momentum, eps):
        if not training or running_mean is None:
            if training:
                return no_stats(x, weight, bias, training, momentum, eps)
            return fallback_table[aten.native_batch_norm.default](
                x, weight, bias, running_mean, running_var, training, momentum, eps)
        out, mean, var, rstd, n = _normalize(x, weight, bias, eps)
        # native_batch_norm updates the running stats in place (functionalized later)
        running_mean.copy_(_updated(running_mean, mean, momentum))
        running_var.copy_(_updated(running_var, var * (n / max(n - 1, 1)), momentum))
        return out, mean, rstd

    return {
        aten._native_batch_norm_legit_functional.default: functional,
        aten._native_batch_norm_legit.no_stats: no_stats,
        aten.native_batch_norm.default: native,
    }
