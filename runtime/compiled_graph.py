"""Calling a compiled graph: one bare data pointer per tensor, outputs allocated by torch.

The compiled function is specialised to static shapes and contiguous layouts, so binding
a tensor is `data_ptr()` alone (no copy; a non-contiguous input is made contiguous
first). Outputs are `torch.empty` tensors that the kernel writes into; the graph's
OutputPlan then hands back eager's tensors (shared outputs, replayed views, eager strides).
Temporaries live in one workspace allocated with the graph and passed last; with dynamic
shapes its size is an expression of the size arguments, and the buffer grows to the
biggest size seen.
"""
import threading
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch._prims_common import make_contiguous_strides_for

from ember.errors import EmberIndexError
from .workspace_size import size_function

try:  # what inductor's generated code allocates with: 3x cheaper than torch.empty
    from torch._C._dynamo.guards import _empty_strided_cpu
except ImportError:  # pragma: no cover - other torch builds
    def _empty_strided_cpu(shape, strides, dtype):
        return torch.empty_strided(shape, strides, dtype=dtype)


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output: static sizes as ints, symbolic ones by their expression
    (e.g. 's77*2'); a size passed as an int (a SymInt input) has dtype None, shape ()."""
    shape: Tuple[object, ...]
    dtype: Optional[torch.dtype]

    @staticmethod
    def of(t):
        if not isinstance(t, torch.Tensor):  # an int / float (maybe symbolic)
            return TensorSpec((str(t),), None)
        return TensorSpec(tuple(s if isinstance(s, int) else str(s) for s in t.shape), t.dtype)

    @property
    def is_tensor(self):
        return self.dtype is not None


def _laid_out(a, strides):
    """`a` as the code reads it: contiguous, or (strides given) with those strides."""
    if not isinstance(a, torch.Tensor):
        return a
    if strides is None:
        return a if a.is_contiguous() else a.contiguous()
    if a.stride() == strides:
        return a
    return torch.empty_strided(a.shape, strides, dtype=a.dtype).copy_(a)


class CompiledGraph:
    """kernel: a LoadedKernel or None (every output is an input or a view of one).
    shapes: the graph's ShapeProgram when its sizes are symbolic (compiler/symbolic.py):
    each call evaluates the size arguments and the output shapes from the inputs."""

    def __init__(self, kernel, input_specs, output_specs, plan, workspace_bytes=0,
                 shapes=None, prologue=None, input_strides=(), in_place=()):
        self.kernel = kernel            # keeps the loaded code alive
        self._fn = kernel.fn if kernel is not None else None
        self.shapes = shapes
        self.prologue = prologue  # size arithmetic computed per call (scalar_prologue.py)
        self.plan = plan
        # bytes, or (dynamic shapes) a Python expression of the size arguments `z`
        self.workspace_bytes = workspace_bytes
        self._workspace_size = (size_function(workspace_bytes)
                                if isinstance(workspace_bytes, str) else None)
        self.workspace = None  # allocated on the first call: graphs are built under fake mode
        self._lock = threading.Lock()  # one workspace: one call at a time
        self.input_specs = tuple(input_specs)
        self.output_specs = tuple(output_specs)
        # static outputs: (shape, strides, dtype), allocated without torch.empty's parsing
        self._out_layouts = ([] if shapes is not None else
                             [(s.shape, make_contiguous_strides_for(s.shape), s.dtype)
                              for s in self.output_specs])
        self._out_dtypes = [s.dtype for s in self.output_specs]
        self._error_code = getattr(kernel, "error_code", None)
        # per input: the strides the code reads it with (a permuted dense layout, see
        # compiler/input_layouts.py), or None for contiguous
        self._strides = list(input_strides) if any(input_strides) else None
        # (output k, input i): the kernel may write output k into input i's memory (the
        # new value of a mutated input, compiler/in_place_outputs.py)
        self._in_place = dict(in_place)

    def _write_in_place(self, args, outs):
        for k, i in self._in_place.items():
            x = args[i]
            if x.is_contiguous():
                outs[k] = x
            elif outs[k] is None:  # the kernel reads a contiguous copy: a fresh buffer
                shape, strides, dtype = self._out_layouts[k]
                outs[k] = _empty_strided_cpu(shape, strides, dtype)

    def _raise_failed_check(self):
        code, self._error_code.value = self._error_code.value, 0
        messages = self.kernel.error_messages
        message = messages[code - 1] if 0 < code <= len(messages) else code
        shapes = ", ".join(str(tuple(s.shape)) for s in self.input_specs)
        error = EmberIndexError if str(message).startswith("index out of range") else RuntimeError
        raise error(f"ember: a run-time check of the compiled graph failed: {message} "
                    f"(inputs {shapes})")

    def __call__(self, *args):
        outs = []
        if self._fn is not None:
            kernel_args = args
            if self.shapes is None:
                sizes = ()
                outs = [_empty_strided_cpu(shape, strides, dtype) if k not in self._in_place
                        else None for k, (shape, strides, dtype) in enumerate(self._out_layouts)]
            else:
                if self.prologue is not None:
                    kernel_args = list(args) + self.prologue.run(args)
                sizes, shapes = self.shapes.prepare(*kernel_args)
                outs = [_empty_strided_cpu(shape, make_contiguous_strides_for(shape), dtype)
                        for shape, dtype in zip(shapes, self._out_dtypes)]
            if self._in_place:
                self._write_in_place(args, outs)
            # (the copies live in `ins` until the call returns)
            if self._strides is None:
                ins = [a.contiguous() if isinstance(a, torch.Tensor) and not a.is_contiguous()
                       else a for a in kernel_args]
            else:
                ins = [_laid_out(a, s) for a, s in zip(kernel_args, self._strides)] + \
                      list(kernel_args[len(self._strides):])
            pointers = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in ins]
            pointers += [t.data_ptr() for t in outs]
            pointers += sizes
            if self.workspace_bytes:
                need = (self.workspace_bytes if self._workspace_size is None
                        else max(self._workspace_size(sizes), 1))
                with self._lock:
                    if self.workspace is None or self.workspace.numel() < need:
                        self.workspace = None  # free the old buffer first
                        self.workspace = torch.empty(need, dtype=torch.uint8)
                    self._fn(*pointers, self.workspace.data_ptr())
            else:
                self._fn(*pointers)
            if self._error_code is not None and self._error_code.value:
                self._raise_failed_check()
        return self.plan.assemble(args, outs)
