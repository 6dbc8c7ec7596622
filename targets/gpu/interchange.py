"""ember-gpu-parallel-dims-first: permute a linalg.generic's loops so that its parallel
dimensions come before its reductions. convert-linalg-to-parallel-loops emits the loops
in iterator order, and only an outermost parallel loop becomes a GPU launch; a column
reduction would otherwise leave an `scf.for` on the host around a launch per row.

    linalg.generic {maps = [(d0, d1) -> (d0, d1), (d0, d1) -> (d1)],
                    iterators = [reduction, parallel]}
  ->
    linalg.generic {maps = [(d0, d1) -> (d1, d0), (d0, d1) -> (d0)],
                    iterators = [parallel, reduction]}

`linalg.index` ops in the body are renumbered alike. A rank-0 generic gets one unit
loop, so that it too becomes a kernel.
"""
import re

from torch_mlir import ir
from torch_mlir.dialects import memref

from ember.compiler.ir_walk import collect, named

PASS_NAME = "ember-gpu-parallel-dims-first"


def _rename(map_text, new_of_old):
    return re.sub(r"\bd(\d+)\b", lambda m: f"d{new_of_old[int(m.group(1))]}", map_text)


def _unit_loop(generic):
    """A rank-0 generic on memrefs (a scalar computed from scalars) -> the same on
    memref<1xT> views, or it would become no loop at all and run on the host."""
    with generic.context, ir.InsertionPoint(generic), generic.location:
        maps = []
        unit = ir.Attribute.parse("affine_map<(d0) -> (d0)>")
        scalar = ir.Attribute.parse("affine_map<(d0) -> ()>")
        for i, v in enumerate(list(generic.operands)):
            try:
                t = ir.MemRefType(v.type)
            except ValueError:  # a scalar operand
                maps.append(scalar)
                continue
            one = ir.MemRefType.get([1], t.element_type)
            generic.operands[i] = memref.expand_shape(one, v, ir.ArrayAttr.get([]), [], [1])
            maps.append(unit)
        generic.attributes["indexing_maps"] = ir.ArrayAttr.get(maps)
        generic.attributes["iterator_types"] = ir.ArrayAttr.get(
            [ir.Attribute.parse("#linalg.iterator_type<parallel>")])


def parallel_dims_first(module_op, pass_=None):
    for generic in collect(module_op, named("linalg.generic")):
        iterators = [str(a) for a in ir.ArrayAttr(generic.attributes["iterator_types"])]
        if not iterators:
            if not generic.results:  # on memrefs (the GPU pipeline's place)
                _unit_loop(generic)
            continue
        order = ([d for d, i in enumerate(iterators) if "parallel" in i] +
                 [d for d, i in enumerate(iterators) if "parallel" not in i])
        if order == list(range(len(iterators))):
            continue
        new_of_old = {old: new for new, old in enumerate(order)}
        with generic.context:
            maps = []
            for m in ir.ArrayAttr(generic.attributes["indexing_maps"]):
                text = str(m)  # affine_map<(d0, d1) -> (...)>
                head, _, tail = text.partition("->")
                maps.append(ir.Attribute.parse(head + "->" + _rename(tail, new_of_old)))
            generic.attributes["indexing_maps"] = ir.ArrayAttr.get(maps)
            generic.attributes["iterator_types"] = ir.ArrayAttr.get(
                [ir.ArrayAttr(generic.attributes["iterator_types"])[old] for old in order])
            for index in collect(generic, named("linalg.index")):
                old = ir.IntegerAttr(index.attributes["dim"]).value
                index.attributes["dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                             new_of_old[old])
