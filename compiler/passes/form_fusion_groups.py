"""ember-form-fusion-groups: decide which linalg ops become one kernel.

Works on linalg-on-tensors. Every compute op (linalg.*) ends up in exactly one
`ember_fusion.group`; a group is one kernel. Rules, applied producer -> consumer:
  * elementwise -> elementwise           (elementwise chains)
  * elementwise -> reduction             (prologue fused into the reduction's loop)
  * anchor (matmul/conv/reduction) -> elementwise, once per group
                                         (bias / activation epilogues)
Two anchors never share a group. A small elementwise producer computed from the
function's arguments alone (a batch norm's running variance, weight and bias) is not
fused into a consumer that broadcasts it: fused, its work would be redone for every
element the broadcast covers, instead of once per channel:

    before: one loop over N*C*H*W: y = (x - m[c]) * (1 / sqrt(v[c] + eps)) * w[c] + b[c]
    after:  a loop over C: s = 1 / sqrt(v + eps)
            one loop over N*C*H*W: y = (x - m[c]) * s[c] * w[c] + b[c]

`tensor.empty`, `linalg.fill` and scalar constants
feeding a group are cloned into it. A group is placed at its last member and has one
output; a member whose result is also read outside the group becomes a group of its own
(multi-output groups are future work: IRDL makes their results share one type).
"""
from torch_mlir import ir

from ember.compiler.ir_walk import collect, defining_op as _defining_op, named
from ember.dialects.fusion import GroupOp, YieldOp, GROUP_OP_NAME
from .linalg_queries import classify, OpClass, is_clonable_into_group, is_reduction_generic

PASS_NAME = "ember-form-fusion-groups"
ISOLATE_PASS_NAME = "ember-isolate-contractions"


class _UnionFind:
    def __init__(self):
        self.parent = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
        return ra


def _plan_groups(block):
    """Return groups as lists of ops (program order), one list per kernel."""
    ops = [op.operation for op in block.operations]
    classes = {op: classify(op) for op in ops}
    compute = [op for op in ops if classes[op] in (OpClass.ELEMENTWISE, OpClass.ANCHOR)]
    uf = _UnionFind()
    anchors = {}  # group root -> anchor op (at most one)
    for op in compute:
        uf.find(op)
        if classes[op] == OpClass.ANCHOR:
            anchors[op] = op
    bridges = {}  # reshape -> the consumer whose group it joins
    from_arguments = {}  # op -> whether it computes from block arguments alone
    for consumer in compute:
        for operand in consumer.operands:
            producer = _defining_op(operand)
            reshape = _reshape_bridge(producer, consumer, classes)
            if reshape is not None:
                producer = _defining_op(reshape.operands[0])
            if producer is None or producer not in classes or producer.block != block:
                continue
            pclass = classes[producer]
            if pclass not in (OpClass.ELEMENTWISE, OpClass.ANCHOR):
                continue
            ca, pa = anchors.get(uf.find(consumer)), anchors.get(uf.find(producer))
            if classes[consumer] == OpClass.ANCHOR and pclass == OpClass.ANCHOR:
                continue  # two anchors never share a kernel
            if classes[consumer] == OpClass.ANCHOR and pclass == OpClass.ELEMENTWISE:
                if not is_reduction_generic(consumer):
                    continue  # named matmul/conv take their operands as they are
            if ca is not None and pa is not None and ca != pa:
                continue
            if pclass == OpClass.ELEMENTWISE and _hoistable(producer, consumer, classes,
                                                            from_arguments):
                continue
            root = uf.union(consumer, producer)
            if reshape is not None:
                bridges[reshape] = consumer
            anchors_root = ca or pa
            for k in (uf.find(consumer), uf.find(producer)):
                anchors.pop(k, None)
            if anchors_root is not None:
                anchors[root] = anchors_root
    groups = {}
    for op in ops:  # program order, so every member list is sorted
        if op in bridges:
            groups.setdefault(uf.find(bridges[op]), []).append(op)
        elif classes[op] in (OpClass.ELEMENTWISE, OpClass.ANCHOR):
            groups.setdefault(uf.find(op), []).append(op)
    planned = []
    for members in groups.values():
        planned.extend(_split_members(members))
    return planned, classes


# A producer at most 1/BROADCAST_FACTOR the size of its consumer is computed apart.
BROADCAST_FACTOR = 8


def _static_numel(value):
    t = value.type
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        return None
    n = 1
    for s in t.shape:
        n *= s
    return n


def _computes_from_arguments(op, classes, memo):
    """True when `op` depends on block arguments and constants only, through elementwise
    ops and reshapes: no anchor (a batch statistic, a GEMM) on the way."""
    if op in memo:
        return memo[op]
    memo[op] = False  # (no cycles in SSA; guards the recursion)
    ok = classes.get(op) in (OpClass.ELEMENTWISE, OpClass.OTHER) and op.name not in (
        "func.call",)
    for v in op.operands if ok else ():
        d = _defining_op(v)
        if d is not None and not _computes_from_arguments(d, classes, memo):
            ok = False
            break
    memo[op] = ok
    return ok


def _hoistable(producer, consumer, classes, memo):
    """Whether an elementwise producer stays out of `consumer`'s group: it computes from
    the arguments alone and is much smaller than the consumer, which broadcasts it."""
    small = [_static_numel(r) for r in producer.results]
    big = [_static_numel(r) for r in consumer.results]
    if not small or not big or None in small + big:
        return False
    if max(small) * BROADCAST_FACTOR > max(big):
        return False
    return _computes_from_arguments(producer, classes, memo)


def _reshape_bridge(op, consumer, classes):
    """The reshape between a producer and an elementwise consumer that may share its
    group: a Linear on a 3-d input is a 2-d GEMM + bias, a view back to 3-d, then the
    activation or residual add. Inside one group, linalg's elementwise fusion moves the
    reshape to the GEMM's output (expansion) and the bias add and what follows become one
    loop nest:

        before: %b = generic(bias add) ins(%mm : 1024x256)        (two loop nests)
                %e = expand_shape %b [[0, 1], [2]] : 8x128x256
                %y = generic(gelu / + residual) ins(%e, ...)
        after:  one group {%b, %e, %y}, one loop nest over 8x128x256 after the GEMM

    Only an expand_shape read by elementwise ops alone, of a value read only by it, whose producer is
    elementwise or a named contraction (fenced in its own nested group, so it stays a
    BLAS call). Collapses are left alone: across one, a depthwise convolution's 49-tap
    chain joined a norm's group and was split into pieces by the group's one-output rule."""
    if op is None or op.name != "tensor.expand_shape" or classes.get(consumer) != OpClass.ELEMENTWISE:
        return None
    if not all(classes.get(u.owner.operation) == OpClass.ELEMENTWISE for u in op.results[0].uses):
        return None  # (GELU reads its input twice: every reader joins the same group)
    producer = _defining_op(op.operands[0])
    if producer is None or classes.get(producer) not in (OpClass.ELEMENTWISE, OpClass.ANCHOR):
        return None
    if classes[producer] == OpClass.ANCHOR and producer.name == "linalg.generic":
        return None  # a reduction's result: no loop nest to share
    if sum(1 for r in producer.results for _ in r.uses) != 1:
        return None
    return op


def _read_outside(member, member_set):
    return any(use.owner.operation not in member_set
               for res in member.results for use in res.uses)


def _split_members(members):
    """A group has one output, its last member, which keeps its placement at the last
    member valid. Members (other than the last) read from outside the group leave it,
    each as a group of its own; removing one can expose another, hence the loop.
    Order is kept, so every returned list is in program order."""
    current = list(members)
    while True:
        member_set = set(current)
        bad = next((m for m in current[:-1] if _read_outside(m, member_set)), None)
        if bad is None:
            break
        current.remove(bad)
    kept = set(current)
    return [current] + [[m] for m in members if m not in kept]


def _build_group(members, kind):
    """The group op, or None where its outputs would have several types: a group's results
    share one type, so a multi-result generic yielding several types stays ungrouped (a
    loop nest of its own) and the other members form groups of one."""
    member_set = set(members)
    last = members[-1]
    outputs = [res for m in members for res in m.results
               if any(use.owner.operation not in member_set for use in res.uses)]
    if len({str(o.type) for o in outputs}) > 1:
        if len(members) > 1:
            for m in members:
                _build_group([m], kind)
        return None
    clones = []

    def want_clone(op):
        if op in clones or op in member_set or not is_clonable_into_group(op):
            return False
        for v in op.operands:  # fill <- empty / constant: clone those first
            d = _defining_op(v)
            if d is not None and want_clone(d):
                clones.append(d)
        return True

    for m in members:
        for v in m.operands:
            d = _defining_op(v)
            if d is not None and want_clone(d):
                clones.append(d)
    with ir.InsertionPoint(last), last.location:
        group = GroupOp([o.type for o in outputs])
        group.operation.attributes["kind"] = ir.StringAttr.get(kind)
    block = group.body.blocks.append()
    with ir.InsertionPoint(block), last.location:
        terminator = YieldOp(outputs)
    cloned = {}
    for c in clones:
        new = c.clone(ir.InsertionPoint(terminator))
        for i, v in enumerate(new.operands):
            d = _defining_op(v)
            if d in cloned:
                new.operands[i] = cloned[d].results[v.result_number]
        cloned[c] = new
    for m in members:
        m.move_before(terminator)
        for i, v in enumerate(m.operands):
            d = _defining_op(v)
            if d in cloned:
                m.operands[i] = cloned[d].results[v.result_number]
    for k, res in enumerate(outputs):
        for use in list(res.uses):
            if use.owner.operation != terminator.operation:
                use.owner.operands[use.operand_number] = group.results[k]
    for c in clones:
        if not any(True for r in c.results for _ in r.uses):
            c.erase()
    return group


def _group_kind(members, classes):
    anchors = [m for m in members if classes.get(m) == OpClass.ANCHOR]
    if not anchors:
        return "elementwise"
    a = anchors[0].name
    base = "reduction" if a == "linalg.generic" else a.split(".", 1)[1]
    return base + ("_epilogue" if len(members) > 1 and a != "linalg.generic" else "")


def form_fusion_groups(op, pass_=None):
    """Python pass body: `op` is the module (or a func)."""
    for f in collect(op, named("func.func")):
        if not f.regions[0].blocks:
            continue
        block = f.regions[0].blocks[0]
        if any(o.name == GROUP_OP_NAME for o in block.operations):
            continue  # already grouped
        plans, classes = _plan_groups(block)
        kinds = [_group_kind(members, classes) for members in plans]
        for members, kind in zip(plans, kinds):
            _build_group(members, kind)


def isolate_named_contractions(op, pass_=None):
    """ember-isolate-contractions: wrap every named contraction / convolution / pooling
    op (with its init fill) in a nested group of its own. linalg's elementwise fusion
    also propagates reshapes, and would otherwise generalise a named matmul into a
    generic that no longer reaches the BLAS lowering."""
    anchors = collect(op, lambda o: classify(o) == OpClass.ANCHOR and o.name != "linalg.generic")
    for a in anchors:
        # A reshape feeding the contraction would be propagated into it as well: fence it.
        for v in a.operands:
            d = _defining_op(v)
            if d is not None and d.name in ("tensor.collapse_shape", "tensor.expand_shape"):
                _build_group([d], "reshape")
        _build_group([a], "contraction")
