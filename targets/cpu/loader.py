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

from . import aten_math, malloc_tuning, runtime_symbols

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


def _symbols(object_bytes):
    elf = ELFFile(io.BytesIO(object_bytes))
    for section in elf.iter_sections():
        if section.header["sh_type"] == "SHT_SYMTAB":
            yield from (s for s in section.iter_symbols() if s.name)


def undefined_symbols(object_bytes):
    """Names the ELF object refers to but does not define."""
    return {s.name for s in _symbols(object_bytes) if s["st_shndx"] == "SHN_UNDEF"}


def defined_symbols(object_bytes):
    """Global names the ELF object defines (what another part of the graph may call)."""
    return {s.name for s in _symbols(object_bytes)
            if s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["bind"] != "STB_LOCAL"}


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
    return [(s.name, s["st_size"]) for s in _symbols(object_bytes)
            if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF"]


_perf_map_lock = threading.Lock()


def write_perf_map(engine, objects, label):
    """Append the loaded functions to /tmp/perf-<pid>.map, where `perf report` looks for
    JIT symbols (EMBER_PERF_MAP=1): a profile then names ember's kernels, not hex."""
    lines = []
    for name, size in (f for o in objects for f in defined_functions(o)):
        address = engine.get_function_address(name)
        if address:
            lines.append(f"{address:x} {max(size, 1):x} {label}:{name}\n")
    with _perf_map_lock, open(f"/tmp/perf-{os.getpid()}.map", "a") as f:
        f.writelines(lines)


_loaded_count = [0]


def check_resolvable(objects):
    """Every symbol the objects use and none of them defines is found in this process."""
    llvm = _llvm()
    defined = {name for o in objects for name in defined_symbols(o)}
    wanted = {name for o in objects for name in undefined_symbols(o)} - defined
    missing = sorted(n for n in wanted if not _resolve(llvm, n))
    if missing:
        raise UnresolvedSymbolError(
            f"the compiled code needs {', '.join(missing)}, which this process does not provide")


_LIVE_ENGINES = []


def load_objects(objects):
    """An MCJIT engine holding the linked objects (UnresolvedSymbolError first if one of
    them needs a symbol this process lacks)."""
    check_resolvable(objects)
    llvm = _llvm()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _state["tm"])
    # Never closed: tearing an MCJIT engine down (llvmlite's __del__) can segfault, and
    # compiled code may still be referenced by Dynamo's caches.
    _LIVE_ENGINES.append(engine)
    for object_bytes in objects:
        engine.add_object_file(llvm.ObjectFileRef.from_data(object_bytes))
    engine.finalize_object()
    return engine


class LoadedKernel:
    """error_code: the object's run-time check flag (run_time_checks.py) as a ctypes int,
    or None when it has no checks; error_messages[code - 1] says which check failed."""

    def __init__(self, objects, entry, arg_types, error_messages=()):
        """objects: the graph's object files (the parts LLVM compiled in parallel, which
        call each other); arg_types: 'ptr', 'i64', 'f64' or 'i1' per entry argument."""
        malloc_tuning.retain_freed_memory()
        self._engine = load_objects(objects)
        address = self._engine.get_function_address(entry)
        if not address:
            raise RuntimeError(f"loader: entry function '{entry}' not found in the object")
        _loaded_count[0] += 1
        if os.environ.get("EMBER_PERF_MAP", "0") not in ("", "0"):
            write_perf_map(self._engine, objects, f"ember{_loaded_count[0]:03d}")
        self.num_args = len(arg_types)
        self.error_messages = list(error_messages)
        self.error_code = None
        if self.error_messages:
            self.error_code = ctypes.c_int32.from_address(
                self._engine.get_global_value_address(runtime_symbols.ERROR_GLOBAL))
        self.fn = ctypes.CFUNCTYPE(None, *[_C_TYPES[t] for t in arg_types])(address)


_C_TYPES = {"ptr": ctypes.c_void_p, "i64": ctypes.c_int64, "f64": ctypes.c_double,
            "i1": ctypes.c_bool}
