"""Launch ember's kernels on an AMD GPU through HIP's module API (`hip-python`,
`pip install ember[rocm]`), on torch's current stream (a ROCm build of torch exposes HIP
streams as torch.cuda streams).

No GPU is a clear answer, never a crash: without hip-python, without ROCm (hipInit
raises "failed to dlopen libamdhip64.so") or without a device, `rocm_unavailable()` says
why and the graph runs through ATen.
"""
import functools

import torch

from ember.errors import EmberError


class RocmLaunchError(EmberError):
    pass


def _hip():
    from hip import hip
    return hip


@functools.lru_cache(maxsize=None)
def rocm_unavailable():
    """None when kernels can be launched here, else the reason (one line)."""
    if not torch.cuda.is_available() or not torch.version.hip:
        return "torch sees no ROCm device (not a ROCm build of torch, or no GPU)"
    try:
        hip = _hip()
    except ImportError:
        return "hip-python is not installed (pip install ember[rocm])"
    try:
        (err,) = hip.hipInit(0)
    except Exception as exc:  # no libamdhip64: the bindings raise
        return f"the HIP runtime cannot be loaded ({type(exc).__name__}: {exc})"
    if err != hip.hipError_t.hipSuccess:
        return f"hipInit failed: {err}"
    return None


def device_arch():
    name = torch.cuda.get_device_properties(0).gcnArchName  # e.g. 'gfx942:sramecc+:xnack-'
    return name.split(":")[0]


def _check(result, what):
    hip = _hip()
    err = result[0] if isinstance(result, tuple) else result
    if err != hip.hipError_t.hipSuccess:
        raise RocmLaunchError(f"ember: {what} failed: {err}")
    return result[1] if isinstance(result, tuple) and len(result) == 2 else result


class RocmLauncher:
    """Loads one graph's code object and launches its kernels."""

    device = "cuda"  # torch's name for the ROCm device too

    def __init__(self, reply):
        hip = _hip()
        torch.cuda.current_device()
        self._module = _check(hip.hipModuleLoadData(reply["hsaco"]), "loading a code object")
        self._functions = {name: _check(hip.hipModuleGetFunction(self._module, name.encode()),
                                        f"finding kernel {name}")
                           for name in reply["signatures"]}

    def launch(self, name, grid, block, params_address):
        hip = _hip()
        _check(hip.hipModuleLaunchKernel(self._functions[name], *grid, *block, 0,
                                         torch.cuda.current_stream().cuda_stream,
                                         params_address, None), "hipModuleLaunchKernel")
