"""An op ember cannot lower: eager fallback with one warning, or a clear error when strict."""
import warnings

import pytest
import torch

import ember
from ember.compiler.diagnostics import reset as reset_warnings


def unsupported(x):
    return torch.frexp(x * x + 1).mantissa + 1  # torch-mlir has no lowering for frexp


def test_fallback_warns_once_and_is_correct(monkeypatch):
    monkeypatch.delenv("EMBER_STRICT", raising=False)
    reset_warnings()
    fast = ember.compile(unsupported)
    x = torch.randn(4, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = fast(x)
        second = fast(x)
        third = ember.compile(unsupported)(torch.randn(4, 8))
    ours = [w for w in caught if "ember" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert "aten.frexp" in str(ours[0].message)
    assert "(4, 8)" in str(ours[0].message)
    torch.testing.assert_close(first, unsupported(x))
    torch.testing.assert_close(second, unsupported(x))
    assert third.shape == (4, 8)


def test_strict_option_raises_naming_op():
    fast = ember.compile(unsupported, options={"fallback": False})
    with pytest.raises(Exception, match=r"aten\.frexp.*\(4, 8\)"):
        fast(torch.randn(4, 8))


def test_strict_env_raises(monkeypatch):
    monkeypatch.setenv("EMBER_STRICT", "1")
    fast = torch.compile(unsupported, backend="ember")
    with pytest.raises(Exception, match=r"ember cannot lower aten\.frexp"):
        fast(torch.randn(4, 8))


def test_unknown_option_is_rejected():
    with pytest.raises(ValueError, match="unknown option"):
        ember.compile(unsupported, options={"fallbak": False})


def _attention_layer(x, w):
    """Projections, attention, output projection: ember kernels around the attention."""
    q, k, v = (x @ w).unflatten(-1, (3, 2, 8)).permute(2, 0, 3, 1, 4)
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return torch.relu(o.transpose(1, 2).flatten(2)) * 2


@pytest.mark.parametrize("attention", [None, "ember"])
def test_cpu_attention_runs_aten_flash_kernel_by_default(monkeypatch, attention):
    """The CPU default keeps ATen's flash attention (forward and backward) between ember
    partitions, in strict mode too; {"attention": "ember"} compiles it into ember kernels."""
    from ember.compiler import graph_compiler

    targets = []
    real = graph_compiler.compile_fx_graph

    def spy(gm, *args, **kwargs):
        targets.extend(str(n.target) for n in gm.graph.nodes)
        return real(gm, *args, **kwargs)

    monkeypatch.setattr(graph_compiler, "compile_fx_graph", spy)
    options = {"fallback": False} | ({"attention": attention} if attention else {})
    x, w = torch.randn(2, 10, 16), torch.randn(16, 48) * 0.3
    xs = x.clone().requires_grad_()
    out = ember.compile(_attention_layer, options=options)(xs, w)
    out.sum().backward()
    xe = x.clone().requires_grad_()
    ref = _attention_layer(xe, w)
    ref.sum().backward()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(xs.grad, xe.grad, rtol=1e-4, atol=1e-5)
    flash = [t for t in targets if "flash_attention_for_cpu" in t]
    if attention is None:
        assert any(t.endswith("for_cpu.default") for t in flash), targets
        assert any(t.endswith("for_cpu_backward.default") for t in flash), targets
    else:
        assert not flash


def test_unknown_attention_choice_is_rejected():
    with pytest.raises(ValueError, match="unknown attention"):
        ember.compile(unsupported, options={"attention": "flash"})
