"""LLVM IR of ROCDL kernels -> an AMDGPU code object (HSACO) with llvmlite and ld.lld.

    kernel texts --link--> + ocml.bc / ockl.bc (when math calls __ocml_* / __ockl_*)
                 --then--> the __oclc_* control constants defined (after linking the
                           libraries, or LLVM 22 rejects their redefinition)
                 --O3----> object (codegen of a clone: codegen mutates the module)
                 --ld.lld -shared --no-undefined--> code object

`--no-undefined` matters: without it an unresolved `__ocml_*` call links silently and
fails only when the GPU loads the object. Debian's lld 14 cannot link code objects
v5 ("unknown abi version"): ld.lld-22 (Debian's lld-22) is looked for first. Runs in the
codegen worker: llvmlite's LLVM aborts on IR it does not expect.
"""
import glob
import io
import os
import shutil
import subprocess
import tempfile

from ember.errors import EmberError

TRIPLE = "amdgcn-amd-amdhsa"
DEFAULT_ARCH = "gfx942"
CODE_OBJECT_VERSION = 500


class CodeObjectError(EmberError):
    """A tool or library for AMD code objects is missing, or linking failed."""


def linker():
    for name in ("ld.lld-22", "ld.lld-21", "ld.lld-20", "ld.lld-19", "ld.lld-18", "ld.lld"):
        path = shutil.which(name)
        if path:
            return path
    rocm = os.environ.get("ROCM_PATH", "/opt/rocm")
    path = os.path.join(rocm, "llvm", "bin", "ld.lld")
    return path if os.path.exists(path) else None


def device_library(name):
    """ocml.bc / ockl.bc from ROCm or Debian's rocm-device-libs; None when absent."""
    roots = [os.path.join(os.environ.get("ROCM_PATH", "/opt/rocm"), "amdgcn", "bitcode"),
             "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"] + \
        glob.glob("/usr/lib/llvm-*/lib/clang/*/lib/amdgcn/bitcode")
    for root in roots:
        path = os.path.join(root, name)
        if os.path.exists(path):
            return path
    return None


def _control_constants(arch):
    """The __oclc_* constants the device libraries read (what clang passes as flags)."""
    digits = arch[3:]  # gfx942 -> 9402, gfx90a -> 9010, gfx1100 -> 11000
    major, minor, stepping = int(digits[:-2]), int(digits[-2], 16), int(digits[-1], 16)
    isa = major * 1000 + minor * 100 + stepping
    values = {"__oclc_finite_only_opt": ("i8", 0), "__oclc_unsafe_math_opt": ("i8", 0),
              "__oclc_daz_opt": ("i8", 0), "__oclc_correctly_rounded_sqrt32": ("i8", 1),
              "__oclc_wavefrontsize64": ("i8", 1), "__oclc_ISA_version": ("i32", isa),
              "__oclc_ABI_version": ("i32", CODE_OBJECT_VERSION)}
    return values


def _define_control_constants(module, arch):
    """Give the declared __oclc_* globals their values (after the libraries are linked)."""
    import llvmlite.binding as llvm
    declared = {g.name for g in module.global_variables if g.is_declaration}
    lines = []
    for name, (ty, value) in _control_constants(arch).items():
        if name in declared:
            lines.append(f"@{name} = linkonce_odr hidden local_unnamed_addr addrspace(4) "
                         f"constant {ty} {value}")
    if lines:
        extra = llvm.parse_assembly("\n".join(lines))
        extra.triple, extra.data_layout = module.triple, module.data_layout
        module.link_in(extra)


def _with_code_object_version(text):
    flag = f'!{{i32 1, !"amdhsa_code_object_version", i32 {CODE_OBJECT_VERSION}}}'
    if "!llvm.module.flags = !{" in text:
        return text.replace("!llvm.module.flags = !{", "!llvm.module.flags = !{!9999, ", 1) + \
            f"\n!9999 = {flag}\n"
    return text + f"\n!llvm.module.flags = !{{!9999}}\n!9999 = {flag}\n"


def code_object(texts, kernels, arch=DEFAULT_ARCH):
    """HSACO bytes for the kernels of `texts` (LLVM IR from llvm_handoff.py)."""
    import llvmlite.binding as llvm
    from ember.targets.cuda.ptx import internalize_and_optimize, link_kernels

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    tm = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, opt=3,
                                                               codemodel="default")
    lld = linker()
    if lld is None:
        raise CodeObjectError("no ld.lld that links AMD code objects v5 (apt-get install "
                              "lld-22)")
    module = link_kernels([_with_code_object_version(t) for t in texts], TRIPLE,
                          str(tm.target_data))
    wanted = {f.name for f in module.functions if f.is_declaration}
    for prefix, library in (("__ocml_", "ocml.bc"), ("__ockl_", "ockl.bc")):
        if any(name.startswith(prefix) for name in wanted):
            path = device_library(library)
            if path is None:
                raise CodeObjectError(f"the kernels call {prefix}* and {library} was not "
                                      "found (apt-get install rocm-device-libs)")
            with open(path, "rb") as f:
                lib = llvm.parse_bitcode(f.read())
            lib.triple, lib.data_layout = TRIPLE, str(tm.target_data)
            module.link_in(lib)
    _define_control_constants(module, arch)
    internalize_and_optimize(module, set(kernels), tm)
    module.verify()
    clone = llvm.parse_bitcode(module.as_bitcode())
    obj = tm.emit_object(clone)
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "k.o"), os.path.join(tmp, "k.hsaco")
        with open(src, "wb") as f:
            f.write(obj)
        done = subprocess.run([lld, "-flavor", "gnu", "-shared", "--no-undefined", src,
                               "-o", out], capture_output=True, text=True)
        if done.returncode != 0:
            raise CodeObjectError(f"ld.lld could not link ember's AMD code object for "
                                  f"{arch}: {done.stderr.strip()}")
        with open(out, "rb") as f:
            return f.read()


def kernel_descriptors(hsaco):
    """{kernel: descriptor size} for each `<kernel>.kd` OBJECT symbol of the code
    object's dynamic symbol table (64 bytes for a valid kernel)."""
    from elftools.elf.elffile import ELFFile
    elf = ELFFile(io.BytesIO(hsaco))
    found = {}
    table = elf.get_section_by_name(".dynsym")
    for symbol in (table.iter_symbols() if table is not None else []):
        if symbol.name.endswith(".kd") and symbol["st_info"]["type"] == "STT_OBJECT":
            found[symbol.name[:-3]] = symbol["st_size"]
    return found
