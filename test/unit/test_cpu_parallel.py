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


def test_innermost_parallel_loops_are_annotated_for_the_vectorizer():
    """Seven buffers are too many pairs for LLVM's run-time alias checks: the loop is
    declared parallel instead (targets/cpu/parallel_access.py)."""
    def update(p, g, m, v):
        m2 = 0.9 * m + 0.1 * g
        v2 = 0.999 * v + 0.001 * g * g
        return p - 1e-3 * m2 / (torch.sqrt(v2) + 1e-8), m2, v2

    text = str(_lowered(update, *[torch.randn(64, 256) for _ in range(4)]))
    assert "parallelAccesses" in text
    # every element access (not the launchers' unpacking of pointers) is in the group
    accesses = [line for line in text.splitlines()
                if ("llvm.load" in line or "llvm.store" in line) and "f32" in line]
    assert len(accesses) >= 7 and all("access_groups" in line for line in accesses)


@pytest.mark.parametrize("shapes", [[(1000, 255), (7,), (3, 5, 7)], [(64, 256), (256,)]])
def test_compiled_adamw_step_updates_in_place_like_eager(shapes):
    """The optimizer's fused update writes param, exp_avg and exp_avg_sq in place, in a
    loop declared parallel to LLVM; sizes off the vector width exercise the tails."""
    import ember  # noqa: F401  (registers the backend)

    torch.manual_seed(0)
    params = [torch.randn(s, requires_grad=True) for s in shapes]
    twins = [p.detach().clone().requires_grad_(True) for p in params]
    eager_opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.01)
    ember_opt = torch.optim.AdamW(twins, lr=1e-2, weight_decay=0.01)
    step = torch.compile(ember_opt.step, backend="ember")
    addresses = [p.data_ptr() for p in twins]
    for _ in range(3):
        grads = [torch.randn(s) for s in shapes]
        for p, q, g in zip(params, twins, grads):
            p.grad, q.grad = g.clone(), g.clone()
        eager_opt.step()
        step()
    for p, q in zip(params, twins):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ember_opt.state[q]["exp_avg_sq"],
                                   eager_opt.state[p]["exp_avg_sq"], rtol=1e-5, atol=1e-8)
    assert [p.data_ptr() for p in twins] == addresses


def test_kernel_buffers_are_noalias_unless_an_output_lives_in_an_input():
    """Distinct buffers are `noalias` kernel arguments (LLVM keeps per-channel values in
    registers); a module whose output may be written into an input's buffer
    (compiler/in_place_outputs.py) gets none."""
    from torch_mlir import ir
    from ember.targets.cpu.parallel import OUTPUTS_ALIAS_INPUTS

    def add(x, y):
        return x * 2 + y

    inputs = (torch.randn(256, 512), torch.randn(256, 512))
    assert "llvm.noalias" in str(_lowered(add, *inputs))
    module = linalg_module(add, *inputs)
    fuse(module)
    with module.context:
        module.operation.attributes[OUTPUTS_ALIAS_INPUTS] = ir.UnitAttr.get()
    lower_to_llvm(module)
    text = str(module)
    assert "GOMP_parallel" in text and "llvm.noalias" not in text
