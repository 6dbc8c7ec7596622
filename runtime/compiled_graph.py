"""Calling a compiled graph: one bare data pointer per tensor, outputs allocated by torch.

The compiled function is specialised to static shapes and contiguous layouts, so binding
a tensor is `data_ptr()` alone (no copy; a non-contiguous input is made contiguous
first). Outputs are `torch.empty` tensors that the kernel writes into.
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
    def __init__(self, kernel, input_specs, output_specs):
        self.kernel = kernel            # keeps the engine alive
        self._fn = kernel.fn
        self.input_specs = tuple(input_specs)
        self.output_specs = tuple(output_specs)
        self._out_shapes = [(s.shape, s.dtype) for s in self.output_specs]

    def __call__(self, *args):
        ins = [a if a.is_contiguous() else a.contiguous() for a in args]
        outs = [torch.empty(shape, dtype=dtype) for shape, dtype in self._out_shapes]
        self._fn(*[t.data_ptr() for t in ins], *[t.data_ptr() for t in outs])
        return outs
