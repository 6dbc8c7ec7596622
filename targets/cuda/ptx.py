"""LLVM IR of NVVM kernels -> PTX with llvmlite (torch-mlir's own LLVM has no NVPTX
target), libdevice linked for the `__nv_*` math, then `ptxas` when it is installed.

Runs in the codegen worker: llvmlite's LLVM is built with assertions, so IR it does not
expect aborts the process.
"""
import functools
import glob
import os
import shutil
import subprocess
import tempfile

from ember.errors import EmberError

TRIPLE = "nvptx64-nvidia-cuda"
DATA_LAYOUT = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
DEFAULT_ARCH = "sm_90"
PTX_FEATURES = "+ptx80"


class PtxError(EmberError):
    """ptxas rejected the PTX or a CUDA tool is missing."""


@functools.lru_cache(maxsize=None)
def cuda_tool(name):
    """Path of a CUDA toolkit tool or file: $CUDA_HOME, /usr/local/cuda*, then the
    `nvidia-cuda-nvcc` wheel; None when absent."""
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"] + \
        sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    try:  # the `nvidia-cuda-nvcc` (ptxas) and `nvidia-nvvm` (libdevice) wheels
        import nvidia
        for base in getattr(nvidia, "__path__", []):
            roots += sorted(glob.glob(os.path.join(base, "cu*")), reverse=True)
            roots += [os.path.join(base, "cuda_nvcc")]
    except ImportError:
        pass
    for root in filter(None, roots):
        for sub in (f"bin/{name}", f"nvvm/libdevice/{name}"):
            path = os.path.join(root, sub)
            if os.path.exists(path):
                return path
    return shutil.which(name)


def libdevice_path():
    return cuda_tool("libdevice.10.bc")


def _llvm():
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def link_kernels(texts, triple, data_layout):
    """One llvmlite module of all kernel texts, each verified right after parsing."""
    llvm = _llvm()
    linked = None
    for text in texts:
        module = llvm.parse_assembly(text)
        module.triple, module.data_layout = triple, data_layout
        module.verify()
        if linked is None:
            linked = module
        else:
            linked.link_in(module)
    return linked


def internalize_and_optimize(module, kernels, target_machine, speed_level=3):
    """Everything but the kernels internal (libdevice's hundreds of functions then go
    away), then LLVM's O3 pipeline."""
    llvm = _llvm()
    for fn in module.functions:
        if not fn.is_declaration and fn.name not in kernels:
            fn.linkage = "internal"
    for gv in module.global_variables:
        if not gv.is_declaration:
            gv.linkage = "internal"
    pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    pb = llvm.create_pass_builder(target_machine, pto)
    pb.getModulePassManager().run(module, pb)
    return module


def ptx_of(texts, kernels, arch=DEFAULT_ARCH):
    """PTX text for the kernels of `texts` (LLVM IR from llvm_handoff.py)."""
    llvm = _llvm()
    module = link_kernels(texts, TRIPLE, DATA_LAYOUT)
    if any(f.name.startswith("__nv_") for f in module.functions if f.is_declaration):
        path = libdevice_path()
        if path is None:
            raise PtxError("the kernels call libdevice math, and libdevice.10.bc was not "
                           "found (install the CUDA toolkit or `pip install nvidia-cuda-nvcc`)")
        with open(path, "rb") as f:
            libdevice = llvm.parse_bitcode(f.read())
        libdevice.triple, libdevice.data_layout = TRIPLE, DATA_LAYOUT
        module.link_in(libdevice)
    target = llvm.Target.from_triple(TRIPLE)
    tm = target.create_target_machine(cpu=arch, features=PTX_FEATURES, opt=3,
                                      codemodel="default")
    internalize_and_optimize(module, set(kernels), tm)
    module.verify()
    return tm.emit_assembly(module)


def check_with_ptxas(ptx, arch=DEFAULT_ARCH):
    """Assemble the PTX with ptxas (cubin bytes); None when ptxas is not installed."""
    ptxas = cuda_tool("ptxas")
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas, f"-arch={arch}", src, "-o", out],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise PtxError(f"ptxas rejected ember's PTX for {arch}: {done.stderr.strip()}")
        with open(out, "rb") as f:
            return f.read()


@functools.lru_cache(maxsize=None)
def toolchain_fingerprint():
    """What else shapes GPU binaries besides ember's and llvmlite's code: the ptxas
    release, libdevice, and the AMD linker and device libraries (a disk-cache key part)."""
    from ember.targets.rocm.code_object import device_library, linker

    parts = []
    ptxas = cuda_tool("ptxas")
    if ptxas:
        done = subprocess.run([ptxas, "--version"], capture_output=True, text=True)
        parts.append(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ptxas)
    for path in (libdevice_path(), linker(), device_library("ocml.bc"),
                 device_library("ockl.bc")):
        if path:
            st = os.stat(path)
            parts.append(f"{path}:{st.st_size}:{int(st.st_mtime)}")
    return "|".join(parts)
