"""CPU target: bufferize, BLAS for GEMMs, loops vectorized by LLVM for the host, object code loaded by llvmlite."""
from .pipeline import CPU_LOWERING, lower_to_llvm
from .workspace import workspace_bytes

__all__ = ["CPU_LOWERING", "lower_to_llvm", "workspace_bytes"]
