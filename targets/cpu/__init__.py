"""CPU target: bufferize, BLAS for GEMMs, loops vectorized by LLVM for the host, MLIR JIT."""
from .pipeline import CPU_LOWERING, lower_to_llvm
from .jit import JitKernel
from .workspace import workspace_bytes

__all__ = ["CPU_LOWERING", "lower_to_llvm", "JitKernel", "workspace_bytes"]
