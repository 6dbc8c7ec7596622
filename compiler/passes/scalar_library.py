"""Elementwise ops torch-mlir cannot lower (lgamma, erfc, Bessel functions, nextafter,
copysign, fmod; i0, erfinv, igamma, orthogonal polynomials through ATen's own templates,
targets/cpu/aten_math.py) as loops calling the C math library, the way inductor's CPU code
calls std::lgamma: two passes, one on each side of torch-mlir's lowering.

ember-call-scalar-library (torch dialect, before torch-mlir's pipelines, which reject a
`torch.operator` but carry a call to a declared function through type conversion):

    before: %0 = torch.operator "torch.aten.lgamma"(%x) : (!torch.vtensor<[20],f32>) -> ...
    after:  %0 = func.call @ember_lib_lgamma_0(%x) : (!torch.vtensor<[20],f32>) -> ...
            func.func private @ember_lib_lgamma_0(!torch.vtensor<[20],f32>) -> ...

ember-define-scalar-library (linalg-on-tensors, after; `inline` then folds the body in):

    func.func private @ember_lib_lgamma_0(%a: tensor<20xf32>) -> tensor<20xf32> {
      %r = linalg.generic ins(%a) outs(tensor.empty) {
             %d = arith.extf %in : f32 to f64;  %y = func.call @lgamma(%d)
             %f = arith.truncf %y : f64 to f32;  linalg.yield %f }
      return %r }

Functions whose float version loses accuracy are called in double precision; operands
broadcast as in torch (right-aligned, size-1 dims read at 0). copysign is math.copysign
(an LLVM intrinsic, no call), fmod arith.remf (LLVM's frem: C's fmod, exact).
"""
import re

from torch_mlir import ir

from ember.compiler.ir_walk import collect
from ember.targets.cpu import aten_math

CALL_PASS_NAME = "ember-call-scalar-library"
DEFINE_PASS_NAME = "ember-define-scalar-library"
PREFIX = "ember_lib_"

# torch op -> (C function (double), arity, compute in f64); None: an MLIR math op instead.
FUNCTIONS = {
    "torch.aten.lgamma": ("lgamma", 1, True),
    "torch.aten.erfc": ("erfc", 1, True),
    "torch.aten.special_bessel_j0": ("j0", 1, True),
    "torch.aten.special_bessel_j1": ("j1", 1, True),
    "torch.aten.special_bessel_y0": ("y0", 1, True),
    "torch.aten.special_bessel_y1": ("y1", 1, True),
    "torch.aten.nextafter": ("nextafter", 2, False),  # the next float in the input's type
    "torch.aten.copysign.Tensor": (None, 2, False),
    "torch.aten.fmod.Tensor": (None, 2, False),  # exact, as eager's std::fmod
    # ATen's own templates (targets/cpu/aten_math.py), in the input's type as eager has them.
    **{op: (function, arity, "aten") for op, (function, arity) in aten_math.FUNCTIONS.items()},
}
# FUNCTIONS entries without a C function: the MLIR op computing them. torch-mlir would
# lower fmod as a - b * trunc(a / b): fmod(3.3, 1.1) gave -2.4e-7 instead of 1.1.
_MLIR_OPS = {"torch.aten.copysign.Tensor": "math.copysign", "torch.aten.fmod.Tensor": "arith.remf"}
_FLOAT_TYPES = {"f32": "f", "f64": ""}
_INF_GIVES_NAN = {"j0", "j1", "y0", "y1"}  # eager: NaN at +-inf, C gives 0


def _vtensor_dtype(type_text):
    m = re.fullmatch(r"!torch\.vtensor<\[([\d,?]*)\],(f32|f64)>", type_text)
    return m.group(2) if m else None


def _op_name(op):
    """'torch.aten.lgamma' for a torch.operator carrying it, else the op's own name
    (copysign is a torch op, which torch-mlir would decompose through a bitcast it cannot
    lower)."""
    if op.name == "torch.operator":
        return ir.StringAttr(op.attributes["name"]).value
    return op.name


def _library_op(op):
    name = _op_name(op)
    entry = FUNCTIONS.get(name)
    if entry is None or len(op.operands) != entry[1] or len(op.results) != 1:
        return None
    if entry[2] == "aten" and not aten_math.available():
        return None
    result = _vtensor_dtype(str(op.results[0].type))
    if result is None or any(_vtensor_dtype(str(v.type)) != result for v in op.operands):
        return None
    return name


def call_scalar_library(module_op, pass_=None):
    """A FUNCTIONS op on f32/f64 static tensors -> call of a declaration."""
    block = module_op.regions[0].blocks[0]
    for n, op in enumerate(collect(module_op, _library_op)):
        name = _op_name(op)
        symbol = f"{PREFIX}{name.split('.')[2]}_{n}"
        ins = ", ".join(str(v.type) for v in op.operands)
        out = str(op.results[0].type)
        decl = ir.Module.parse(f"func.func private @{symbol}({ins}) -> {out}",
                               context=module_op.context)
        for f in list(decl.body.operations):
            f.move_before(list(block.operations)[0])
        with ir.InsertionPoint(op), op.location:
            call = ir.Operation.create("func.call", results=[op.results[0].type],
                                       operands=list(op.operands),
                                       attributes={"callee": ir.FlatSymbolRefAttr.get(symbol)})
        op.results[0].replace_all_uses_with(call.results[0])
        op.erase()


def _maps(operand_shapes, result_shape):
    rank = len(result_shape)
    dims = [f"d{k}" for k in range(rank)]
    maps = []
    for shape in operand_shapes + [result_shape]:
        lead = rank - len(shape)
        exprs = ["0" if size == 1 and result_shape[lead + k] != 1 else dims[lead + k]
                 for k, size in enumerate(shape)]
        maps.append(f"affine_map<({', '.join(dims)}) -> ({', '.join(exprs)})>")
    return maps


def _empty_result(operand_types, result_type):
    """tensor.empty of the result; a dynamic size is read from an operand with that dim
    dynamic too (Dynamo specialises sizes 0 and 1, so a dynamic dim never broadcasts)."""
    operand_shapes = [list(t.shape) for t in operand_types]
    result_shape, sizes, lines = list(result_type.shape), [], []
    for i, size in enumerate(result_shape):
        if not ir.ShapedType.is_dynamic_size(size):
            continue
        k, j = next((k, j) for k, shape in enumerate(operand_shapes)
                    for j in [len(shape) - len(result_shape) + i]
                    if j >= 0 and ir.ShapedType.is_dynamic_size(shape[j]))
        lines += [f"  %c{i} = arith.constant {j} : index",
                  f"  %d{i} = tensor.dim %a{k}, %c{i} : {operand_types[k]}"]
        sizes.append(f"%d{i}")
    return lines + [f"  %e = tensor.empty({', '.join(sizes)}) : {result_type}"]


def _body_text(op_name, elem, args):
    function, _, in_double = FUNCTIONS[op_name]
    lines = []
    if function is None:  # one MLIR op
        lines.append(f"%y = {_MLIR_OPS[op_name]} {args[0]}, {args[1]} : {elem}")
        return lines, "%y", None
    if in_double == "aten":
        ctype, symbol = elem, aten_math.symbol(function, elem)
    else:
        ctype = "f64" if in_double else elem
        symbol = function + ("" if ctype == "f64" else _FLOAT_TYPES[elem])
    call_args = []
    for k, a in enumerate(args):
        if ctype != elem:
            lines.append(f"%w{k} = arith.extf {a} : {elem} to f64")
            a = f"%w{k}"
        call_args.append(a)
    sig = ", ".join([ctype] * len(args))
    lines.append(f"%c = func.call @{symbol}({', '.join(call_args)}) : ({sig}) -> {ctype}")
    result = "%c"
    if ctype != elem:
        lines.append(f"%y = arith.truncf %c : f64 to {elem}")
        result = "%y"
    if function in _INF_GIVES_NAN:
        lines += [f"%inf = arith.constant 0x{'7F800000' if elem == 'f32' else '7FF0000000000000'} : {elem}",
                  f"%nan = arith.constant 0x{'7FC00000' if elem == 'f32' else '7FF8000000000000'} : {elem}",
                  f"%abs = math.absf {args[0]} : {elem}",
                  f"%isinf = arith.cmpf oeq, %abs, %inf : {elem}",
                  f"%z = arith.select %isinf, %nan, {result} : {elem}"]
        result = "%z"
    return lines, result, (symbol, sig, ctype)


def define_scalar_library(module_op, pass_=None):
    """Give each ember_lib_* declaration (now on builtin tensors) its loop body."""
    block = module_op.regions[0].blocks[0]
    declared = {ir.StringAttr(o.attributes["sym_name"]).value
                for o in block.operations if o.operation.name == "func.func"}
    for f in collect(module_op, lambda o: o.name == "func.func"):
        symbol = ir.StringAttr(f.attributes["sym_name"]).value
        if not symbol.startswith(PREFIX) or len(f.regions[0].blocks):
            continue
        ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        ins, (out,) = list(ftype.inputs), list(ftype.results)
        op_name = "torch.aten." + symbol[len(PREFIX):].rsplit("_", 1)[0]
        if op_name not in FUNCTIONS:
            op_name += ".Tensor"
        elem = str(out.element_type)
        args = [f"%in{k}" for k in range(len(ins))]
        lines, result, callee = _body_text(op_name, elem, args)
        maps = _maps([list(t.shape) for t in ins], list(out.shape))
        params = ", ".join(f"%a{k}: {t}" for k, t in enumerate(ins))
        bb = ", ".join(f"{a}: {elem}" for a in args + ["%out"])
        parallel = ", ".join(['"parallel"'] * len(out.shape))
        ins_text = ", ".join(f"%a{k}" for k in range(len(ins)))
        ins_types = ", ".join(str(t) for t in ins)
        text = [f"func.func private @{symbol}({params}) -> {out} {{"] + _empty_result(ins, out) + [
                f"  %r = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
                f"iterator_types = [{parallel}]}} ins({ins_text} : {ins_types}) "
                f"outs(%e : {out}) {{",
                f"  ^bb0({bb}):"] + [f"    {l}" for l in lines] + [
                f"    linalg.yield {result} : {elem}", "  } -> " + str(out),
                f"  return %r : {out}", "}"]
        if callee is not None:  # parsed with the body (calls must resolve), moved once
            text.append(f"func.func private @{callee[0]}({callee[1]}) -> {callee[2]}")
        parsed = ir.Module.parse("\n".join(text), context=module_op.context)
        for g in list(parsed.body.operations):
            name = ir.StringAttr(g.attributes["sym_name"]).value
            if name != symbol and name in declared:
                continue
            declared.add(name)
            g.move_before(f)
        f.erase()
