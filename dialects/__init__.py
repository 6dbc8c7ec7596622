"""ember's own MLIR dialects, defined in Python (IRDL-backed via torch_mlir.dialects.ext)."""
from .fusion import FusionDialect, GroupOp, YieldOp, load_ember_dialects
from .shape import BindOp, ShapeDialect, SymbolOp

__all__ = ["BindOp", "FusionDialect", "GroupOp", "ShapeDialect", "SymbolOp", "YieldOp",
           "load_ember_dialects"]
