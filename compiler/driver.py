"""Compile one functionalized ATen FX graph into a runtime CompiledGraph."""
import logging
import os
import time

import torch

from ember.errors import EmberUnsupportedError
from ember.runtime import CompiledGraph, TensorSpec
from ember.runtime.cache import GLOBAL_CACHE, KernelCache
from . import importer
from .fusion import fuse
from .pipeline import PipelineError

log = logging.getLogger("ember")
_DUMP_DIR = os.environ.get("EMBER_DUMP_DIR")
_dump_count = [0]


def _dump(module, stage):
    """With EMBER_DUMP_DIR set, keep each graph's IR at `stage` for ember-opt."""
    if _DUMP_DIR:
        os.makedirs(_DUMP_DIR, exist_ok=True)
        _dump_count[0] += 1
        path = os.path.join(_DUMP_DIR, f"graph{_dump_count[0]:03d}.{stage}.mlir")
        with open(path, "w") as f:
            f.write(str(module))
        log.info("ember: wrote %s", path)


def _output_specs(gm):
    out = next(n for n in gm.graph.nodes if n.op == "output")
    leaves = torch.utils._pytree.tree_leaves(out.args)
    return [TensorSpec.of(importer._val(n)) for n in leaves]


def compile_graph(gm, example_inputs, target="cpu", stats=None):
    """Return a CompiledGraph for `gm`; raise EmberUnsupportedError if it cannot lower."""
    if target != "cpu":
        raise EmberUnsupportedError(f"target '{target}'", detail="only 'cpu' is available")
    input_specs = [TensorSpec.of(t) for t in example_inputs]
    key = KernelCache.key(gm.code, input_specs, target)
    return GLOBAL_CACHE.get_or_build(key, lambda: _build(gm, input_specs, stats))


def _build(gm, input_specs, stats):
    from ember.targets.cpu import JitKernel, lower_to_llvm, workspace_bytes

    stats = {} if stats is None else stats
    t0 = time.perf_counter()
    module = importer.import_to_linalg(gm)
    _dump(module, "linalg")
    t1 = time.perf_counter()
    output_specs = _output_specs(gm)
    try:
        fuse(module, stats)
        lower_to_llvm(module)
    except PipelineError as exc:
        raise importer.unsupported_from_message(gm, str(exc)) from None
    t2 = time.perf_counter()
    scratch = workspace_bytes(module)
    kernel = JitKernel(module, importer.ENTRY,
                       len(input_specs) + len(output_specs) + (1 if scratch else 0))
    t3 = time.perf_counter()
    stats.update(import_s=t1 - t0, lower_s=t2 - t1, jit_s=t3 - t2)
    log.info("ember: compiled graph (%d nodes, %s kernels) in %.2fs "
             "[import %.2fs, lower %.2fs, jit %.2fs]",
             len(gm.graph.nodes), stats.get("kernels"), t3 - t0, t1 - t0, t2 - t1, t3 - t2)
    return CompiledGraph(kernel, input_specs, output_specs, scratch)
