"""CPU flash attention (what `scaled_dot_product_attention` dispatches to) and its
backward, as ATen ops ember compiles.

torch's own decomposition of `_scaled_dot_product_flash_attention_for_cpu` returns the
attention matrix where the op returns its log-sum-exp (inductor excludes it for that
reason). In inference the second output is dead; in training AOTAutograd hands it to the
backward op, whose gradients then came out wrong (BERT's value gradients 15x too large).
Here the forward returns the real log-sum-exp of the scaled scores, and the backward is
the textbook one, recomputing the probabilities from it:

    S = q k^T * scale (+ mask)    lse = logsumexp(S)    P = exp(S - lse)    out = P v
    dV = P^T dO    dP = dO V^T    dS = P * (dP - rowsum(dO * out))
    dQ = dS K * scale    dK = dS^T Q * scale

Grouped-query attention (fewer key/value heads) repeats k and v per query head and sums
their gradients over each group. A row that the mask hides entirely gives output 0,
log-sum-exp 0 and zero gradients, as eager's kernel does.
"""
import math

import torch

aten = torch.ops.aten


def _repeat_heads(x, heads):
    """(N, Hkv, S, E) -> (N, heads, S, E), query head h reading kv head h // (heads/Hkv)."""
    if x.shape[1] == heads:
        return x
    return x.repeat_interleave(heads // x.shape[1], dim=1)


def _sum_groups(grad, kv_heads):
    """Gradient of _repeat_heads: (N, H, S, E) -> (N, Hkv, S, E)."""
    n, heads, s, e = grad.shape
    if heads == kv_heads:
        return grad
    return grad.reshape(n, kv_heads, heads // kv_heads, s, e).sum(2)


def _scores(query, key, is_causal, attn_mask, scale):
    """Scaled, masked scores (N, H, L, S) in the computation dtype."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = torch.matmul(query, _repeat_heads(key, query.shape[1]).transpose(-2, -1)) * scale
    length, source = scores.shape[-2], scores.shape[-1]
    if is_causal:
        keep = torch.ones(length, source, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return scores, scale


def flash_attention_forward(query, key, value, dropout_p=0.0, is_causal=False, *,
                            attn_mask=None, scale=None):
    torch._check(dropout_p == 0.0, lambda: "flash attention on CPU takes no dropout")
    scores, _ = _scores(query, key, is_causal, attn_mask, scale)
    row_max = scores.amax(-1, keepdim=True)
    hidden = row_max == float("-inf")  # every key masked out
    row_max = torch.where(hidden, torch.zeros_like(row_max), row_max)
    weights = torch.exp(scores - row_max)
    total = weights.sum(-1, keepdim=True)
    lse = torch.where(hidden, torch.zeros_like(total), torch.log(total) + row_max)
    probs = weights / torch.where(hidden, torch.ones_like(total), total)
    out = torch.matmul(probs, _repeat_heads(value, query.shape[1]))
    # eager's kernel writes (N, L, H, E) memory viewed as (N, H, L, E)
    out = out.permute(2, 0, 1, 3).contiguous().permute(1, 2, 0, 3)
    return out.to(query.dtype), lse.squeeze(-1).to(torch.float32)


def flash_attention_backward(grad_out, query, key, value, out, logsumexp, dropout_p,
                             is_causal, *, attn_mask=None, scale=None):
    torch._check(dropout_p == 0.0, lambda: "flash attention on CPU takes no dropout")
    heads, kv_heads = query.shape[1], key.shape[1]
    scores, scale = _scores(query, key, is_causal, attn_mask, scale)
    probs = torch.exp(scores - logsumexp.unsqueeze(-1).to(scores.dtype))
    values = _repeat_heads(value, heads)
    grad_value = _sum_groups(torch.matmul(probs.transpose(-2, -1), grad_out), kv_heads)
    grad_probs = torch.matmul(grad_out, values.transpose(-2, -1))
    row = (grad_out * out).sum(-1, keepdim=True)
    grad_scores = probs * (grad_probs - row)
    grad_query = torch.matmul(grad_scores, _repeat_heads(key, heads)) * scale
    grad_key = _sum_groups(torch.matmul(grad_scores.transpose(-2, -1), query) * scale, kv_heads)
    return (grad_query.to(query.dtype), grad_key.to(key.dtype), grad_value.to(value.dtype))


ATTENTION_DECOMPOSITIONS = {
    aten._scaled_dot_product_flash_attention_for_cpu.default: flash_attention_forward,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: flash_attention_backward,
}
