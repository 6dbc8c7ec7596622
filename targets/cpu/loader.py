"""Load an object file made by the codegen worker into this process (llvmlite's MCJIT).

Loading relocates and links a finished object; no LLVM code generation runs here, so
nothing in this step can hit an LLVM assertion on odd IR. One thing could still abort:
MCJIT ends the process ("LLVM ERROR: Program used external function ...") when the
object needs a symbol this process lacks, so every undefined symbol is resolved first
and a missing one is an ordinary error (the graph then runs through ATen). The entry
function takes one bare pointer per tensor (inputs, outputs), the size arguments of a
dynamic-shape graph (int64), then the workspace pointer if any.
"""
import ctypes
import io
import os
import threading

from elftools.elf.elffile import ELFFile

from . import aten_math, runtime_symbols

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


class UnresolvedSymbolError(RuntimeError):
    """The object file calls a function this process does not provide."""


def undefined_symbols(object_bytes):
    """Names the ELF object refers to but does not define."""
    elf = ELFFile(io.BytesIO(object_bytes))
    names = set()
    for section in elf.iter_sections():
        if section.header["sh_type"] != "SHT_SYMTAB":
            continue
        for symbol in section.iter_symbols():
            if symbol.name and symbol["st_shndx"] == "SHN_UNDEF":
                names.add(symbol.name)
    return names


_process = ctypes.CDLL(None)  # libc, libm and whatever else the process has loaded


def _resolve(llvm, name):
    """True if MCJIT will find `name`; a symbol of the process that LLVM's own search
    misses (libc's memset, libm's logf) is registered with it."""
    if llvm.address_of_symbol(name):
        return True
    found = aten_math.address(name)
    if found is not None:
        llvm.add_symbol(name, found)
        return True
    try:
        fn = getattr(_process, name)
    except AttributeError:
        return False
    llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
    return True


def defined_functions(object_bytes):
    """(name, size) of each function the ELF object defines."""
    elf = ELFFile(io.BytesIO(object_bytes))
    found = []
    for section in elf.iter_sections():
        if section.header["sh_type"] != "SHT_SYMTAB":
            continue
        for symbol in section.iter_symbols():
            if symbol.name and symbol["st_info"]["type"] == "STT_FUNC" \
                    and symbol["st_shndx"] != "SHN_UNDEF":
                found.append((symbol.name, symbol["st_size"]))
    return found


_perf_map_lock = threading.Lock()


def write_perf_map(engine, object_bytes, label):
    """Append the loaded functions to /tmp/perf-<pid>.map, where `perf report` looks for
    JIT symbols (EMBER_PERF_MAP=1): a profile then names ember's kernels, not hex."""
    lines = []
    for name, size in defined_functions(object_bytes):
        address = engine.get_function_address(name)
        if address:
            lines.append(f"{address:x} {max(size, 1):x} {label}:{name}\n")
    with _perf_map_lock, open(f"/tmp/perf-{os.getpid()}.map", "a") as f:
        f.writelines(lines)


_loaded_count = [0]


def check_resolvable(object_bytes):
    llvm = _llvm()
    missing = sorted(n for n in undefined_symbols(object_bytes) if not _resolve(llvm, n))
    if missing:
        raise UnresolvedSymbolError(
            f"the compiled code needs {', '.join(missing)}, which this process does not provide")


_LIVE_ENGINES = []


class LoadedKernel:
    """error_code: the object's run-time check flag (run_time_checks.py) as a ctypes int,
    or None when it has no checks; error_messages[code - 1] says which check failed."""

    def __init__(self, object_bytes, entry, arg_types, error_messages=()):
        """arg_types: one of 'ptr', 'i64', 'f64', 'i1' per argument of the entry."""
        check_resolvable(object_bytes)
        llvm = _llvm()
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _state["tm"])
        # Never closed: tearing an MCJIT engine down (llvmlite's __del__) can segfault,
        # and compiled code may still be referenced by Dynamo's caches.
        _LIVE_ENGINES.append(self._engine)
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(object_bytes))
        self._engine.finalize_object()
        address = self._engine.get_function_address(entry)
        if not address:
            raise RuntimeError(f"loader: entry function '{entry}' not found in the object")
        _loaded_count[0] += 1
        if os.environ.get("EMBER_PERF_MAP", "0") not in ("", "0"):
            write_perf_map(self._engine, object_bytes, f"ember{_loaded_count[0]:03d}")
        self.num_args = len(arg_types)
        self.error_messages = list(error_messages)
        self.error_code = None
        if self.error_messages:
            from .run_time_checks import ERROR_GLOBAL

            self.error_code = ctypes.c_int32.from_address(
                self._engine.get_global_value_address(ERROR_GLOBAL))
        self.fn = ctypes.CFUNCTYPE(None, *[_C_TYPES[t] for t in arg_types])(address)


_C_TYPES = {"ptr": ctypes.c_void_p, "i64": ctypes.c_int64, "f64": ctypes.c_double,
            "i1": ctypes.c_bool}
