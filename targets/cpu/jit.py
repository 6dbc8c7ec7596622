"""JIT an LLVM-dialect module with the MLIR ExecutionEngine and hand back a raw C function."""
import ctypes
import threading

from torch_mlir.execution_engine import ExecutionEngine

from ember.compiler.ir_walk import has_symbol
from . import runtime_symbols


class JitKernel:
    """A compiled entry function taking one bare pointer per tensor (inputs, outputs, then
    the workspace if any).

    The engine exposes the packed wrapper `_mlir_<entry>(void **args)`, args[i] pointing
    at argument i; the argument slots are allocated once and refilled on each call.
    """

    def __init__(self, module, entry, num_args, opt_level=3):
        self.engine = ExecutionEngine(module, opt_level=opt_level)
        for symbol in runtime_symbols.known_symbols():
            if has_symbol(module.operation, symbol):
                address = runtime_symbols.address(symbol)
                if address is None:
                    raise RuntimeError(f"JIT: torch provides no '{symbol}' in this build")
                self.engine.raw_register_runtime(symbol, address)
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

