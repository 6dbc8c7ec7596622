"""A partition of a split graph gets the size symbols its shapes need as int arguments.

A partition after an ATen op sees only that op's outputs, whose sizes are expressions of
the graph's symbols: after the overlapping conv1d of a speech model's feature extractor
(ATen), the next partition's input is (s0, 32, s1//5 - 1), and no input carries s1, so
its shapes could not be evaluated per call ("sizes s1 are not sizes of its inputs") and
it ran through ATen. The parent graph has every symbol (an int input, or a dim of an
input tensor); the partition now takes the missing ones as extra int inputs:

    before: parent(s0: int, s1: int, x: (s0, s1))
              c = aten.convolution(...)                      c: (s0, 32, s1//5 - 1)
              y = ember_1(c)                                 ember_1 cannot read s1
    after:  parent(s0, s1, x)
              c = aten.convolution(...)
              y = ember_1(c, s1)                             ember_1(c, s1: int)
"""
import torch

from .fx_meta import inputs_first, value_of as _val
from .scalar_prologue import expression_step, is_computable_from_inputs, symbol_reads
from .symbolic import _free_symbols


def _parent_source(parent, symbol, reads, placeholders, created):
    """A node of `parent` whose value is `symbol` (an int input, or a new sym_size of an
    input tensor right after the inputs), or None."""
    if symbol not in reads:
        return None
    i, dim = reads[symbol]
    if dim is None:
        return placeholders[i]
    if symbol not in created:
        with parent.graph.inserting_after(placeholders[-1]):
            node = parent.graph.call_function(torch.ops.aten.sym_size.int, (placeholders[i], dim))
        node.meta["val"] = _val(placeholders[i]).shape[dim]
        created[symbol] = node
    return created[symbol]


def pass_missing_symbols(parent, call, sub, created):
    """Give `sub` (called by node `call` of `parent`) the symbols it cannot read from its
    inputs; `created`: the parent's sym_size nodes made so far (shared by partitions)."""
    needed = _free_symbols(sub)
    sub_inputs = [n for n in sub.graph.nodes if n.op == "placeholder"]
    missing = sorted(needed - set(symbol_reads(sub_inputs)), key=str)
    if not missing:
        return
    inputs_first(sub.graph)
    first_computation = next(n for n in sub.graph.nodes if n.op != "placeholder")
    placeholders = [n for n in parent.graph.nodes if n.op == "placeholder"]
    reads = symbol_reads(placeholders)
    added = False
    for symbol in missing:
        source = _parent_source(parent, symbol, reads, placeholders, created)
        if source is None:  # data-dependent (unbacked): the partition fails as before
            continue
        with sub.graph.inserting_before(first_computation):  # after the other inputs
            extra = sub.graph.placeholder(f"size_{symbol}")
        extra.meta["val"] = _val(source)
        call.args = tuple(call.args) + (source,)
        added = True
    if added:
        sub.recompile()


def sizes_from_graph_inputs(gm, extern):
    """Size arithmetic that reads an intermediate tensor (`sym_size(pooled, 2)`) reads the
    graph's inputs instead, when its expression is one of their symbols. Such a node runs
    in Python between partitions: reading a computed tensor, it made the partitioner cut
    the kernels before it from those after it (a max pool's window positions need the
    padded image's size), two partitions where one fits:

        before: p = ember_0(c)          # relu, pad
                n = sym_size(p, 2)      # (s1 - 1)//2 + 3, in Python
                y = ember_1(p, n)       # the pool, reads n
        after:  n = size_expression(x)  # from the input x's size s1
                y = ember_0(c, n)       # relu, pad and the pool

    `extern` ({node: reason}) follows the rewrite."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    reads = symbol_reads(placeholders)
    first_computation = next(n for n in gm.graph.nodes if n.op != "placeholder")
    by_value = {}  # (type, expression) -> its node: every layer of a CNN reads the same sizes
    for node in [n for n in extern if n.op == "call_function"]:
        reads_intermediate = any(
            isinstance(a, torch.fx.Node) and a.op != "placeholder"
            and isinstance(_val(a), torch.Tensor) for a in node.args)
        if not reads_intermediate or not is_computable_from_inputs(_val(node), reads):
            continue
        key = (type(_val(node)), _val(node).node.expr)
        if key not in by_value:
            function, refs, _ = expression_step(_val(node), reads)
            function.__module__ = __name__  # torch.fx names every target by its module
            with gm.graph.inserting_before(first_computation):  # before every use
                new = gm.graph.call_function(function, tuple(placeholders[i] for _, i in refs))
            new.meta["val"] = _val(node)
            extern[new] = extern[node]
            by_value[key] = new
        node.replace_all_uses_with(by_value[key])
        del extern[node]
        gm.graph.erase_node(node)
    if by_value:
        gm.recompile()
