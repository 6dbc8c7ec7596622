"""`ember.compile`: torch.compile with the ember backend."""
import torch

from ember.backend import make_backend


def compile(model_or_fn, *, target=None, dynamic=None, options=None):
    """Compile a module or function with ember; eager semantics, compiled kernels.

    dynamic follows torch.compile: None (the default) compiles the first shapes
    statically and recompiles once with symbolic sizes when a size changes; True compiles
    symbolic sizes from the start; False specialises every new shape.
    target: "cpu", "cuda" or "rocm"; None picks it from the device of the inputs.
    """
    opts = dict(options or {})
    if target is not None:
        opts.setdefault("target", target)
    backend = make_backend(opts)
    return torch.compile(model_or_fn, backend=backend, dynamic=dynamic)
