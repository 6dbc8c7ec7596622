"""Native symbols the lowered code calls, found in the libraries torch already loaded:
MKL's `sgemm_` in libtorch_cpu and the OpenMP entry points of torch's libgomp (so the
JIT shares one MKL and one OpenMP thread team with eager PyTorch)."""
import ctypes
import os

# The i32 global a failed run-time check writes its message number to (run_time_checks.py
# defines it, the loader reads it).
ERROR_GLOBAL = "ember_error_code"
BLAS_SYMBOL = "sgemm_"
BATCH_SYMBOL = "sgemm_batch_"  # MKL only; batched matmuls loop over sgemm_ without it
OPENMP_SYMBOLS = ("GOMP_parallel", "omp_get_thread_num", "omp_get_num_threads")
_PROVIDERS = {BLAS_SYMBOL: "libtorch_cpu.so", BATCH_SYMBOL: "libtorch_cpu.so", **{s: "libgomp.so.1" for s in OPENMP_SYMBOLS}}
_libraries = {}


def _library(name):
    if name not in _libraries:
        import torch

        bundled = os.path.join(os.path.dirname(torch.__file__), "lib", name)
        try:  # torch's own copy first, else whatever the process loaded under that name
            _libraries[name] = ctypes.CDLL(bundled if os.path.exists(bundled) else name)
        except OSError:
            _libraries[name] = None
    return _libraries[name]


def address(symbol):
    """The symbol's address as a ctypes pointer, or None where torch does not provide it."""
    lib = _library(_PROVIDERS[symbol])
    if lib is None or not hasattr(lib, symbol):
        return None
    return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p)


def known_symbols():
    return tuple(_PROVIDERS)


def openmp_available():
    return all(address(s) is not None for s in OPENMP_SYMBOLS)
