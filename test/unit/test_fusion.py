"""Fusion: relu(x @ w + b) * 2 + 1 is one GEMM plus ONE fused epilogue kernel."""
import torch

import ember
from ember.compiler.fusion import count_groups, count_kernels, fuse
from helpers import linalg_module as _linalg_module


def test_matmul_epilogue_is_one_kernel_besides_matmul():
    w, b = torch.randn(64, 32), torch.randn(32)
    fn = lambda x: torch.relu(x @ w + b) * 2 + 1
    module = _linalg_module(fn, torch.randn(8, 64))
    before = count_kernels(module)
    stats = {}
    fuse(module, stats)
    text = str(module)
    assert before == 5  # matmul, add, relu, mul, add
    assert stats["groups"] == 1  # the matmul and its epilogue form one group
    assert text.count("linalg.matmul") == 1
    assert text.count("linalg.generic") == 1  # bias + relu + *2 + 1 fused
    assert stats["kernels"] == 2


def test_separate_chains_stay_separate_groups():
    fn = lambda x, y: (torch.exp(x) + 1, torch.sum(y * 3, dim=1))
    module = _linalg_module(fn, torch.randn(4, 8), torch.randn(4, 8))
    stats = {}
    fuse(module, stats)
    # exp+add is one elementwise kernel; y*3 fuses into the reduction as its prologue.
    assert stats["groups"] == 2
    assert str(module).count("linalg.generic") == 2


def test_fused_chain_runs_correctly():
    w, b = torch.randn(64, 32), torch.randn(32)
    fn = lambda x: torch.relu(x @ w + b) * 2 + 1
    x = torch.randn(8, 64)
    with torch.no_grad():
        torch.testing.assert_close(ember.compile(fn, options={"fallback": False})(x), fn(x),
                                   rtol=1e-4, atol=1e-4)


def test_conv_output_permute_fuses_into_its_epilogue():
    conv = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, padding=1, bias=False),
                               torch.nn.BatchNorm2d(8), torch.nn.ReLU()).eval()
    module = _linalg_module(conv, torch.randn(2, 4, 8, 8))
    fuse(module)
    from ember.compiler.ir_walk import collect, named
    (mm,) = collect(module.operation, named("linalg.matmul"))
    (reshape,) = [u.owner for u in mm.results[0].uses]
    (epilogue,) = [u.owner for u in reshape.results[0].uses]
    text = str(epilogue)
    # NCHW restore, batch-norm and ReLU are one loop nest reading the GEMM result.
    assert epilogue.operation.name == "linalg.generic"
    assert "arith.mulf" in text and "arith.select" in text


def test_linear_on_3d_input_and_its_activation_are_one_epilogue():
    """F.linear on (batch, seq, hidden) is a 2-d GEMM + bias and a view back to 3-d; the
    GELU and residual add after the view join the bias add's loop nest."""
    w, b = torch.randn(48, 32) * 0.2, torch.randn(48)
    fn = lambda x, r: torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b)) + r
    x, r = torch.randn(4, 16, 32), torch.randn(4, 16, 48)
    module = _linalg_module(fn, x, r)
    stats = {}
    fuse(module, stats)
    assert stats["kernels"] == 2, str(module)  # the GEMM and ONE epilogue loop nest
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            torch.testing.assert_close(ember.compile(fn, options={"fallback": False})(x, r),
                                       fn(x, r), rtol=1e-5, atol=1e-5)
