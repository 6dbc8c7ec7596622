"""Compile one functionalized ATen FX graph (no ATen-only ops left) into a CompiledGraph.

In this process: plan the outputs (graph_outputs.py) and import the FX graph to torch-dialect
IR. In the codegen worker (worker.py): everything that can abort, down to an object file.
Back here: load the object and bind it to the runtime.
"""
import logging
import os
import time

import torch

from ember.errors import EmberError, EmberUnsupportedError
from ember.runtime import CompiledGraph, TensorSpec
from ember.runtime.cache import GLOBAL_CACHE, graph_key
from . import importer
from .graph_outputs import plan_outputs
from .input_layouts import dense_permutation, read_permuted_inputs_in_place
from .object_cache import OBJECT_CACHE, index_key, request_key
from .scalar_prologue import lift_scalar_computations
from .symbolic import (ShapeProgram, has_symbolic_shapes, shape_facts,
                       specialize_constant_sizes)
from .symbolic_views import split_symbolic_views
from .worker import CodegenCrash, compile_in_worker

log = logging.getLogger("ember")
_dump_count = [0]


class EmberCodegenError(EmberError):
    """Code generation failed for a reason that names no ATen op (LLVM, a worker crash)."""


def _output_nodes(gm):
    return list(next(n for n in gm.graph.nodes if n.op == "output").args[0])


def _output_specs(gm):
    return [TensorSpec.of(importer._val(n)) for n in _output_nodes(gm)]


def compile_graph(gm, example_inputs, target="cpu", options=None, mutated_inputs=()):
    """Return a CompiledGraph for `gm`; raise EmberUnsupportedError naming the op it cannot
    lower, or EmberCodegenError. `mutated_inputs`: (graph output j, input i) pairs where
    output j is the new value of input i that AOTAutograd copies back; where it is safe
    the kernel writes it into input i directly (compiler/in_place_outputs.py)."""
    if not all(isinstance(t, _INPUT_TYPES) for t in example_inputs):
        raise EmberUnsupportedError("graph inputs", ", ".join(type(t).__name__ for t in
                                                             example_inputs),
                                    "only tensors and scalars are supported as inputs")
    if target != "cpu":
        from .gpu_driver import compile_gpu_graph
        return compile_gpu_graph(gm, example_inputs, target, options)
    input_specs = [TensorSpec.of(t) for t in example_inputs]
    # permuted inputs are read in place (input_layouts.py): their strides are code
    layouts = [tuple(t.stride()) if dense_permutation(t) else None for t in example_inputs]
    key = graph_key(gm, input_specs, target, options or {},
                    shape_facts(gm) + os.environ.get("EMBER_OPT_LEVEL", "") + repr(layouts)
                    + repr(tuple(mutated_inputs)))
    return GLOBAL_CACHE.get_or_build(key, lambda: _build(gm, input_specs, example_inputs,
                                                         mutated_inputs, key))


def _opt_level(dynamic):
    """LLVM's optimisation level. Dynamic graphs get O2: on BERT's dynamic module O3 takes
    27.7 s and O2 8.6 s (O3's loop unswitching and unrolling multiply the loops that
    have run-time bounds) for the same run time (bench/dynamic.py). EMBER_OPT_LEVEL
    overrides it for measurements."""
    return int(os.environ.get("EMBER_OPT_LEVEL") or (2 if dynamic else 3))


def _in_place_candidates(plan, kernel_gm, example_inputs, input_strides, mutated_inputs):
    """(kernel output k, input i) for each mutated input whose new value is one plain
    kernel buffer (not a view, not permuted, returned once) with the input's dense layout."""
    outputs = _output_nodes(kernel_gm)
    found = []
    for j, i in mutated_inputs:
        entry = plan.entries[j] if j < len(plan.entries) else None
        if entry is None or entry[0] != "kernel" or entry[2]:
            continue
        k = entry[1]
        if plan.permutations[k] is not None or sum(
                1 for e in plan.entries if e[0] == "kernel" and e[1] == k) != 1:
            continue
        x, out = example_inputs[i], importer._val(outputs[k])
        if (isinstance(x, torch.Tensor) and x.is_contiguous() and not input_strides[i]
                and isinstance(out, torch.Tensor) and out.dtype == x.dtype
                and out.shape == x.shape):
            found.append((k, i))
    return found


def _build(gm, input_specs, example_inputs=(), mutated_inputs=(), graph_key=None):
    from ember.targets.cpu.loader import LoadedKernel, UnresolvedSymbolError

    plan, kernel_gm = plan_outputs(gm)
    if kernel_gm is None:
        return CompiledGraph(None, input_specs, [], plan)
    t0 = time.perf_counter()
    output_specs = _output_specs(kernel_gm)
    shapes = prologue = None
    input_strides = read_permuted_inputs_in_place(kernel_gm)
    if has_symbolic_shapes(kernel_gm):
        specialize_constant_sizes(kernel_gm)
        split_symbolic_views(kernel_gm)
        prologue = lift_scalar_computations(kernel_gm)
        shapes = ShapeProgram(kernel_gm, [importer._val(n) for n in _output_nodes(kernel_gm)])
    kernel_inputs = [importer._val(n) for n in kernel_gm.graph.nodes if n.op == "placeholder"]
    dump_dir = os.environ.get("EMBER_DUMP_DIR") or None
    _dump_count[0] += 1
    # A graph compiled by an earlier process: its request key is remembered under the
    # graph's key, so its object loads without importing the graph to torch IR again.
    # A dump asks for the IR of each stage: only a real compile writes it.
    index = index_key(graph_key) if graph_key and dump_dir is None else None
    known = OBJECT_CACHE.load_index(index) if index else None
    reply = OBJECT_CACHE.load(known) if known else None
    from_disk = reply is not None
    if reply is None:
        candidates = (_in_place_candidates(plan, kernel_gm, example_inputs,
                                           input_strides or [None] * len(kernel_inputs),
                                           mutated_inputs) if mutated_inputs else [])
        request = {"torch_ir": importer.import_to_torch_ir(kernel_gm, shapes),
                   "dump_dir": dump_dir, "name": f"graph{_dump_count[0]:03d}",
                   "opt_level": _opt_level(shapes is not None), "in_place": candidates}
        key = request_key(request) if dump_dir is None else None  # hashed once
        reply, from_disk = compile_request(request, kernel_gm, key=key)
        if index:
            OBJECT_CACHE.store_index(index, key)
    num_sizes = len(shapes.symbols) if shapes is not None else 0
    # inputs (tensors and lifted scalars), outputs, size arguments, workspace
    arg_types = [_arg_type(v) for v in kernel_inputs] + ["ptr"] * len(output_specs)
    arg_types += ["i64"] * num_sizes + (["ptr"] if reply["workspace_bytes"] else [])
    try:
        kernel = LoadedKernel(reply["objects"], importer.ENTRY, arg_types,
                              error_messages=reply["error_messages"])
    except UnresolvedSymbolError as exc:
        raise EmberCodegenError(f"ember cannot load this graph's code: {exc}") from None
    stats = reply["stats"]
    if from_disk:
        log.info("ember: loaded %sgraph (%d nodes, %s kernels) from the compile cache in "
                 "%.2fs", "dynamic-shape " if shapes is not None else "",
                 len(gm.graph.nodes), stats.get("kernels"), time.perf_counter() - t0)
    else:
        log.info("ember: compiled %sgraph (%d nodes, %s kernels) in %.2fs "
                 "[import %.2fs, lower %.2fs, llvm %.2fs]",
                 "dynamic-shape " if shapes is not None else "", len(gm.graph.nodes),
                 stats.get("kernels"), time.perf_counter() - t0, stats.get("import_s", 0),
                 stats.get("lower_s", 0), stats.get("llvm_s", 0))
    return CompiledGraph(kernel, input_specs, output_specs, plan, reply["workspace_bytes"],
                         shapes=shapes, prologue=prologue, input_strides=input_strides,
                         in_place=reply.get("in_place", ()))


def compile_request(request, kernel_gm, what="ember", key=None):
    """The codegen worker's reply to `request`, from the disk cache when it holds it
    (a request that dumps IR always compiles); raise the error a failed reply names.
    Returns (reply, whether it came from the disk). `key`: request_key(request) when the
    caller hashed it already."""
    if key is None and request.get("dump_dir") is None:
        key = request_key(request)
    reply = OBJECT_CACHE.load(key) if key else None
    from_disk = reply is not None
    if reply is None:
        try:
            reply = compile_in_worker(request)
        except CodegenCrash as exc:
            raise EmberCodegenError(str(exc)) from None
        if key:
            OBJECT_CACHE.store(key, reply)
    if not reply["ok"]:
        stage, message = reply["stage"], reply.get("message", "")
        if stage == "lowerable":
            raise importer.unsupported_from_leftovers(kernel_gm, reply["ops"])
        if stage in ("import", "pipeline"):
            raise importer.unsupported_from_message(kernel_gm, message)
        raise EmberCodegenError(f"{what} code generation failed ({stage}): {message.strip()}")
    return reply, from_disk


_INPUT_TYPES = (torch.Tensor, int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)


def _arg_type(value):
    """The C type of a kernel argument for a graph input's example value."""
    if isinstance(value, torch.Tensor):
        return "ptr"
    if isinstance(value, (torch.SymFloat, float)):
        return "f64"
    if isinstance(value, (torch.SymBool, bool)):
        return "i1"
    return "i64"
