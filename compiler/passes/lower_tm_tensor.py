"""ember-lower-tm-tensor: torch-mlir's TMTensor scan / scatter / sort ops (on tensors)
-> scf.for loops over tensor.extract / tensor.insert, which one-shot-bufferize turns into
in-place loads and stores.

torch-mlir lowers cumsum/cumprod/logcumsumexp to tm_tensor.scan, scatter / scatter_add /
scatter_reduce / index_put / index_add / index_copy / max_unpool to tm_tensor.scatter and
sort / argsort / topk to tm_tensor.sort; its own loop lowering only works on buffers.
Each op becomes a call to a private function built here, whose loops call the op's region
(moved into a private "combiner" function); `inline` then folds both into the caller:

    before: %r = tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(false)
                   ins(%upd, %idx : tensor<3x1x5xf32>, tensor<3x1xi64>)
                   outs(%orig : tensor<10x5xf32>) {
                 ^bb0(%u: f32, %o: f32): %s = arith.addf %o, %u : f32; tm_tensor.yield %s }
    after:  %r = scf.for %i0 = 0 to 3 iter_args(%a = %orig) {      (one loop per update dim)
                   %k = tensor.extract %idx[%i0, 0]; bounds check (scf.if)
                   %u = tensor.extract %upd[%i0, %i1, %i2]; %o = tensor.extract %a[%k, %i2]
                   %s = arith.addf %o, %u; tensor.insert %s into %a[%k, %i2] ... }

Semantics follow TMTensor's own scalar implementation (scan: out[i] = f(out[i-1], in[i]);
scatter: original[indices[i] + slice] = f(update, original[...]), applied in update order).
Scatter writes whose index is out of range are skipped (eager raises there): a compiled
loop must never write outside its buffer. Sort is a stable bottom-up merge sort
(O(n log n)); a float comparator `ole` / `oge` is made NaN-aware the way torch orders
(NaN after every number ascending, before every number descending).
"""
import functools
import re

from torch_mlir import ir
from torch_mlir.dialects import func

from ember.compiler.ir_walk import collect
from .read_only_arguments import mark_arguments_read_only

PASS_NAME = "ember-lower-tm-tensor"
LOWERED = ("tm_tensor.scan", "tm_tensor.scatter", "tm_tensor.sort")


class _Text:
    """Builds MLIR text with fresh SSA names."""

    def __init__(self):
        self.lines, self.count = [], 0

    def fresh(self, stem="v"):
        self.count += 1
        return f"%{stem}{self.count}"

    def emit(self, line):
        self.lines.append(line)

    def op(self, text, stem="v"):
        name = self.fresh(stem)
        self.emit(f"{name} = {text}")
        return name

    def const(self, value):
        return self.op(f"arith.constant {value} : index", "c")


def _shape(t):
    return list(ir.RankedTensorType(t).shape)


def _dim(t, value, type_, k):
    """Index SSA name of size k of tensor `value` (a constant when static)."""
    rt = ir.RankedTensorType(ir.Type.parse(type_) if isinstance(type_, str) else type_)
    if not rt.is_dynamic_dim(k):
        return t.const(rt.shape[k])
    return t.op(f"tensor.dim {value}, {t.const(k)} : {type_}", "d")


def _dims(t, value, type_):
    rank = len(_shape(ir.Type.parse(type_) if isinstance(type_, str) else type_))
    return [_dim(t, value, type_, k) for k in range(rank)]


def _capture_constants(op):
    """Clone constants the region reads from outside into it, so it prints standalone."""
    block = op.regions[0].blocks[0]
    inside = {o.operation for o in block.operations}
    for inner in list(block.operations):
        for k, v in enumerate(inner.operands):
            owner = v.owner if isinstance(v, ir.OpResult) else None
            if owner is not None and owner.operation not in inside and owner.name == "arith.constant":
                clone = owner.operation.clone(ir.InsertionPoint.at_block_begin(block))
                inner.operands[k] = clone.results[v.result_number]


def _region_function(op, name):
    """Text of a private func holding the op's single-block region (tm_tensor.yield ->
    return), or None if the region refers to values defined outside it."""
    _capture_constants(op)
    asm = op.get_asm(large_elements_limit=16)
    start = asm.find("^bb0(")
    end = asm.rfind("tm_tensor.yield")
    if start < 0 or end < 0 or "UNKNOWN SSA" in asm:
        return None
    header = asm[start + len("^bb0("):asm.index("):", start)]
    body = asm[asm.index("):", start) + 2:end]
    yield_line = asm[end:].split("\n")[0]
    operands, types = yield_line[len("tm_tensor.yield"):].split(":", 1)
    return (f"func.func private @{name}({header}) -> {types.strip()} {{\n{body}\n"
            f"  return {operands.strip()} : {types.strip()}\n}}")


def _at(ivs, dim, k):
    """Subscripts of the element at position `k` along `dim`, `ivs` indexing the others."""
    full = list(ivs)
    full.insert(dim, k)
    return ", ".join(full)


def _nest(t, bounds, carried, body):
    """scf.for nest over `bounds` (index SSA names) carrying `carried` [(name, type)];
    body(ivs, names) returns the names to yield. Returns the result names."""
    if not bounds:
        return body([], [n for n, _ in carried])
    c0, c1 = t.const(0), t.const(1)
    iv = t.fresh("i")
    args = [(t.fresh("a"), ty) for _, ty in carried]
    results = [t.fresh("r") for _ in carried]
    types = ", ".join(ty for _, ty in carried)
    inits = ", ".join(f"{a} = {n}" for (a, _), (n, _) in zip(args, carried))
    lhs = ", ".join(results)
    t.emit(f"{lhs} = scf.for {iv} = {c0} to {bounds[0]} step {c1} iter_args({inits}) -> ({types}) {{")
    inner = _nest(t, bounds[1:], args, lambda ivs, names: body([iv] + ivs, names))
    t.emit(f"scf.yield {', '.join(inner)} : {types}")
    t.emit("}")
    return results


def _scatter_text(op, name, combiner):
    upd, idx, orig = (v.type for v in op.operands[:3])
    u_shape, o_shape = _shape(upd), _shape(orig)
    i_elem = str(ir.RankedTensorType(idx).element_type)
    dim_map = [int(x) for x in re.findall(r"-?\d+", str(op.attributes["dimension_map"]).split(":", 1)[1])]
    t = _Text()
    t.emit(f"func.func private @{name}(%upd: {upd}, %idx: {idx}, %orig: {orig}) -> {orig} {{")
    bounds = _dims(t, "%upd", upd)
    o_dims = _dims(t, "%orig", orig)

    def body(ivs, names):
        (acc,) = names
        starts = [None] * len(o_shape)
        offset = len(o_shape) - (len(u_shape) - 1)
        for k, iv in enumerate(ivs[1:]):
            starts[k + offset] = iv
        for depth, dim in enumerate(dim_map):
            raw = t.op(f"tensor.extract %idx[{ivs[0]}, {t.const(depth)}] : {idx}")
            pos = t.op(f"arith.index_cast {raw} : {i_elem} to index")
            # index_put wraps negative indices (x[-1] = v); scatter's are errors in eager
            negative = t.op(f"arith.cmpi slt, {pos}, {t.const(0)} : index")
            wrapped = t.op(f"arith.addi {pos}, {o_dims[dim]} : index")
            pos = t.op(f"arith.select {negative}, {wrapped}, {pos} : index")
            starts[dim] = t.op(f"arith.addi {pos}, {starts[dim]} : index") if starts[dim] else pos
        ok = None
        for dim, s in enumerate(starts):
            lo = t.op(f"arith.cmpi sge, {s}, {t.const(0)} : index")
            hi = t.op(f"arith.cmpi slt, {s}, {o_dims[dim]} : index")
            both = t.op(f"arith.andi {lo}, {hi} : i1")
            ok = t.op(f"arith.andi {ok}, {both} : i1") if ok else both
        where = ", ".join(starts)
        result = t.fresh("w")
        t.emit(f"{result} = scf.if {ok} -> ({orig}) {{")
        u = t.op(f"tensor.extract %upd[{', '.join(ivs)}] : {upd}")
        o = t.op(f"tensor.extract {acc}[{where}] : {orig}")
        elem = str(ir.RankedTensorType(orig).element_type)
        new = t.op(f"func.call @{combiner}({u}, {o}) : ({elem}, {elem}) -> {elem}")
        ins = t.op(f"tensor.insert {new} into {acc}[{where}] : {orig}")
        t.emit(f"scf.yield {ins} : {orig}")
        t.emit("} else {")
        t.emit(f"scf.yield {acc} : {orig}")
        t.emit("}")
        return [result]

    (res,) = _nest(t, bounds, [("%orig", str(orig))], body)
    t.emit(f"return {res} : {orig}")
    t.emit("}")
    return "\n".join(t.lines)


def _scan_text(op, name, combiner):
    inp, out, acc = (v.type for v in op.operands[:3])
    shape = _shape(inp)
    dim = int(ir.IntegerAttr(op.attributes["dimension"]).value)
    inclusive = ir.BoolAttr(op.attributes["inclusive"]).value
    elem = str(ir.RankedTensorType(inp).element_type)
    t = _Text()
    t.emit(f"func.func private @{name}(%in: {inp}, %out: {out}, %acc: {acc}) -> ({out}, {acc}) {{")
    sizes = _dims(t, "%in", inp)
    outer = [n for k, n in enumerate(sizes) if k != dim]

    def body(ivs, names):
        o_t, a_t = names
        at = functools.partial(_at, ivs, dim)
        c0, c1, length = t.const(0), t.const(1), sizes[dim]
        first = (t.op(f"tensor.extract %in[{at(c0)}] : {inp}") if inclusive else
                 t.op(f"tensor.extract {a_t}[{', '.join(ivs)}] : {acc}"))
        o1 = t.op(f"tensor.insert {first} into {o_t}[{at(c0)}] : {out}")
        k, prev, o_arg = t.fresh("k"), t.fresh("p"), t.fresh("o")
        o_res, last = t.fresh("o"), t.fresh("p")
        t.emit(f"{o_res}, {last} = scf.for {k} = {c1} to {length} step {c1} "
               f"iter_args({o_arg} = {o1}, {prev} = {first}) -> ({out}, {elem}) {{")
        src = k if inclusive else t.op(f"arith.subi {k}, {c1} : index")
        x = t.op(f"tensor.extract %in[{at(src)}] : {inp}")
        v = t.op(f"func.call @{combiner}({prev}, {x}) : ({elem}, {elem}) -> {elem}")
        o2 = t.op(f"tensor.insert {v} into {o_arg}[{at(k)}] : {out}")
        t.emit(f"scf.yield {o2}, {v} : {out}, {elem}")
        t.emit("}")
        a2 = t.op(f"tensor.insert {last} into {a_t}[{', '.join(ivs)}] : {acc}")
        return [o_res, a2]

    res = _nest(t, outer, [("%out", str(out)), ("%acc", str(acc))], body)
    t.emit(f"return {', '.join(res)} : {out}, {acc}")
    t.emit("}")
    return "\n".join(t.lines)


def _nan_aware_comparator(op, combiner):
    """For a float sort on `cmpf ole|oge` of the first pair, a comparator text that orders
    NaN as torch does; None when the region is another shape (kept as written)."""
    body = op.regions[0].blocks[0]
    ops = list(body.operations)
    if len(ops) != 2 or ops[0].name != "arith.cmpf":
        return None
    first, second = body.arguments[0], body.arguments[1]
    pred = ir.IntegerAttr(ops[0].attributes["predicate"]).value
    if list(ops[0].operands) != [first, second] or not isinstance(first.type, ir.FloatType):
        return None
    # arith.cmpf predicates: 3 = oge (descending: NaN first), 5 = ole (ascending: NaN last)
    cmp, nan_side = {3: ("oge", "%a"), 5: ("ole", "%b")}.get(pred, (None, None))
    if cmp is None:
        return None
    elem = str(first.type)
    extra = "".join(f", %x{k}: {a.type}" for k, a in enumerate(list(body.arguments)[2:]))
    return (f"func.func private @{combiner}(%a: {elem}, %b: {elem}{extra}) -> i1 {{\n"
            f"  %n = arith.cmpf uno, {nan_side}, {nan_side} : {elem}\n"
            f"  %c = arith.cmpf {cmp}, %a, %b : {elem}\n"
            f"  %r = arith.ori %n, %c : i1\n  return %r : i1\n}}")


def _sort_text(op, name, combiner):
    types = [str(v.type) for v in op.operands]
    elems = [str(ir.RankedTensorType(v.type).element_type) for v in op.operands]
    shape = _shape(op.operands[0].type)
    dim = int(ir.IntegerAttr(op.attributes["dimension"]).value)
    n = len(types)
    t = _Text()
    params = ", ".join(f"%s{e}: {ty}" for e, ty in enumerate(types))
    t.emit(f"func.func private @{name}({params}) -> ({', '.join(types)}) {{")
    sizes = _dims(t, "%s0", types[0])
    dynamic = ", ".join(d for k, d in enumerate(sizes) if shape[k] == ir.ShapedType.get_dynamic_size())
    scratch = [t.op(f"tensor.empty({dynamic}) : {ty}") for ty in types]
    outer = [d for k, d in enumerate(sizes) if k != dim]
    length = sizes[dim]
    if shape[dim] != ir.ShapedType.get_dynamic_size():
        passes = t.const(max(0, (shape[dim] - 1).bit_length()))
    else:  # ceil(log2(length)) = 64 - ctlz(length - 1); 0 for length 1
        last = t.op(f"arith.index_cast {t.op(f'arith.subi {length}, {t.const(1)} : index')} "
                    ": index to i64")
        zeros = t.op(f"math.ctlz {last} : i64")
        width = t.op("arith.constant 64 : i64")
        count = t.op(f"arith.subi {width}, {zeros} : i64")
        passes = t.op(f"arith.index_cast {count} : i64 to index")
    carried = [(f"%s{e}", ty) for e, ty in enumerate(types)] + list(zip(scratch, types))
    all_types = ", ".join(ty for _, ty in carried)

    def row(ivs, names):
        src, dst = names[:n], names[n:]
        at = functools.partial(_at, ivs, dim)
        c0, c1, c2 = t.const(0), t.const(1), t.const(2)
        cl, cp = length, passes
        p, pa = t.fresh("pass"), [t.fresh("a") for _ in range(2 * n)]
        pr = [t.fresh("r") for _ in range(2 * n)]
        inits = ", ".join(f"{a} = {v}" for a, v in zip(pa, src + dst))
        t.emit(f"{', '.join(pr)} = scf.for {p} = {c0} to {cp} step {c1} iter_args({inits}) -> ({all_types}) {{")
        width = t.op(f"arith.shli {c1}, {p} : index")
        step = t.op(f"arith.muli {width}, {c2} : index")
        lo, la = t.fresh("lo"), [t.fresh("a") for _ in range(2 * n)]
        lr = [t.fresh("r") for _ in range(2 * n)]
        inits = ", ".join(f"{a} = {v}" for a, v in zip(la, pa))
        t.emit(f"{', '.join(lr)} = scf.for {lo} = {c0} to {cl} step {step} iter_args({inits}) -> ({all_types}) {{")
        mid = t.op(f"arith.minui {t.op(f'arith.addi {lo}, {width} : index')}, {cl} : index")
        hi = t.op(f"arith.minui {t.op(f'arith.addi {lo}, {step} : index')}, {cl} : index")
        s_now, d_now = la[:n], la[n:]
        # merge [lo, mid) and [mid, hi) of the sources into the scratch tensors
        k, i, j = t.fresh("k"), t.fresh("i"), t.fresh("j")
        ma = [t.fresh("m") for _ in range(n)]
        mr = [t.fresh("r") for _ in range(n + 2)]
        inits = ", ".join([f"{i} = {lo}", f"{j} = {mid}"] + [f"{a} = {v}" for a, v in zip(ma, d_now)])
        mtypes = ", ".join(["index", "index"] + types)
        t.emit(f"{', '.join(mr)} = scf.for {k} = {lo} to {hi} step {c1} iter_args({inits}) -> ({mtypes}) {{")
        ii = t.op(f"arith.minui {i}, {t.op(f'arith.subi {mid}, {c1} : index')} : index")
        jj = t.op(f"arith.minui {j}, {t.op(f'arith.subi {hi}, {c1} : index')} : index")
        left = [t.op(f"tensor.extract {s}[{at(ii)}] : {ty}") for s, ty in zip(s_now, types)]
        right = [t.op(f"tensor.extract {s}[{at(jj)}] : {ty}") for s, ty in zip(s_now, types)]
        pairs = ", ".join(f"{a}, {b}" for a, b in zip(left, right))
        ptypes = ", ".join(f"{e}, {e}" for e in elems)
        before = t.op(f"func.call @{combiner}({pairs}) : ({ptypes}) -> i1")
        has_left = t.op(f"arith.cmpi ult, {i}, {mid} : index")
        no_right = t.op(f"arith.cmpi uge, {j}, {hi} : index")
        take = t.op(f"arith.andi {has_left}, {t.op(f'arith.ori {no_right}, {before} : i1')} : i1")
        outs = []
        for e in range(n):
            v = t.op(f"arith.select {take}, {left[e]}, {right[e]} : {elems[e]}")
            outs.append(t.op(f"tensor.insert {v} into {ma[e]}[{at(k)}] : {types[e]}"))
        i2 = t.op(f"arith.select {take}, {t.op(f'arith.addi {i}, {c1} : index')}, {i} : index")
        j2 = t.op(f"arith.select {take}, {j}, {t.op(f'arith.addi {j}, {c1} : index')} : index")
        t.emit(f"scf.yield {', '.join([i2, j2] + outs)} : {mtypes}")
        t.emit("}")
        merged = mr[2:]
        # copy the merged run back into the sources
        k2, ca = t.fresh("k"), [t.fresh("c") for _ in range(n)]
        cr = [t.fresh("r") for _ in range(n)]
        inits = ", ".join(f"{a} = {v}" for a, v in zip(ca, s_now))
        t.emit(f"{', '.join(cr)} = scf.for {k2} = {lo} to {hi} step {c1} iter_args({inits}) -> ({', '.join(types)}) {{")
        copied = []
        for e in range(n):
            v = t.op(f"tensor.extract {merged[e]}[{at(k2)}] : {types[e]}")
            copied.append(t.op(f"tensor.insert {v} into {ca[e]}[{at(k2)}] : {types[e]}"))
        t.emit(f"scf.yield {', '.join(copied)} : {', '.join(types)}")
        t.emit("}")
        t.emit(f"scf.yield {', '.join(cr + merged)} : {all_types}")
        t.emit("}")
        t.emit(f"scf.yield {', '.join(lr)} : {all_types}")
        t.emit("}")
        return pr

    res = _nest(t, outer, carried, row)
    t.emit(f"return {', '.join(res[:n])} : {', '.join(types)}")
    t.emit("}")
    return "\n".join(t.lines)


_BUILDERS = {"tm_tensor.scatter": _scatter_text, "tm_tensor.scan": _scan_text,
             "tm_tensor.sort": _sort_text}


def _lowerable(op):
    if any(not isinstance(v.type, ir.RankedTensorType) for v in op.operands):
        return False
    if op.name == "tm_tensor.sort":
        return 0 != _shape(op.operands[0].type)[int(ir.IntegerAttr(op.attributes["dimension"]).value)]
    return True


def _replace_with_call(op, callee):
    with ir.InsertionPoint(op), op.location:
        operands = list(op.operands)
        call = func.CallOp([r.type for r in op.results], ir.FlatSymbolRefAttr.get(callee), operands)
    for old, new in zip(op.results, call.results):
        old.replace_all_uses_with(new)
    op.erase()


def lower_tm_tensor(module_op, pass_=None):
    """Replace each lowerable TMTensor op by a call to its loop function (op by op: one
    that cannot be built stays, and the caller reports it)."""
    block = module_op.regions[0].blocks[0]
    if collect(module_op, lambda o: o.name in LOWERED):
        mark_arguments_read_only(module_op)  # a scatter into an argument must copy it
    for n, op in enumerate(collect(module_op, lambda o: o.name in LOWERED)):
        if not _lowerable(op):
            continue
        name, combiner = f"ember_{op.name.split('.')[1]}_{n}", f"ember_combine_{n}"
        region = _nan_aware_comparator(op, combiner) if op.name == "tm_tensor.sort" else None
        region = region or _region_function(op, combiner)
        if region is None:
            continue
        try:
            parsed = ir.Module.parse(region + "\n" + _BUILDERS[op.name](op, name, combiner),
                                     context=module_op.context)
        except ir.MLIRError:  # leave the op: the leftover check names it
            continue
        first = list(block.operations)[0]
        for f in list(parsed.body.operations):
            f.move_before(first)
        _replace_with_call(op, name)
