"""One AOTAutograd graph -> a callable: ember kernels where possible, ATen where not.

    graph:  a = mm(x, w); b = sort(a); c = relu(b.values) * 2
    result: ember_0(x, w) -> a; b = aten.sort(a) (ATen); ember_1(b.values) -> c

Nodes that must run through ATen (compiler/extern_ops.py) split the graph into
partitions (torch.fx's CapabilityBasedPartitioner, no cycles); each partition is compiled
(compiler/driver.py). A partition that fails naming an ATen op sends that op to ATen and
the partitioning is redone (a few rounds); a failure that names no op, or a crash of the
codegen worker, sends the partition's nodes to ATen. The warning names each op once.
"""
import logging
import operator

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ember.errors import EmberError, EmberUnsupportedError
from . import (constant_scalars, extern_layouts, extern_ops, importer, low_precision,
               narrow_int_casts, scalar_prologue, unsigned_bytes, zero_dim)
from .diagnostics import warn_once
from .driver import compile_graph
from .fx_meta import value_of as _val
from .graph_outputs import _copy_graph
from .partition_symbols import pass_missing_symbols, sizes_from_graph_inputs

log = logging.getLogger("ember")
_MAX_ROUNDS = 6


class _NotExtern(OperatorSupportBase):
    def __init__(self, extern):
        self.extern = extern

    def is_node_supported(self, submodules, node):
        return node.op == "call_function" and node not in self.extern


class _CompiledSubgraph(torch.nn.Module):
    def __init__(self, compiled):
        super().__init__()
        self.compiled = compiled

    def forward(self, *args):
        return self.compiled(*args)


# Ops that reach the backend after AOTAutograd's decompositions (Dynamo's
# tensorify-python-scalars pass writes SymFloat arithmetic as true_divide) and that
# torch-mlir knows under another name.
_ALIASES = {torch.ops.aten.true_divide.Tensor: torch.ops.aten.div.Tensor,
            torch.ops.aten.true_divide.Scalar: torch.ops.aten.div.Scalar}


def rename_aliases(gm):
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in _ALIASES:
            node.target = _ALIASES[node.target]
    gm.recompile()


def _warn_unsupported(extern, where):
    """One warning per unsupported ATen op (getitems follow their source, unnamed)."""
    for node, (kind, err) in extern.items():
        if kind == "unsupported" and node.target is not operator.getitem:
            _warn(err, where)


def _warn(exc, where):
    key = (exc.op, exc.detail.splitlines()[0] if exc.detail else "")
    first, _, rest = str(exc).partition("\n")
    warn_once(key, f"{first}; {where}" + (f"\n{rest}" if rest else ""), stacklevel=5)
    log.info("ember fallback: %s", exc)


def _nodes_for_error(exc, nodes):
    """Nodes of a failing partition that the error names (by ATen op)."""
    op = exc.op if isinstance(exc, EmberUnsupportedError) else None
    if not op:
        return []
    base = op.split(".")[-1]
    return [n for n in nodes if n.op == "call_function"
            and importer.user_op_name(n).split(".")[-1] == base]


def _describe_node_error(node, reason):
    return EmberUnsupportedError(importer.user_op_name(node), importer.node_input_shapes(node),
                                 reason)


def _keep_size_arithmetic_compiled(gm, extern):
    """Size arithmetic (`sym_size`, `s1 - 1`, `// 4`) yields no tensor, yet splitting the
    graph at it would leave partitions whose inputs have sizes like `(s1 - 1)//4 + 1`, from
    which no symbol can be read. When it is all that would run through ATen, it stays in
    the graph: the kernel's call prologue evaluates it from the input sizes
    (scalar_prologue.py)."""
    reads = scalar_prologue.symbol_reads([n for n in gm.graph.nodes if n.op == "placeholder"])
    sizes = [n for n in extern
             if scalar_prologue.is_computable_from_inputs(_val(n), reads)]
    if sizes and len(sizes) == len(extern):
        for n in sizes:
            del extern[n]


def compile_fx_graph(gm, example_inputs, *, target, options, strict, mutated_inputs=()):
    """Return a callable with the graph's semantics; raise in strict mode when an op must
    run through ATen because ember cannot lower it. `mutated_inputs`: see
    driver.compile_graph (used when the graph is one kernel)."""
    rename_aliases(gm)
    if low_precision.has_low_precision(gm):
        low_precision.upcast(gm)
        if target != "cpu":
            low_precision.gemms_in_low_precision(gm)
    conv, low_casts = options.get("conv", "aten"), target != "cpu"
    constant_scalars.fold_constant_scalars(gm)
    narrow_int_casts.route_through_int32(gm)
    unsigned_bytes.widen_uint8(
        gm, lambda node: extern_ops.classify(node, conv, low_casts) is not None)
    zero_dim.lift_zero_dim(gm)
    extern = {}  # node -> (kind, reason)
    for node, (kind, reason) in extern_ops.extern_nodes(gm, conv, low_casts).items():
        extern[node] = (kind, _describe_node_error(node, reason))
    _keep_size_arithmetic_compiled(gm, extern)
    extern_layouts.conv_inputs_in_conv_layout(gm, extern)
    sizes_from_graph_inputs(gm, extern)
    for node, (kind, err) in extern.items():
        if kind == "unsupported":
            if strict:
                raise err
    if not extern:
        try:
            return compile_graph(gm, example_inputs, target, options, mutated_inputs)
        except Exception as exc:
            if strict:
                raise
            if not isinstance(exc, EmberError):
                log.debug("ember: graph failed", exc_info=True)
                exc = EmberError(f"internal error: {type(exc).__name__}: {exc}")
            culprits = _nodes_for_error(exc, list(gm.graph.nodes))
            err = exc if isinstance(exc, EmberUnsupportedError) else EmberUnsupportedError(
                "the graph", "", str(exc))
            for n in culprits or [n for n in gm.graph.nodes if n.op == "call_function"]:
                extern[n] = ("unsupported", err)
            if not culprits:
                _warn(err, "this graph runs through ATen (eager)")
                return gm
    for _ in range(_MAX_ROUNDS):
        result, failure = _try_partitioned(gm, extern, target, options)
        if failure is None:
            _warn_unsupported(extern, "it runs through ATen (eager); the rest of the graph "
                                      "stays compiled")
            return result
        exc, part_nodes = failure
        if strict:
            raise exc
        culprits = _nodes_for_error(exc, part_nodes) or part_nodes
        err = exc if isinstance(exc, EmberUnsupportedError) else EmberUnsupportedError(
            "a partition", "", str(exc))
        for n in culprits:
            extern[n] = ("unsupported", err)
        for n in gm.graph.nodes:  # getitems follow their source
            if n.op == "call_function" and n.target is operator.getitem and n.args[0] in extern:
                extern[n] = extern[n.args[0]]
    _warn_unsupported(extern, "it runs through ATen (eager)")
    return gm


def _try_partitioned(gm, extern, target, options):
    """(runnable GraphModule, None) or (None, (error, nodes of the failing partition))."""
    work = torch.fx.GraphModule(gm, _copy_graph(gm.graph))
    names = {n.name: n for n in work.graph.nodes}
    work_extern = {names[n.name] for n in extern}
    partitioner = CapabilityBasedPartitioner(work, _NotExtern(work_extern),
                                             allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    originals = {n.name: n for n in gm.graph.nodes}
    part_nodes = {}
    for i, p in enumerate(partitions):
        part_nodes[i] = [originals[n.name] for n in p.nodes]
    fused = partitioner.fuse_partitions(partitions, prefix="ember_")
    size_nodes = {}
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not node.target.startswith("ember_"):
            continue
        sub = getattr(fused, node.target)
        pass_missing_symbols(fused, node, sub, size_nodes)
        inputs = [_val(a) for a in node.args]
        try:
            compiled = compile_graph(sub, inputs, target, options)
        except Exception as exc:  # a bug in ember must not cost more than this partition
            if not isinstance(exc, EmberError):
                log.debug("ember: partition failed", exc_info=True)
                exc = EmberError(f"internal error: {type(exc).__name__}: {exc}")
            index = int(node.target.split("_")[-1])
            return None, (exc, part_nodes.get(index, []))
        setattr(fused, node.target, _CompiledSubgraph(compiled))
    fused.recompile()
    return fused, None
