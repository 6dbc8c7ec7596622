"""Compile one ATen FX graph for a GPU target (CUDA or ROCm): the GPU counterpart
of driver.py. Device code is generated in the codegen worker (gpu_codegen.py); here the
reply becomes a LaunchPlan bound to a launcher:

  * CUDA: cuda_launcher (cuda-bindings), buffers on torch's CUDA caching allocator;
  * ROCm: rocm/launcher.py (hip-python) with the code object;
  * EMBER_GPU_EXECUTOR=host: the same plan and kernel parameters, kernels run on the CPU
    by host_executor.py (a testing tool for machines without a GPU, CPU tensors); with
    target "rocm" the AMD code object is still built, linked and checked.
"""
import contextlib
import logging
import os
import time

import torch

from ember.errors import EmberUnsupportedError
from ember.runtime import TensorSpec
from ember.runtime.cache import GLOBAL_CACHE, graph_key
from . import importer
from .driver import _output_nodes, _output_specs, compile_request
from .graph_outputs import plan_outputs
from .scalar_prologue import lift_scalar_computations
from .symbolic import ShapeProgram, has_symbolic_shapes, shape_facts
from .symbolic_views import split_symbolic_views

log = logging.getLogger("ember")


def default_target(example_inputs):
    """The target when none is given: the device of the graph's tensors
    (`torch.compile(model.cuda(), backend="ember")` compiles for the GPU)."""
    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    if "cuda" in devices:
        return "rocm" if torch.version.hip else "cuda"
    return "cpu"


def host_executor_requested():
    return os.environ.get("EMBER_GPU_EXECUTOR", "").strip().lower() == "host"


def _launcher_factory(target, example_inputs):
    """(vendor, arch, make_launcher(reply)); EmberUnsupportedError when no device."""
    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    if host_executor_requested():
        if devices - {"cpu"}:
            raise EmberUnsupportedError(f"target '{target}'", detail="EMBER_GPU_EXECUTOR=host "
                                        "runs kernels on the CPU and takes CPU tensors")
        return target, None, lambda reply: _HostLauncher(reply)
    why, device_arch, launcher = _device_launcher(target)
    if why:
        raise EmberUnsupportedError(f"target '{target}'", detail=why)
    if devices - {"cuda"}:
        raise EmberUnsupportedError(f"target '{target}'", detail=f"the graph's inputs are on "
                                    f"{', '.join(sorted(devices))}, not on the GPU")
    return target, device_arch(), launcher


def _device_launcher(target):
    """(why the target cannot launch here or None, its device_arch(), its launcher)."""
    if target == "rocm":
        from ember.targets.rocm import launcher as rocm
        return rocm.rocm_unavailable(), rocm.device_arch, rocm.RocmLauncher
    from ember.targets.cuda import launcher as cuda
    return cuda.cuda_unavailable(), cuda.device_arch, cuda.CudaLauncher


class _HostLauncher:
    device = "cpu"

    def __init__(self, reply):
        from ember.targets.gpu.host_executor import HostExecutor
        self._executor = (HostExecutor(reply["host_object"], list(reply["signatures"]))
                          if reply.get("host_object") else None)

    def launch(self, name, grid, block, params_address):
        self._executor.launch(name, grid, block, params_address)


@contextlib.contextmanager
def record_graphs():
    """Collect every GpuCompiledGraph built inside the block (tests and tools read their
    stats: kernels, ptxas, AMD link)."""
    global _build
    graphs, build = [], _build

    def recording(*args, **kwargs):
        graphs.append(build(*args, **kwargs))
        return graphs[-1]
    _build = recording
    try:
        yield graphs
    finally:
        _build = build


class GpuCompiledGraph:
    """Call: inputs made contiguous, the launch plan run, outputs handed to the graph's
    OutputPlan (eager's aliasing, views and strides)."""

    def __init__(self, launch_plan, input_specs, output_specs, plan, stats=None,
                 shapes=None, prologue=None):
        self.launch_plan = launch_plan
        self.shapes, self.prologue = shapes, prologue
        self.input_specs, self.output_specs = tuple(input_specs), tuple(output_specs)
        self.plan = plan
        self.stats = stats or {}

    def __call__(self, *args):
        outs = []
        if self.launch_plan is not None:
            ins = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args]
            sizes = ()
            if self.shapes is not None:
                if self.prologue is not None:
                    ins += self.prologue.run(args)
                sizes, _ = self.shapes.prepare(*ins)
            outs = self.launch_plan(*ins, sizes=sizes)
            seen = set()
            for k, o in enumerate(outs):  # an output is never an input nor another output
                if any(o is x for x in ins) or id(o) in seen:
                    outs[k] = o.clone()
                seen.add(id(outs[k]))
        return self.plan.assemble(args, outs)


def compile_gpu_graph(gm, example_inputs, target, options):
    vendor, arch, make_launcher = _launcher_factory(target, example_inputs)
    input_specs = [TensorSpec.of(t) for t in example_inputs]
    key = graph_key(gm, input_specs, f"{target}|{arch}|{host_executor_requested()}",
                    options or {}, shape_facts(gm))
    return GLOBAL_CACHE.get_or_build(key, lambda: _build(gm, input_specs, vendor, arch,
                                                         make_launcher))


def _build(gm, input_specs, vendor, arch, make_launcher):
    from ember.targets.gpu.launch_plan import LaunchPlan

    plan, kernel_gm = plan_outputs(gm)
    if kernel_gm is None:
        return GpuCompiledGraph(None, input_specs, [], plan)
    t0 = time.perf_counter()
    shapes = prologue = None
    if has_symbolic_shapes(kernel_gm):  # as driver.py: sizes from the inputs per call
        split_symbolic_views(kernel_gm)
        prologue = lift_scalar_computations(kernel_gm)
        shapes = ShapeProgram(kernel_gm, [importer._val(n) for n in _output_nodes(kernel_gm)])
    output_specs = _output_specs(kernel_gm)
    torch_ir = importer.import_to_torch_ir(kernel_gm, shapes, target=vendor)
    request = {"kind": "gpu", "vendor": vendor, "arch": arch, "torch_ir": torch_ir,
               "host_executor": host_executor_requested(),
               "dump_dir": os.environ.get("EMBER_DUMP_DIR") or None}
    reply, _ = compile_request(request, kernel_gm, f"ember {vendor}")
    launch_plan = LaunchPlan(reply["arguments"], reply["steps"], reply["kernels"],
                             reply["signatures"], make_launcher(reply),
                             shapes.symbol_names() if shapes is not None else ())
    stats = reply["stats"]
    log.info("ember: compiled graph for %s (%d nodes, %d kernel launches, %d distinct "
             "kernels) in %.2fs", vendor, len(gm.graph.nodes), launch_plan.launches,
             stats.get("unique_kernels", 0), time.perf_counter() - t0)
    return GpuCompiledGraph(launch_plan, input_specs, output_specs, plan, stats, shapes,
                            prologue)
