"""The GPU targets (issue 9) on a machine without a GPU.

Every graph is compiled for CUDA (sm_90 PTX, assembled by ptxas; with target "rocm" also
a gfx942 code object linked with --no-undefined) and its kernels run on
the CPU through the host executor (EMBER_GPU_EXECUTOR=host): the same launch plan and
the same `void **kernelParams` arrays as a CUDA launch, so numerics, argument packing and
grid sizes are checked against eager. The CUDA launch itself runs up to the driver call.
"""
import os
import warnings

import pytest
import torch
import torch.nn.functional as F

import ember
from ember.compiler import gpu_driver
from ember.targets.cuda import launcher as cuda_launcher
from ember.targets.cuda.ptx import cuda_tool


@pytest.fixture
def on_host_executor(monkeypatch):
    """Compile for CUDA, run the kernels on the CPU; collect every compiled graph."""
    monkeypatch.setenv("EMBER_GPU_EXECUTOR", "host")
    with gpu_driver.record_graphs() as graphs:
        yield graphs


def _compile(fn, dynamic=None, target="cuda"):
    return torch.compile(fn, backend="ember", dynamic=dynamic,
                         options={"target": target, "fallback": False})


def _check_ptx_assembled(graphs):
    assert graphs, "nothing was compiled for the GPU"
    for g in graphs:
        if g.launch_plan is not None and g.launch_plan.launches:
            assert g.stats["ptxas_checked"], "ptxas did not assemble the graph's PTX"


def _check_amd_linked(graphs):
    """Every kernel is in the gfx942 code object (ld.lld --no-undefined) with its
    64-byte kernel descriptor."""
    assert graphs
    for g in graphs:
        if g.launch_plan is not None and g.launch_plan.launches:
            assert g.stats["amd_kernels_linked"] == g.stats["unique_kernels"] > 0


def _amd_tools():
    from ember.targets.rocm.code_object import device_library, linker
    return linker() is not None and device_library("ocml.bc") is not None


def _require_amd_tools():
    """.ci/run installs lld-22 and rocm-device-libs; elsewhere their absence skips."""
    if not _amd_tools():
        if os.environ.get("CI"):
            pytest.fail("CI lacks ld.lld-22 / rocm-device-libs (see .ci/run)")
        pytest.skip("apt-get install lld-22 rocm-device-libs to test the AMD code objects")


def test_the_gpu_toolchain_pieces_are_installed():
    # the test extras bring ptxas and libdevice (nvidia-cuda-nvcc, nvidia-nvvm)
    assert cuda_tool("ptxas") is not None
    assert cuda_tool("libdevice.10.bc") is not None
    _require_amd_tools()


def _randn(*shape):
    return torch.randn(*shape)


def _with_nan(*shape):
    t = torch.randn(*shape)
    t[0, 0] = float("nan")
    return t


OPS = {
    "add_broadcast": (lambda a, b: a + b, lambda: [_randn(4, 8), _randn(8)]),
    "sum_middle_dim": (lambda a: a.sum(1), lambda: [_randn(4, 33, 5)]),
    "column_max": (lambda a: a.amax(0), lambda: [_randn(9, 10)]),
    "softmax": (lambda a: a.softmax(-1), lambda: [_randn(2, 3, 50)]),
    "log_softmax": (lambda a: F.log_softmax(a, 1), lambda: [_randn(5, 20)]),
    "layer_norm": (lambda a: F.layer_norm(a, (64,)), lambda: [_randn(3, 64)]),
    # block reductions (shared memory, barriers): a row longer than a block, a row
    # shorter than one, a max, a column reduction
    "long_row_softmax": (lambda a: a.softmax(-1), lambda: [_randn(3, 1000)]),
    "row_sum_100": (lambda a: (a * a).sum(-1), lambda: [_randn(5, 100)]),
    "row_max_int": (lambda a: a.amax(-1), lambda: [torch.randint(-99, 99, (4, 129))]),
    "column_sum": (lambda a: a.sum(0), lambda: [_randn(200, 7)]),
    "mm": (lambda a, b: a @ b, lambda: [_randn(7, 13), _randn(13, 5)]),
    "bmm_transposed": (lambda a, b: a @ b.transpose(-1, -2),
                       lambda: [_randn(2, 6, 8), _randn(2, 5, 8)]),
    "linear_gelu": (lambda a, w, b: F.gelu(F.linear(a, w, b)),
                    lambda: [_randn(4, 10), _randn(6, 10), _randn(6)]),
    "permute_contiguous": (lambda a: a.permute(2, 0, 1).contiguous() * 2,
                           lambda: [_randn(3, 4, 5)]),
    "slice_offset": (lambda a: a[:, 2:7] * 2, lambda: [_randn(4, 10)]),
    "cat": (lambda a, b: torch.cat([a, b], 1).exp(), lambda: [_randn(3, 4), _randn(3, 2)]),
    "where": (lambda a, b: torch.where(a > 0, a, b), lambda: [_randn(8, 8), _randn(8, 8)]),
    "max_pool_padded": (lambda a: F.max_pool2d(a, 3, 2, 1), lambda: [_randn(1, 2, 9, 9)]),
    "adaptive_avg_pool": (lambda a: F.adaptive_avg_pool2d(a, 1).flatten(1),
                          lambda: [_randn(2, 3, 7, 7)]),
    "gelu_tanh_and_pow": (lambda a: F.gelu(a, approximate="tanh") + a ** 3,
                          lambda: [_randn(5, 17)]),
    "integer_floor_div": (lambda a: (a * 3 + 1) // 2, lambda: [torch.randint(-9, 9, (5, 6))]),
    "argmax": (lambda a: a.argmax(-1), lambda: [_randn(4, 9)]),
    "embedding": (lambda i, w: F.embedding(i, w),
                  lambda: [torch.randint(0, 10, (3, 5)), _randn(10, 4)]),
    "cumsum_scan": (lambda a: a.cumsum(1), lambda: [_randn(3, 16)]),
    "float16_io": (lambda a: (a * 2).sigmoid(), lambda: [_randn(4, 8).half()]),
    "bfloat16_matmul": (lambda a, b: a @ b,
                        lambda: [_randn(4, 8).bfloat16(), _randn(8, 3).bfloat16()]),
    "nan_propagates": (lambda a: torch.maximum(a, torch.zeros_like(a)) + a.amax(),
                       lambda: [_with_nan(4, 4)]),
    "non_contiguous_input": (lambda a: a * 2, lambda: [_randn(4, 6).t()]),
    "scalar_rank0": (lambda a, s: a * s.sqrt(), lambda: [_randn(3, 4), torch.tensor(2.0)]),
}


@pytest.mark.parametrize("target", ["cuda", "rocm"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_op_matches_eager(name, target, on_host_executor):
    if target == "rocm":
        _require_amd_tools()
    fn, make = OPS[name]
    inputs = make()
    with torch.no_grad():
        expected = fn(*inputs)
        actual = _compile(fn, target=target)(*inputs)
    low = expected.dtype in (torch.float16, torch.bfloat16)
    torch.testing.assert_close(actual, expected, equal_nan=True,
                               rtol=1e-2 if low else 1e-5, atol=1e-2 if low else 1e-5)
    _check_ptx_assembled(on_host_executor)
    if target == "rocm":
        _check_amd_linked(on_host_executor)
    if name in ("long_row_softmax", "row_sum_100", "row_max_int", "layer_norm"):
        assert sum(g.stats["block_reductions"] for g in on_host_executor) > 0


def test_grad_mode_forward_and_backward(on_host_executor):
    """Training graphs (forward and backward) compile for the GPU as well."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(),
                                torch.nn.LayerNorm(16), torch.nn.Linear(16, 3))
    x = torch.randn(5, 8)
    expected = model(x).square().mean()
    expected.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    actual = _compile(model)(x).square().mean()
    actual.backward()
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    for p, g in zip(model.parameters(), grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)
    assert len(on_host_executor) >= 2  # a forward and a backward graph
    _check_ptx_assembled(on_host_executor)


def test_dynamic_sizes_reuse_one_graph(on_host_executor):
    def fn(x, w):
        return F.layer_norm(x @ w, (w.shape[1],)).relu()[:, 1:] * 2
    compiled = _compile(fn, dynamic=True)
    w = torch.randn(8, 16)
    with torch.no_grad():
        for n in (3, 5, 11):
            x = torch.randn(n, 8)
            torch.testing.assert_close(compiled(x, w), fn(x, w), rtol=1e-5, atol=1e-5)
    assert len(on_host_executor) == 1
    _check_ptx_assembled(on_host_executor)


def _hf_model(name):
    from ember.models import build, first_tensor
    model, inputs = build(name, "small", 2)
    return model, inputs, first_tensor


@pytest.mark.parametrize("name,target", [("bert", "cuda"), ("gpt2", "rocm"),
                                         ("resnet", "cuda")])
def test_small_models_match_eager(name, target, on_host_executor):
    if target == "rocm":
        _require_amd_tools()
    model, inputs, first = _hf_model(name)
    with torch.no_grad():
        expected = first(model(*inputs))
        actual = first(_compile(model, target=target)(*inputs))
    scale = expected.abs().max()
    assert ((actual - expected).abs().max() / scale).item() < 1e-5
    _check_ptx_assembled(on_host_executor)
    if target == "rocm":
        _check_amd_linked(on_host_executor)
    launches = sum(g.stats.get("kernels", 0) for g in on_host_executor)
    distinct = sum(g.stats.get("unique_kernels", 0) for g in on_host_executor)
    assert 0 < distinct <= launches
    if name == "bert":  # identical layers: identical kernels, compiled once
        assert distinct < launches


def test_bert_with_changing_sequence_length(on_host_executor):
    model, inputs, first = _hf_model("bert")
    compiled = _compile(model, dynamic=True)
    with torch.no_grad():
        for seq in (8, 13):
            ids = inputs[0][:, :seq].contiguous()
            expected = first(model(ids, *inputs[1:]))
            actual = first(compiled(ids, *inputs[1:]))
            assert ((actual - expected).abs().max() / expected.abs().max()).item() < 1e-5


def test_device_side_assert_is_an_error_not_a_crash(on_host_executor):
    fn = lambda i, w: F.embedding(i, w)  # noqa: E731
    compiled = _compile(fn)
    w = torch.randn(10, 4)
    with torch.no_grad():
        compiled(torch.randint(0, 10, (3,)), w)
        with pytest.raises((IndexError, RuntimeError), match="assert|index|out of range"):
            compiled(torch.tensor([1, 99, 2]), w)


def test_without_a_gpu_target_cuda_runs_eagerly_with_one_clear_warning(monkeypatch):
    monkeypatch.delenv("EMBER_GPU_EXECUTOR", raising=False)
    fn = lambda a: (a * 2).relu()  # noqa: E731
    compiled = torch.compile(fn, backend="ember", options={"target": "cuda"})
    x = torch.randn(4, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(compiled(x), fn(x))
    messages = [str(w.message) for w in caught]
    assert any("target 'cuda'" in m for m in messages), messages
    with pytest.raises(Exception, match="target 'cuda'"):
        torch._dynamo.reset()
        _compile(fn)(x)


def test_cpu_inputs_pick_the_cpu_target():
    fn = lambda a: a.exp() + 1  # noqa: E731
    x = torch.randn(3, 3)
    assert ember.compile(fn, options={"fallback": False})(x).device.type == "cpu"
    assert gpu_driver.default_target([x]) == "cpu"


def test_no_gpu_is_reported_not_crashed():
    why = cuda_launcher.cuda_unavailable()
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert why and isinstance(why, str)


def test_cuda_launch_packs_kernel_params_up_to_the_driver_call(on_host_executor):
    """The launch plan's kernelParams array goes to cuLaunchKernel as CUDA takes it;
    without a driver the bindings stop at loading libcuda (after checking types)."""
    driver = pytest.importorskip("cuda.bindings.driver")
    fn = lambda a, b: (a + b).softmax(-1)  # noqa: E731
    x, y = torch.randn(4, 8), torch.randn(8)
    with torch.no_grad():
        _compile(fn)(x, y)
    plan = on_host_executor[-1].launch_plan
    calls = []

    class DriverLauncher:
        device = "cpu"

        def launch(self, name, grid, block, params_address):
            calls.append(name)
            cuda_launcher.launch_kernel(driver.CUfunction(), grid, block, 0, params_address)
    plan = plan.with_launcher(DriverLauncher())
    try:
        plan(x, y)
    except TypeError:
        raise
    except Exception as exc:  # no libcuda here: the call got as far as the driver
        if torch.cuda.is_available():
            raise
        assert calls
        pytest.skip(f"no CUDA driver: the launch reached cuLaunchKernel ({type(exc).__name__})")
    assert torch.cuda.is_available()


def _real_gpu_or_skip():
    why = cuda_launcher.cuda_unavailable()
    if why:
        pytest.skip(f"no CUDA GPU here: {why}")


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "linear_gelu", "slice_offset",
                                  "cumsum_scan", "embedding", "bfloat16_matmul"])
def test_on_a_real_gpu(name):
    """On a CUDA machine: the same ops with CUDA tensors, the target picked from them."""
    _real_gpu_or_skip()
    fn, make = OPS[name]
    inputs = [x.cuda() for x in make()]
    with torch.no_grad():
        expected = fn(*inputs)
        actual = torch.compile(fn, backend="ember", options={"fallback": False})(*inputs)
    assert actual.device.type == "cuda"
    low = expected.dtype in (torch.float16, torch.bfloat16)
    torch.testing.assert_close(actual, expected, rtol=1e-2 if low else 1e-4,
                               atol=1e-2 if low else 1e-4)


def test_a_model_on_a_real_gpu():
    _real_gpu_or_skip()
    model, inputs, first = _hf_model("bert")
    model, inputs = model.cuda(), [x.cuda() for x in inputs]
    with torch.no_grad():
        expected = first(model(*inputs))
        actual = first(torch.compile(model, backend="ember",
                                     options={"fallback": False})(*inputs))
    assert ((actual - expected).abs().max() / expected.abs().max()).item() < 1e-4


def test_device_code_comes_from_the_disk_cache_the_second_time(on_host_executor):
    """A new process (here: emptied in-memory caches) loads the PTX / cubin / host object
    from the disk cache instead of compiling again."""
    from ember.compiler.object_cache import OBJECT_CACHE
    from ember.runtime.cache import GLOBAL_CACHE

    fn = lambda a: torch.tanh(a) * a.sum(-1, keepdim=True)  # noqa: E731
    x = torch.randn(6, 7)
    with torch.no_grad():
        first = _compile(fn)(x)
        hits = OBJECT_CACHE.hits
        GLOBAL_CACHE.clear()
        torch._dynamo.reset()
        second = _compile(fn)(x)
    assert OBJECT_CACHE.hits == hits + 1
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    torch.testing.assert_close(first, fn(x), rtol=1e-5, atol=1e-5)


def test_bfloat16_gemms_run_in_bfloat16(on_host_executor):
    """On a GPU target a bf16 model's GEMMs run in bf16 through the vendor BLAS (tensor
    cores), as eager's do; the kernels around them compute in f32."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(),
                                torch.nn.LayerNorm(128), torch.nn.Linear(128, 32)).bfloat16()
    x = torch.randn(8, 64).bfloat16()
    with torch.no_grad():
        expected = model(x)
        reference = model.float()(x.float())
        model.bfloat16()
        actual = _compile(model)(x)
    assert actual.dtype == torch.bfloat16
    # as close to the f32 result as eager's bf16 is
    assert (actual.float() - reference).abs().max() <= \
        1.5 * (expected.float() - reference).abs().max() + 1e-3
    # the GEMMs split the graph: they ran through ATen in bf16, not inside ember's graphs
    assert len(on_host_executor) >= 2
