"""gpu.module (NVVM / ROCDL dialect) -> LLVM IR text that llvmlite's LLVM 22 parses.

torch-mlir's LLVM is newer than llvmlite's: it prints float constants LLVM 22 rejects
(`4.471500e-02` for an f32 not exact in decimal, `+inf`, `+qnan`, `-nan(0x3FFFFF)`,
`f0x7F7FFFFF`). Every float literal is rewritten as LLVM's bit-exact hex form (f32 and
f64 values as a double's bits; half / bfloat as 0xH / 0xR), so no value changes:

    %5 = fmul float %4, 4.471500e-02   ->   %5 = fmul float %4, 0x3FA6E4E260000000

Each kernel function is renamed after its gpu.module (unique in the graph), so that all
kernels of a graph link into one LLVM module: one PTX text, one object.
"""
import re
import struct

from torch_mlir import ir
from torch_mlir.dialects import llvm as llvm_dialect

from ember.compiler.ir_walk import collect

_TYPE = re.compile(r"\b(half|bfloat|float|double)\b")
_LITERAL = re.compile(
    r"(?<=[\s(,\[<{])"
    r"(f0x[0-9A-Fa-f]+|[-+]?nan\(0x[0-9A-Fa-f]+\)|[-+]?q?nan|[-+]?inf|"
    r"[-+]?\d+\.\d*(?:[eE][-+]?\d+)?|[-+]?\d+[eE][-+]?\d+)(?=[\s,)\]}>]|$)")


def _double_hex(value):
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


def _bits_to_float(bits, kind):
    if kind in ("float",):
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    if kind == "double":
        return struct.unpack("<d", struct.pack("<Q", bits))[0]
    raise ValueError(kind)


def _rewrite(kind, literal):
    lower = literal.lower()
    if lower.startswith("f0x"):  # the value's own bits
        bits = int(literal[3:], 16)
        if kind == "half":
            return "0xH%04X" % bits
        if kind == "bfloat":
            return "0xR%04X" % bits
        return _double_hex(_bits_to_float(bits, kind))
    negative = lower.startswith("-")
    if "nan" in lower:
        value = float("-nan") if negative else float("nan")
    elif "inf" in lower:
        value = float("-inf") if negative else float("inf")
    else:
        value = float(literal)
    if kind == "float":  # the printed decimal names the nearest f32
        value = struct.unpack("<f", struct.pack("<f", value))[0]
    if kind == "half":
        return "0xH%04X" % struct.unpack("<H", struct.pack("<e", value))[0]
    if kind == "bfloat":
        f32 = struct.unpack("<I", struct.pack("<f", value))[0]
        return "0xR%04X" % (((f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16) & 0xFFFF)
    return _double_hex(value)


def _rewrite_line(line):
    if line.lstrip().startswith(("!", ";", "source_filename", "target ", "attributes")):
        return line

    def replace(m):
        kinds = _TYPE.findall(line, 0, m.start())  # the literal's type is written before it
        return _rewrite(kinds[-1], m.group(1)) if kinds else m.group(0)
    return _LITERAL.sub(replace, line)


def hex_float_literals(text):
    """Every float literal of LLVM IR text as a bit-exact hex literal of its type (the last
    float type named before it on its line)."""
    return "\n".join(_rewrite_line(line) for line in text.split("\n"))


def kernel_functions(gpu_module):
    return [o.operation for o in gpu_module.regions[0].blocks[0].operations
            if o.operation.name == "llvm.func" and "gpu.kernel" in o.attributes]


def gpu_modules(module):
    return [o.operation for o in module.body.operations if o.operation.name == "gpu.module"]


class HandoffError(ValueError):
    """A kernel still holds an op that has no LLVM translation."""


_TRANSLATABLE = ("llvm.", "nvvm.", "rocdl.")


def _check_translatable(gpu_module, name):
    # translate_module_to_llvmir segfaults on an op it does not know: refuse it first
    left = sorted({op.name for op in collect(gpu_module, lambda o: True)
                   if op.name not in ("gpu.module", "builtin.module")
                   and not op.name.startswith(_TRANSLATABLE)})
    if left:
        raise HandoffError(f"kernel {name}: no GPU lowering for {', '.join(left)}")


def translate_gpu_module(gpu_module):
    """LLVM IR text of one gpu.module, its kernel renamed to the module's name."""
    name = ir.StringAttr(gpu_module.attributes["sym_name"]).value
    _check_translatable(gpu_module, name)
    with gpu_module.location:
        inner = ir.Module.create()
        with ir.InsertionPoint(inner.body):
            for op in gpu_module.regions[0].blocks[0].operations:
                clone = op.operation.clone()
                if clone.name == "llvm.func" and "gpu.kernel" in clone.attributes:
                    clone.attributes["sym_name"] = ir.StringAttr.get(name)
        text = str(llvm_dialect.translate_module_to_llvmir(inner.operation))
    return name, hex_float_literals(text)


def kernel_signature(llvm_module, name):
    """The kernel's parameter types as llvmlite prints them ('ptr', 'i64', 'float', ...)."""
    fn = llvm_module.get_function(name)
    return [str(a.type) for a in fn.arguments]
