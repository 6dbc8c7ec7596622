"""ember: an MLIR-based compiler for PyTorch programs, in Python.

    fast = ember.compile(model)                 # or torch.compile(model, backend="ember")
"""
__all__ = ["compile", "EmberError", "EmberUnsupportedError"]
__version__ = "0.1.0"


def __getattr__(name):
    # Lazy, so that tools such as ember-opt start without importing torch.
    if name == "compile":
        from ember.api import compile
        return compile
    if name in ("EmberError", "EmberUnsupportedError"):
        from ember import errors
        return getattr(errors, name)
    raise AttributeError(name)
