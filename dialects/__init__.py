"""ember's own MLIR dialects, defined in Python (IRDL-backed via torch_mlir.dialects.ext)."""
from .fusion import FusionDialect, GroupOp, YieldOp, load_ember_dialects

__all__ = ["FusionDialect", "GroupOp", "YieldOp", "load_ember_dialects"]
