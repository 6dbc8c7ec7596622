"""Training through ember: forward AND backward compiled (strict: no fallback), the
gradients compared with eager."""
import pytest
import torch
import torch.nn.functional as F

from helpers import compile_strict


def _grads(fn, inputs):
    inputs = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    out = fn(*inputs)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    out.backward(g)
    return out.detach(), [t.grad for t in inputs if t.grad is not None]


def _attention_case(kind):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 6, 8, generator=g)
    k = torch.randn(2, 4 if kind != "gqa" else 2, 7, 8, generator=g)
    v = torch.randn(2, k.shape[1], 7, 8, generator=g)
    if kind == "causal":
        return (lambda q, k, v: F.scaled_dot_product_attention(q, k[:, :, :6], v[:, :, :6],
                                                               is_causal=True)), (q, k, v)
    if kind == "bool-mask":  # row 1 sees nothing: output 0, gradients 0, as eager
        mask = torch.rand(6, 7, generator=g) > 0.3
        mask[1] = False
        return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)), (q, k, v)
    if kind == "float-mask":
        mask = torch.randn(6, 7, generator=g)
        return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                               scale=0.3)), (q, k, v)
    return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)), (q, k, v)


@pytest.mark.parametrize("kind", ["causal", "bool-mask", "float-mask", "gqa"])
def test_attention_gradients_match_eager(kind):
    """The CPU flash kernel's backward reads the forward's log-sum-exp; torch's own
    decomposition of the forward returned the attention matrix there, and BERT's value
    gradients came out 15x too large."""
    fn, inputs = _attention_case(kind)
    expected, expected_grads = _grads(fn, inputs)
    assert expected.grad_fn is None  # (detached copy)
    actual, actual_grads = _grads(compile_strict(fn), inputs)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    assert len(actual_grads) == len(expected_grads) == 3
    for a, e in zip(actual_grads, expected_grads):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)
