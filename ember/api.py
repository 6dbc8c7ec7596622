"""`ember.compile`: torch.compile with the ember backend."""
import torch

from ember.backend import make_backend


def compile(model_or_fn, *, target="cpu", dynamic=None, options=None):
    """Compile a module or function with ember; eager semantics, compiled kernels.

    dynamic=None compiles one specialised kernel set per input shape (ember's
    dynamic-shape support is still to come, so symbolic graphs would run eagerly).
    """
    opts = dict(options or {})
    opts.setdefault("target", target)
    backend = make_backend(opts)
    return torch.compile(model_or_fn, backend=backend,
                         dynamic=False if dynamic is None else dynamic)
