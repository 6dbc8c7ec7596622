"""JIT an LLVM-dialect module with the MLIR ExecutionEngine and hand back a raw C function."""
import ctypes
import os
import threading

from torch_mlir.execution_engine import ExecutionEngine

from ember.compiler.ir_walk import has_symbol
from .blas import BLAS_SYMBOL
from .parallel import RUNTIME_SYMBOLS as OPENMP_SYMBOLS

# Runtime symbols the lowered code may call, and the torch library (already loaded by
# torch, so the same MKL and the same OpenMP thread team) that provides each.
_PROVIDERS = {BLAS_SYMBOL: "libtorch_cpu.so", **{s: "libgomp.so.1" for s in OPENMP_SYMBOLS}}
_libraries = {}


def _address(symbol):
    name = _PROVIDERS[symbol]
    if name not in _libraries:
        import torch

        _libraries[name] = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", name))
    return ctypes.cast(getattr(_libraries[name], symbol), ctypes.c_void_p)


class JitKernel:
    """A compiled entry function taking one bare pointer per tensor (inputs, outputs, then
    the workspace if any).

    The engine exposes the packed wrapper `_mlir_<entry>(void **args)`, args[i] pointing
    at argument i; the argument slots are allocated once and refilled on each call.
    """

    def __init__(self, module, entry, num_args, opt_level=3):
        self.engine = ExecutionEngine(module, opt_level=opt_level)
        for symbol in _PROVIDERS:
            if has_symbol(module.operation, symbol):
                self.engine.raw_register_runtime(symbol, _address(symbol))
        address = self.engine.raw_lookup(entry)
        if not address:
            raise RuntimeError(f"JIT: entry function '{entry}' not found")
        self._packed_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        self._slots = (ctypes.c_void_p * num_args)()
        base = ctypes.addressof(self._slots)
        size = ctypes.sizeof(ctypes.c_void_p)
        self._packed = (ctypes.c_void_p * num_args)(*[base + i * size for i in range(num_args)])
        self._lock = threading.Lock()
        self.num_args = num_args

    def fn(self, *pointers):
        with self._lock:  # the slots are shared; one call at a time
            self._slots[:] = pointers
            self._packed_fn(self._packed)

