"""ember's thin runtime: compiled kernels bound to torch tensors without copies."""
from .compiled_graph import CompiledGraph, TensorSpec
from .cache import KernelCache

__all__ = ["CompiledGraph", "TensorSpec", "KernelCache"]
