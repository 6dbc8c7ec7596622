"""Calling a compiled graph: one bare data pointer per tensor, outputs allocated by torch.

The compiled function is specialised to static shapes and contiguous layouts, so binding
a tensor is `data_ptr()` alone (no copy; a non-contiguous input is made contiguous
first). Outputs are `torch.empty` tensors that the kernel writes into. Temporaries live in one
workspace allocated with the graph and passed last (calls are serialised by the kernel).
"""
from dataclasses import dataclass
from typing import Tuple

import torch


@dataclass(frozen=True)
class TensorSpec:
    shape: Tuple[int, ...]
    dtype: torch.dtype

    @staticmethod
    def of(t):
        return TensorSpec(tuple(int(s) for s in t.shape), t.dtype)


class CompiledGraph:
    def __init__(self, kernel, input_specs, output_specs, workspace_bytes=0):
        self.kernel = kernel            # keeps the engine alive
        self._fn = kernel.fn
        self.workspace_bytes = workspace_bytes
        self.workspace = None  # allocated on the first call: graphs are built under fake mode
        self._extra = () if workspace_bytes == 0 else None
        self.input_specs = tuple(input_specs)
        self.output_specs = tuple(output_specs)
        self._out_shapes = [(s.shape, s.dtype) for s in self.output_specs]

    def __call__(self, *args):
        if self._extra is None:
            self.workspace = torch.empty(self.workspace_bytes, dtype=torch.uint8)
            self._extra = (self.workspace.data_ptr(),)
        ins = [a if a.is_contiguous() else a.contiguous() for a in args]
        outs = [torch.empty(shape, dtype=dtype) for shape, dtype in self._out_shapes]
        self._fn(*[t.data_ptr() for t in ins], *[t.data_ptr() for t in outs], *self._extra)
        return outs
