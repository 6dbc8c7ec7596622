"""ATen's own scalar special functions as a small shared library the compiled code calls.

torch implements i0, erfinv, igamma, the orthogonal polynomials, the modified Bessel
functions, ... as header-only templates (torch/include/ATen/native/Math.h) that its CPU
kernels call once per element, and inductor's C++ kernels include that header and call
them too. ember does the same: a one-file C++ wrapper exports each template for float and
double under a C name (`ember_aten_calc_i0_f32`), built once with the system C++ compiler
and cached on disk, so the compiled loops give the very numbers eager gives.

Without a C++ compiler the ops that need it run through ATen, with that reason in the
warning. The cache lives in $EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember, else
~/.cache/ember, under a key of the torch version, the wrapper source and the compiler.
"""
import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading

log = logging.getLogger("ember")

# torch op (as torch-mlir names it) -> (ATen template, arity).
FUNCTIONS = {
    "torch.aten.i0": ("calc_i0", 1),
    "torch.aten.special_i0e": ("calc_i0e", 1),
    "torch.aten.special_i1": ("calc_i1", 1),
    "torch.aten.special_i1e": ("calc_i1e", 1),
    "torch.aten.special_ndtri": ("calc_ndtri", 1),
    "torch.aten.erfinv": ("calc_erfinv", 1),
    "torch.aten.igamma": ("calc_igamma", 2),
    "torch.aten.igammac": ("calc_igammac", 2),
    "torch.aten.special_airy_ai": ("airy_ai_forward", 1),
    "torch.aten.special_modified_bessel_i0": ("modified_bessel_i0_forward", 1),
    "torch.aten.special_modified_bessel_i1": ("modified_bessel_i1_forward", 1),
    "torch.aten.special_modified_bessel_k0": ("modified_bessel_k0_forward", 1),
    "torch.aten.special_modified_bessel_k1": ("modified_bessel_k1_forward", 1),
    "torch.aten.special_scaled_modified_bessel_k0": ("scaled_modified_bessel_k0_forward", 1),
    "torch.aten.special_scaled_modified_bessel_k1": ("scaled_modified_bessel_k1_forward", 1),
    **{f"torch.aten.special_{p}_polynomial_{k}": (f"{p}_polynomial_{k}_forward", 2)
       for p, kinds in (("chebyshev", "tuvw"), ("shifted_chebyshev", "tuvw"),
                        ("hermite", ("h", "he")), ("laguerre", "l"), ("legendre", "p"))
       for k in kinds},
}
_C_TYPES = {"f32": "float", "f64": "double"}
_lock = threading.Lock()
_state = {}


def symbol(function, elem):
    return f"ember_aten_{function}_{elem}"


def all_symbols():
    return tuple(symbol(function, elem) for function, _ in sorted(set(FUNCTIONS.values()))
                 for elem in _C_TYPES)


def _source():
    lines = ["#include <ATen/native/Math.h>", 'extern "C" {']
    for function, arity in sorted(set(FUNCTIONS.values())):
        for elem, ctype in _C_TYPES.items():
            params = ", ".join(f"{ctype} a{k}" for k in range(arity))
            args = ", ".join(f"a{k}" for k in range(arity))
            lines.append(f"{ctype} {symbol(function, elem)}({params}) "
                         f"{{ return {function}({args}); }}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _compiler():
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def _arch_flags():
    """The instruction set of the ATen kernels eager dispatches to on this CPU: their
    compiler contracts a*b+c into FMA, and so must this build for equal roundings."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    if capability.startswith("AVX512"):
        return ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma"]
    if capability == "AVX2":
        return ["-mavx2", "-mfma"]
    return []


def _cache_dir():
    from ember.compiler.object_cache import cache_root

    return os.path.join(cache_root(), "aten_math")


def _compile(compiler, source, flags, output):
    import torch

    include = os.path.join(os.path.dirname(torch.__file__), "include")
    with tempfile.TemporaryDirectory(dir=os.path.dirname(output)) as scratch:
        cpp = os.path.join(scratch, "aten_math.cpp")
        with open(cpp, "w") as f:
            f.write(source)
        partial = os.path.join(scratch, "lib.so")
        try:
            done = subprocess.run(
                [compiler, "-O3", "-std=c++17", "-fPIC", "-shared", *flags, f"-I{include}",
                 cpp, "-o", partial], capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
        if done.returncode != 0:
            return " ".join(done.stderr.strip().splitlines()[-3:])
        os.replace(partial, output)  # atomic: a concurrent build cannot leave half a file
    return None


def _build():
    """Path of the built library, or raises RuntimeError saying why there is none."""
    import torch

    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler found (set CXX) to build ATen's special functions")
    source, flags = _source(), _arch_flags()
    key = hashlib.sha256("\0".join([torch.__version__, source, compiler, *flags]).encode())
    directory = _cache_dir()
    path = os.path.join(directory, f"libember_aten_math_{key.hexdigest()[:16]}.so")
    if os.path.exists(path):
        return path
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        directory = tempfile.mkdtemp(prefix="ember_aten_math_")
        path = os.path.join(directory, os.path.basename(path))
    log.info("ember: building ATen's special functions with %s (once; cached in %s)",
             compiler, directory)
    error = _compile(compiler, source, flags, path)
    if error and flags:  # a compiler without those target flags: plain code, same values
        error = _compile(compiler, source, [], path)  # up to FMA roundings
    if error:
        raise RuntimeError(f"building ATen's special functions failed: {error}")
    return path


def library():
    """The loaded ctypes library, or None (then `unavailable_reason()` says why)."""
    with _lock:
        if "library" not in _state:
            try:
                _state["library"] = ctypes.CDLL(_build())
            except (RuntimeError, OSError) as e:
                _state["library"], _state["reason"] = None, str(e)
                log.warning("ember: %s; those ops run through ATen", e)
        return _state["library"]


def available():
    return library() is not None


def unavailable_reason():
    library()
    return _state.get("reason")


def address(name):
    """Address of an ember_aten_* symbol, or None."""
    lib = library() if name.startswith("ember_aten_") else None
    if lib is None or not hasattr(lib, name):
        return None
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
