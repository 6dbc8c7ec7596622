"""What a compiled graph returns, planned so that the caller sees eager's tensors.

The kernel writes each distinct computed value once into a fresh contiguous buffer. Eager
semantics need more than that, and the plan made here restores it at call time:
  * an output returned twice (grad-mode forwards save tensors that are also outputs;
    `x.mul_(2); return x`) is ONE kernel output handed back twice (the same tensor);
  * an output that is a view (`y.t()`, `y.view(-1)`, `x[1:]`) of another output or of an
    input is NOT computed by the kernel: the view op is replayed on the real base tensor,
    so outputs alias each other (and inputs) exactly as in eager;
  * a computed output whose eager strides are a permutation of a dense layout (a
    transposed result, a channels_last conv) is computed in that physical order (one
    `permute` fused into its kernel) and handed back as `buffer.permute(inverse)`, which
    has eager's strides.

    before: return (y, y, y.t(), x.view(-1), z)     z with strides (1, 4)
    kernel: return (y, z.permute(1, 0))
    plan:   [kernel 0, kernel 0, view(kernel 0, t), view(input 0, view(-1)),
             kernel 1 permuted back by (1, 0)]
"""
import operator
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

import torch

from .fx_meta import value_of as _val
from .scalar_prologue import expression_step, is_computable_from_inputs, symbol_reads

aten = torch.ops.aten

VIEW_OPS = {
    aten.view.default, aten._unsafe_view.default, aten.t.default, aten.transpose.int,
    aten.permute.default, aten.expand.default, aten.slice.Tensor, aten.select.int,
    aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
    aten.alias.default, aten.as_strided.default, aten.diagonal.default, aten.unfold.default,
    aten.reshape.default, aten.view.dtype, aten.narrow.default,
}
MULTI_VIEW_OPS = {aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int,
                  aten.chunk.default}


@dataclass
class OutputPlan:
    """How to build each graph output from the inputs and the kernel's buffers."""
    # one entry per output leaf: ("none",) | ("value", v) | ("input", i, views)
    # | ("kernel", k, views) | ("size", function, input indices): a SymInt output
    # (`x.shape[0] - 1`) evaluated from the input sizes
    entries: List[Tuple] = field(default_factory=list)
    # per kernel buffer: the permutation applied in the kernel (None: plain contiguous)
    permutations: List[Optional[Tuple[int, ...]]] = field(default_factory=list)
    single: bool = False  # the graph returns one value, not a tuple

    def __post_init__(self):
        self._inverses = None
        self._passthrough = None

    def _prepare(self):
        """Inverse permutations, and whether the outputs are just the kernel's buffers in
        order (the common case: assembling then costs nothing per call)."""
        self._inverses = []
        for perm in self.permutations:
            inverse = None
            if perm is not None:
                inverse = [0] * len(perm)
                for i, p in enumerate(perm):
                    inverse[p] = i
            self._inverses.append(inverse)
        self._passthrough = (all(p is None for p in self.permutations)
                             and len(self.entries) == len(self.permutations)
                             and all(e[0] == "kernel" and e[1] == k and not e[2]
                                     for k, e in enumerate(self.entries)))

    def assemble(self, inputs, buffers):
        if self._passthrough is None:
            self._prepare()
        if self._passthrough:
            return buffers[0] if self.single else list(buffers)
        restored = [buf if inverse is None else buf.permute(inverse)
                    for buf, inverse in zip(buffers, self._inverses)]
        results = []
        for entry in self.entries:
            kind = entry[0]
            if kind == "none":
                results.append(None)
            elif kind == "value":
                results.append(entry[1])
            elif kind == "size":
                results.append(entry[1](*[inputs[i] for i in entry[2]]))
            else:
                base = inputs[entry[1]] if kind == "input" else restored[entry[1]]
                results.append(_replay(base, entry[2]))
        return results[0] if self.single else results


def _replay(tensor, views):
    for target, args, kwargs in views:
        if target is operator.getitem:
            tensor = tensor[args[0]]
            continue
        try:
            tensor = target(tensor, *args, **kwargs)
        except RuntimeError:
            if target is not aten.view.default:
                raise
            tensor = aten.reshape.default(tensor, *args, **kwargs)  # view needs strides
    return tensor


def _has_node(args):
    return any(isinstance(a, torch.fx.Node) for a in torch.utils._pytree.tree_leaves(args))


def _view_chain(node):
    """(base node, [(target, args, kwargs), ...]) following pure view ops back from node."""
    chain = []
    while node.op == "call_function":
        if node.target in VIEW_OPS and not _has_node((node.args[1:], node.kwargs)):
            chain.append((node.target, tuple(node.args[1:]), dict(node.kwargs)))
            node = node.args[0]
        elif (node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node)
              and node.args[0].op == "call_function" and node.args[0].target in MULTI_VIEW_OPS
              and not _has_node((node.args[0].args[1:], node.args[0].kwargs))):
            src = node.args[0]
            chain.append((operator.getitem, (node.args[1],), {}))
            chain.append((src.target, tuple(src.args[1:]), dict(src.kwargs)))
            node = src.args[0]
        else:
            break
    return node, chain[::-1]


def dense_permutation(val):
    """The permutation p such that val.permute(p) is contiguous, for a non-contiguous but
    dense tensor; None when val is contiguous or not a permuted dense layout."""
    if not isinstance(val, torch.Tensor) or val.is_contiguous() or val.dim() < 2:
        return None
    shape, stride = val.shape, val.stride()
    perm = tuple(sorted(range(val.dim()), key=lambda d: (-stride[d], -shape[d], d)))
    probe = torch.empty_strided(tuple(shape), tuple(stride), device="meta")
    return perm if probe.permute(perm).is_contiguous() else None


def plan_outputs(gm):
    """Return (OutputPlan, kernel GraphModule or None): the kernel graph returns only the
    distinct computed bases (permuted where eager's strides ask for it)."""
    graph = gm.graph
    output = next(n for n in graph.nodes if n.op == "output")
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    ret = output.args[0]
    plan = OutputPlan(single=not isinstance(ret, (tuple, list)))
    leaves = [ret] if plan.single else list(ret)
    reads = symbol_reads(placeholders)
    bases = []  # distinct computed base nodes, kernel output order
    for leaf in leaves:
        if leaf is None:
            plan.entries.append(("none",))
            continue
        if not isinstance(leaf, torch.fx.Node):
            plan.entries.append(("value", leaf))
            continue
        if is_computable_from_inputs(_val(leaf), reads):
            function, args, _ = expression_step(_val(leaf), reads)
            plan.entries.append(("size", function, [i for _, i in args]))
            continue
        base, chain = _view_chain(leaf)
        if not isinstance(_val(base), torch.Tensor):
            base, chain = leaf, []
        if base.op == "placeholder":
            plan.entries.append(("input", placeholders.index(base), chain))
            continue
        if base not in bases:
            bases.append(base)
        plan.entries.append(("kernel", bases.index(base), chain))
    if not bases:
        return plan, None
    new_gm = torch.fx.GraphModule(gm, _copy_graph(gm.graph))  # copies get_attr constants
    kgraph = new_gm.graph
    kout = next(n for n in kgraph.nodes if n.op == "output")
    names = {n.name: n for n in kgraph.nodes}
    returned = []
    for base in bases:
        node = names[base.name]
        perm = dense_permutation(_val(base))
        plan.permutations.append(perm)
        if perm is not None:
            with kgraph.inserting_before(kout):
                permuted = kgraph.call_function(aten.permute.default, (node, list(perm)))
            permuted.meta["val"] = _val(base).permute(perm)
            node = permuted
        returned.append(node)
    kout.args = (tuple(returned),)
    kgraph.eliminate_dead_code()
    new_gm.recompile()
    return plan, new_gm


def _copy_graph(graph):
    new = torch.fx.Graph()
    env = {}
    for node in graph.nodes:
        env[node] = new.node_copy(node, lambda n: env[n])
    return new
