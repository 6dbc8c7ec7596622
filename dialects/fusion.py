"""The `ember_fusion` dialect: a region op holding the ops that become one kernel.

    %r:2 = "ember_fusion.group"() ({
        ...fused ops, reading values from above...
        "ember_fusion.yield"(%v0, %v1) : (...) -> ()
    }) {kind = "matmul_epilogue"} : () -> (tensor<..>, tensor<..>)

The body reads values defined above (the region is not isolated); what another kernel
computed reaches it as a group result, never as a linalg op, so linalg's elementwise
fusion cannot reach across kernel boundaries.

IRDL binds one type variable per variadic field (all values of a variadic must share a
type), so a group's results share one type; the grouping pass respects that.
"""
from typing import Any, Sequence

from torch_mlir import ir
from torch_mlir.dialects import ext


class FusionDialect(ext.Dialect, name="ember_fusion"):
    pass


class GroupOp(FusionDialect.Operation, name="group"):
    outs: Sequence[ext.Result[Any]]
    body: ext.Region


class YieldOp(FusionDialect.Operation, name="yield", traits=[ir.IsTerminatorTrait]):
    values: Sequence[ext.Operand[Any]]


GROUP_OP_NAME = GroupOp.OPERATION_NAME
YIELD_OP_NAME = YieldOp.OPERATION_NAME


def load_ember_dialects(context: ir.Context = None) -> None:
    """Load every ember dialect into `context` (or the current one); idempotent."""
    ctx = context or ir.Context.current
    with ctx:
        from .shape import ShapeDialect

        for dialect in (FusionDialect, ShapeDialect):
            if not ctx.is_dialect_loaded(dialect.DIALECT_NAMESPACE):
                dialect.load()
