"""ember: an MLIR-based compiler for PyTorch programs, in Python.

    fast = ember.compile(model)                 # or torch.compile(model, backend="ember")
"""
from ember.api import compile
from ember.errors import EmberError, EmberUnsupportedError

__all__ = ["compile", "EmberError", "EmberUnsupportedError"]
__version__ = "0.1.0"
