"""FX (functionalized ATen) graph -> linalg-on-tensors, via torch-mlir's FX importer.

Failures are turned into EmberUnsupportedError naming the ATen op and its input shapes,
found by matching torch-mlir's diagnostics against the graph's nodes.
"""
import contextlib
import functools
import io
import logging
import os
import re

import torch

from ember.errors import EmberUnsupportedError
from .fx_meta import value_of as _val
from .low_precision import USER_VAL

# torch-mlir is imported where IR is built, not here: a warm start (every graph's object
# found in the compile cache) uses only this module's naming helpers and never pays
# torch-mlir's import (~0.1-0.3 s).

ENTRY = "forward"
_SUPPORTED_DTYPES = {torch.float32, torch.float64, torch.int64, torch.int32, torch.bool,
                     torch.int8, torch.uint8, torch.int16}
_OP_IN_DIAGNOSTIC = re.compile(r"torch\.(aten|prims|prim)\.([A-Za-z0-9_]+)(\.[A-Za-z0-9_]+)?")
# A torch.operator of another namespace (torch.ops.torch_nn._linear_cross_entropy_...).
_OPERATOR_IN_DIAGNOSTIC = re.compile(r'name = "torch\.([A-Za-z0-9_]+)\.([A-Za-z0-9_]+)"')


def _describe(value):
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)}:{str(value.dtype).replace('torch.', '')}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    return repr(value)


def _user_val(node):
    """The value as the user's program has it (low_precision.py computes f16/bf16 in f32)."""
    return node.meta.get(USER_VAL, _val(node))


def node_input_shapes(node):
    return ", ".join(_describe(_user_val(a)) if isinstance(a, torch.fx.Node) else repr(a)
                     for a in node.args)


def overload_name(target):
    """'aten.sort' for aten.sort.default (the packet's name), else the target's name."""
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._schema.name.split('::')[-1]}"
    return getattr(target, "__name__", str(target))


def user_op_name(node):
    """The op as the user wrote it: AOTAutograd's decompositions keep the original in
    meta['original_aten'] (index_add decomposes to index_put, which the user never
    called)."""
    original = node.meta.get("original_aten")
    return overload_name(original if isinstance(original, torch._ops.OpOverload)
                         else node.target)


def _named_error(node, op, detail):
    """EmberUnsupportedError for `op` found at `node` (None: unknown), in the user's name."""
    if node is None:
        return EmberUnsupportedError(op, "", detail)
    return EmberUnsupportedError(user_op_name(node), node_input_shapes(node), detail)


def find_node(gm, op_name):
    """First call_function node whose target is ATen op `op_name` (e.g. 'aten.cumsum')."""
    base = op_name.split(".")[-1]
    for node in gm.graph.nodes:
        if node.op == "call_function":
            target = str(node.target)  # e.g. 'aten.cumsum.default'
            if target.split(".")[1:2] == [base] or target.startswith(op_name + "."):
                return node
    return None


def unsupported_from_message(gm, message):
    """Best EmberUnsupportedError for a torch-mlir failure message."""
    m = _OP_IN_DIAGNOSTIC.search(message) or _OPERATOR_IN_DIAGNOSTIC.search(message)
    if m:
        op = f"aten.{m.group(2)}" if m.group(1) == "aten" else f"{m.group(1)}.{m.group(2)}"
        return _named_error(find_node(gm, op), op, _missing_library(op) or _diagnostic_head(message))
    return EmberUnsupportedError("the graph", "", _diagnostic_head(message))


def _missing_library(op):
    """Why an op ember calls from ATen's special functions was not compiled, if that is it."""
    from ember.targets.cpu import aten_math

    if f"torch.{op}" in aten_math.FUNCTIONS and not aten_math.available():
        return aten_math.unavailable_reason()
    return None


def _without_locations(message):
    """`message` without its `loc(...)` prefixes, however deeply their call-site chains
    nest (a CLIP layer's: loc(callsite("a.py":311:0 at callsite(... at callsite(...))))."""
    out, i = [], 0
    while True:
        j = message.find("loc(", i)
        if j < 0:
            out.append(message[i:])
            return "".join(out)
        out.append(message[i:j])
        depth, k, quoted = 0, j + 3, False
        while k < len(message):
            c = message[k]
            if c == '"' and message[k - 1] != "\\":
                quoted = not quoted
            elif not quoted and c == "(":
                depth += 1
            elif not quoted and c == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        k += 1
        while k < len(message) and message[k] in ": \t":
            k += 1
        i = k


def _diagnostic_head(message, max_lines=12):
    """The informative head of a diagnostic: from the first error line, a few lines."""
    # torch-mlir appends a reproducer recipe for its own developers: not a reason.
    message = message.split("For Torch-MLIR developers")[0]
    message = re.sub(r"Lowering TorchFX IR -> Torch Backend IR failed with the following "
                     r"diagnostics:|python exception: Failure while executing pass pipeline:?",
                     "", message)
    message = _without_locations(message)
    lines = [l.rstrip() for l in message.strip().splitlines() if l.strip()]
    start = next((i for i, l in enumerate(lines) if "error" in l.lower()), 0)
    return "\n".join(l[:300] for l in lines[start:start + max_lines])


def check_graph_is_importable(gm, target="cpu"):
    """Reject what the importer or our static-shape runtime cannot take, before importing.
    GPU targets take tensors on the GPU, and f16 / bf16 values (the casts around the GEMMs
    they run in low precision, compiler/low_precision.py)."""
    gpu = target != "cpu"
    supported = _SUPPORTED_DTYPES | ({torch.float16, torch.bfloat16} if gpu else set())
    devices = ("cuda",) if gpu and not os.environ.get("EMBER_GPU_EXECUTOR") else \
        ("cpu",) if not gpu else ("cpu", "cuda")
    for node in gm.graph.nodes:
        if node.op not in ("placeholder", "output"):
            continue
        vals = [_val(node)] if node.op == "placeholder" else list(
            torch.utils._pytree.tree_leaves([_val(a) if isinstance(a, torch.fx.Node) else a
                                             for a in torch.utils._pytree.tree_leaves(node.args)]))
        for v in vals:
            what = f"graph {'input' if node.op == 'placeholder' else 'output'} '{node.name}'"
            if node.op == "placeholder" and isinstance(v, (torch.SymInt, torch.SymFloat,
                                                           torch.SymBool)):
                continue  # a size (or size arithmetic) passed as a scalar argument
            if not isinstance(v, torch.Tensor):
                raise EmberUnsupportedError(what, _describe(v), "only tensors are supported here")
            if v.dtype not in supported:
                raise EmberUnsupportedError(what, _describe(v), f"dtype {v.dtype} not supported")
            if v.device.type not in devices:
                raise EmberUnsupportedError(what, _describe(v),
                                            f"device {v.device} for target {target}")
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(_val(node), torch.Tensor):
            if _val(node).dtype not in supported:
                raise EmberUnsupportedError(str(node.target), node_input_shapes(node),
                                            f"dtype {_val(node).dtype} not supported")


def new_fx_importer(context):
    """FxImporter(context), without the side effect of its module-level `logging.debug`:
    with no root handler that call runs logging.basicConfig(), which made every ember
    log line print twice (TORCH_LOGS="+ember") and changed the user's root logger."""
    from torch_mlir.extras.fx_importer import FxImporter

    from .symbolic_import import BoundaryBindingImporter

    root = logging.getLogger()
    before = list(root.handlers)
    try:
        return FxImporter(context=context, graph_node_importer_cls=BoundaryBindingImporter)
    finally:
        for handler in root.handlers[:]:
            if handler not in before:
                root.removeHandler(handler)


@contextlib.contextmanager
def torch_context():
    """(an MLIR context with the torch dialect, the list its diagnostics are collected in):
    torch-mlir's errors become part of ember's message instead of lines on the terminal."""
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d

    context = ir.Context()
    torch_d.register_dialect(context)
    diagnostics = []

    def handler(d):
        diagnostics.append(d.message)
        return True

    handle = context.attach_diagnostic_handler(handler)
    try:
        yield context, diagnostics
    finally:
        handle.detach()


def _import_graph(importer, gm, shapes):
    """import_stateless_graph; with a ShapeProgram (dynamic shapes), through torch-mlir's
    symbolic-shape import (compiler/symbolic_import.py)."""
    if shapes is None:
        importer.import_stateless_graph(gm.graph, func_name=ENTRY)
    else:
        from .symbolic_import import import_symbolic_graph

        import_symbolic_graph(importer, gm, ENTRY, shapes)


def import_to_torch_ir(gm, shapes=None, target="cpu"):
    """FX graph -> torch-dialect MLIR bytecode (pure IR construction, in the user's process).

    The lowering to linalg (which can crash on odd shapes) runs in the codegen worker."""
    check_graph_is_importable(gm, target)
    with torch_context() as (context, diagnostics):
        try:
            importer = new_fx_importer(context)
            _import_graph(importer, gm, shapes)
            buffer = io.BytesIO()
            importer.module.operation.write_bytecode(buffer)
            return buffer.getvalue()
        except Exception as exc:
            raise unsupported_from_message(gm, "\n".join(diagnostics) + f"\n{exc}") from None


TORCH_IR_REWRITES = ["ember-shape-import", "ember-call-scalar-library", "ember-stable-sort"]
_VERIFIER = ",torch-verify-linalg-on-tensors-backend-contract"


@functools.lru_cache(maxsize=None)
def _linalg_backend_pipeline():
    """torch-mlir's torch -> linalg-on-tensors pipeline without its final contract check,
    which rejects the library calls ember-call-scalar-library placed (ember's own
    leftover check, check_lowerable, catches what that verifier would). The text is the
    same for every graph: expanded once (under the caller's MLIR context)."""
    from torch_mlir.passmanager import PassManager

    text = str(PassManager.parse("builtin.module(torch-backend-to-linalg-on-tensors-"
                                 "backend-pipeline{allow-non-finites=true})"))
    assert text.endswith(_VERIFIER + ")"), text[-200:]
    return text[:-len(_VERIFIER) - 1] + ")"


TM_TENSOR_LOWERING = ["ember-lower-tm-tensor", "ember-define-scalar-library", "inline",
                      "symbol-dce", "ember-check-gather-bounds"]


def lower_torch_ir_to_linalg(module):
    """torch dialect -> linalg-on-tensors in place (torch-mlir's backend pipelines).
    Raises whatever torch-mlir raises; the caller maps it to the ATen op. The TMTensor ops
    torch-mlir leaves (scan, scatter, sort) become loops here (ember-lower-tm-tensor)."""
    from torch_mlir import fx as torch_mlir_fx
    from torch_mlir.compiler_utils import OutputType
    from torch_mlir.passmanager import PassManager

    from .pipeline import run_pipeline

    run_pipeline(module, TORCH_IR_REWRITES, stage="call-scalar-library")
    torch_mlir_fx._module_lowering(False, False, OutputType.TORCH, module)
    with module.context:
        PassManager.parse(_linalg_backend_pipeline()).run(module.operation)
    run_pipeline(module, TM_TENSOR_LOWERING, stage="lower-tm-tensor")
    if _has_symbols(module):
        run_pipeline(module, SHAPE_RESOLUTION, stage="resolve-dims")
    return module


# Sizes become the ember_shape symbols; CSE then merges equal ones, and canonicalization
# folds the shape checks between them.
SHAPE_RESOLUTION = ["ember-shape-resolve-dims", "ember-shape-exact-reshapes", "cse",
                    "canonicalize"]


def _has_symbols(module):
    from ember.dialects.shape import SYMBOL_OP_NAME

    from .ir_walk import collect

    return bool(collect(module.operation, lambda o: o.name == SYMBOL_OP_NAME))


def import_to_linalg(gm, shapes=None):
    """Return an MLIR module (linalg-on-tensors) with function @forward, in this process
    (tests and tools; ember's compile path lowers in the codegen worker)."""
    check_graph_is_importable(gm)
    with torch_context() as (context, diagnostics):
        try:
            importer = new_fx_importer(context)
            _import_graph(importer, gm, shapes)
            module = lower_torch_ir_to_linalg(importer.module)
        except Exception as exc:  # torch-mlir raises several types; all mean 'cannot lower'
            raise unsupported_from_message(gm, "\n".join(diagnostics) + f"\n{exc}") from None
    check_lowerable(gm, module)
    return module


# Ops torch-mlir leaves outside linalg (its TMTensor dialect), by the ATen op behind them.
_TM_TENSOR_SOURCES = {
    "tm_tensor.scan": "aten.cumsum", "tm_tensor.sort": "aten.sort", "tm_tensor.topk": "aten.topk",
    "tm_tensor.scatter": "aten.scatter", "tm_tensor.attention": "aten.scaled_dot_product_attention",
}


def leftover_ops(module):
    """Names of ops the linalg pipeline cannot bufferize and lower, the one that stands for
    the ATen op first (the walk visits nested ops first)."""
    from .ir_walk import collect

    found = [o.name for o in collect(module.operation,
                                     lambda o: o.name.startswith(("tm_tensor.", "torch.", "torch_c.")))]
    found.sort(key=lambda n: (n not in _TM_TENSOR_SOURCES, n.endswith("yield")))
    return found


def unsupported_from_leftovers(gm, found):
    op = _TM_TENSOR_SOURCES.get(found[0], found[0])
    return _named_error(find_node(gm, op), op,
                                 f"lowers to {found[0]}, which ember's CPU pipeline lacks")


def check_lowerable(gm, module):
    """Raise for ops the linalg pipeline cannot bufferize and lower."""
    found = leftover_ops(module)
    if found:
        raise unsupported_from_leftovers(gm, found)
