"""CPU target: bufferize, BLAS for GEMMs, loops vectorized by LLVM for the host, object code loaded by llvmlite."""

__all__ = ["CPU_LOWERING", "lower_to_llvm", "workspace_bytes"]


def __getattr__(name):
    # Lazy: the pipeline registers passes with ember.compiler.passes, whose scalar library
    # imports this package's aten_math; an eager import here would be a cycle.
    if name in ("CPU_LOWERING", "lower_to_llvm"):
        from . import pipeline

        return getattr(pipeline, name)
    if name == "workspace_bytes":
        from .workspace import workspace_bytes

        return workspace_bytes
    raise AttributeError(name)
