"""Big loop nests run on torch's OpenMP threads; temporaries live in one reused workspace."""
import pytest
import torch
import torch.nn.functional as F

from ember.compiler.fusion import fuse
from ember.targets.cpu import lower_to_llvm, workspace_bytes
from helpers import assert_matches_eager, compile_strict, linalg_module

W, B = torch.randn(512, 384), torch.randn(384)


def block(x):
    h = F.gelu(x @ W + B)
    h = F.layer_norm(h, (384,))
    return F.softmax(h * 0.5, dim=-1) + torch.tanh(h).sum(dim=0)


def _lowered(fn, *inputs):
    module = linalg_module(fn, *inputs)
    fuse(module)
    lower_to_llvm(module)
    return module


def test_big_kernels_are_forked_and_temporaries_planned():
    module = _lowered(block, torch.randn(256, 512))
    text = str(module)
    assert "llvm.call @GOMP_parallel" in text
    assert text.count("_launch(") >= 3  # gelu/layer-norm/softmax loops each forked
    assert "malloc" not in text  # every temporary is a slice of the workspace
    assert workspace_bytes(module) >= 256 * 384 * 4


def test_small_kernels_stay_serial():
    text = str(_lowered(lambda x: torch.exp(x) + 1, torch.randn(8, 8)))
    assert "GOMP_parallel" not in text


@pytest.mark.parametrize("threads", [1, 2])
def test_threaded_results_match_eager(threads):
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert_matches_eager(block, torch.randn(256, 512))
    finally:
        torch.set_num_threads(old)


def test_workspace_holds_no_state_between_calls():
    fast = compile_strict(block)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(256, 512)
            torch.testing.assert_close(fast(x), block(x), rtol=1e-4, atol=1e-4)


def test_without_openmp_or_blas_in_torch_loops_stay_serial(monkeypatch):
    from ember.targets.cpu import runtime_symbols
    monkeypatch.setattr(runtime_symbols, "_libraries", {"libgomp.so.1": None,
                                                        "libtorch_cpu.so": None})
    text = str(_lowered(block, torch.randn(256, 512)))
    assert "GOMP_parallel" not in text and "sgemm_" not in text
    assert_matches_eager(block, torch.randn(128, 512))  # a new shape: no cached kernel
