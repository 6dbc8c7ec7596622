"""Launch ember's kernels on an NVIDIA GPU through the CUDA driver API (`cuda-bindings`,
`pip install ember[cuda]`), on torch's current stream, inside torch's primary context.

No GPU is ever a clear answer, never a crash: without cuda-bindings, without a driver
(cuInit raises rather than returning an error) or without a device, `cuda_unavailable()`
says why and the graph runs through ATen.
"""
import functools

import torch

from ember.errors import EmberError


class CudaLaunchError(EmberError):
    pass


def _driver():
    from cuda.bindings import driver
    return driver


@functools.lru_cache(maxsize=None)
def cuda_unavailable():
    """None when kernels can be launched here, else the reason (one line)."""
    if not torch.cuda.is_available():
        return "torch sees no CUDA device (a CPU build of torch, no driver or no GPU)"
    if torch.version.hip:
        return "this torch is built for ROCm"
    try:
        driver = _driver()
    except ImportError:
        return "cuda-bindings is not installed (pip install ember[cuda])"
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:  # no libcuda: the bindings raise instead of returning
        return f"the CUDA driver cannot be loaded ({type(exc).__name__}: {exc})"
    if err != driver.CUresult.CUDA_SUCCESS:
        return f"cuInit failed: {err.name}"
    return None


def device_arch():
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def check(result, what):
    err = result[0] if isinstance(result, tuple) else result
    driver = _driver()
    if err != driver.CUresult.CUDA_SUCCESS:
        raise CudaLaunchError(f"ember: {what} failed: {getattr(err, 'name', err)}")
    return result[1] if isinstance(result, tuple) and len(result) == 2 else result


class CudaLauncher:
    """Loads one graph's device code (the cubin, or the PTX for the driver to compile
    when the cubin is refused) and launches its kernels."""

    device = "cuda"

    def __init__(self, reply):
        driver = _driver()
        torch.zeros(1, device="cuda")  # torch's primary context exists and is current
        self._device = torch.cuda.current_device()
        self._context = check(driver.cuDevicePrimaryCtxRetain(
            check(driver.cuDeviceGet(self._device), "cuDeviceGet")), "retaining the context")
        module = None
        if reply.get("cubin"):
            result = driver.cuModuleLoadData(reply["cubin"])
            if result[0] == driver.CUresult.CUDA_SUCCESS:
                module = result[1]
        if module is None:  # a driver older than the ptxas that built the cubin
            module = check(driver.cuModuleLoadData(reply["ptx"].encode() + b"\0"),
                           "loading the PTX of a graph")
        self._module = module
        self._functions = {name: check(driver.cuModuleGetFunction(module, name.encode()),
                                       f"finding kernel {name}")
                           for name in reply["signatures"]}

    def launch(self, name, grid, block, params_address):
        stream = torch.cuda.current_stream(self._device).cuda_stream
        result = launch_kernel(self._functions[name], grid, block, stream, params_address,
                               checked=False)
        driver = _driver()
        if result[0] == driver.CUresult.CUDA_ERROR_INVALID_CONTEXT:
            # a thread where torch never made its context current (not autograd's)
            check(driver.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")
            result = launch_kernel(self._functions[name], grid, block, stream,
                                   params_address, checked=False)
        check(result, f"launching kernel {name}")


def launch_kernel(function, grid, block, stream, params_address, checked=True):
    """cuLaunchKernel with a `void **kernelParams` array at `params_address`."""
    driver = _driver()
    result = driver.cuLaunchKernel(function, *grid, *block, 0, stream, params_address, 0)
    return check(result, "cuLaunchKernel") if checked else result
