"""Compiled artifacts keyed by everything that changes the code: the graph's code, the
values of its tensor constants, input shapes/dtypes, the ShapeEnv's facts on symbolic
sizes, target, options and the versions of ember, torch, torch-mlir and llvmlite."""
import hashlib
import threading
from importlib import metadata

import torch


def _versions():
    out = []
    for dist in ("ember", "torch", "torch-mlir", "llvmlite"):
        try:
            out.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            out.append(f"{dist}=?")
    return ";".join(out)


_VERSIONS = None


def _tensor_digest(h, t):
    # Compilation runs under AOTAutograd's fake mode; a constant is a real tensor.
    with torch._subclasses.fake_tensor.unset_fake_temporarily():
        _real_tensor_digest(h, t)


def _real_tensor_digest(h, t):
    t = t.detach()
    h.update(repr((tuple(t.shape), t.dtype, t.device.type)).encode())
    if t.device.type != "meta" and t.numel():
        flat = t.reshape(-1).contiguous().cpu()
        h.update(flat.view(torch.uint8).numpy().tobytes() if flat.element_size() > 0 else b"")


def graph_key(gm, input_specs, target, options, shape_facts=""):
    global _VERSIONS
    if _VERSIONS is None:
        _VERSIONS = _versions()
    h = hashlib.sha256(gm.code.encode())
    for node in gm.graph.nodes:
        if node.op == "get_attr":  # lifted tensor constants: their VALUES are code
            value = gm
            for part in node.target.split("."):
                value = getattr(value, part)
            h.update(node.target.encode())
            if isinstance(value, torch.Tensor):
                _tensor_digest(h, value)
            else:
                h.update(repr(value).encode())
    h.update(repr((tuple(input_specs), target, sorted(options.items(), key=str),
                   _VERSIONS)).encode())
    h.update(shape_facts.encode())  # guards and ranges of symbolic sizes
    return h.hexdigest()


class KernelCache:
    def __init__(self):
        self._entries = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get_or_build(self, key, build):
        with self._lock:
            if key in self._entries:
                self.hits += 1
                return self._entries[key]
        value = build()
        with self._lock:
            self.misses += 1
            self._entries[key] = value
        return value

    def clear(self):
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0


GLOBAL_CACHE = KernelCache()
