"""Load an object file made by the codegen worker into this process (llvmlite's MCJIT).

Loading relocates and links a finished object; no LLVM code generation runs here, so
nothing in this step can hit an LLVM assertion on odd IR. The entry function takes one
bare pointer per tensor (inputs, outputs, then the workspace if any).
"""
import ctypes
import threading

from . import runtime_symbols

_init_lock = threading.Lock()
_state = {}


def _llvm():
    with _init_lock:
        if "llvm" not in _state:
            import llvmlite.binding as llvm

            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            for symbol in runtime_symbols.known_symbols():
                address = runtime_symbols.address(symbol)
                if address is not None:
                    llvm.add_symbol(symbol, address.value)
            _state["llvm"] = llvm
            _state["tm"] = llvm.Target.from_default_triple().create_target_machine()
        return _state["llvm"]


class LoadedKernel:
    def __init__(self, object_bytes, entry, num_args):
        llvm = _llvm()
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _state["tm"])
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(object_bytes))
        self._engine.finalize_object()
        address = self._engine.get_function_address(entry)
        if not address:
            raise RuntimeError(f"loader: entry function '{entry}' not found in the object")
        self.num_args = num_args
        self.fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * num_args))(address)
