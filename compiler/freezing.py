"""Freezing (`options={"freezing": True}`): an inference graph's weights as constants.

Dynamo hands the model's parameters and buffers to the graph as inputs ("static"
inputs). With freezing, whatever the graph computes from them alone is computed once,
when the graph is first called, and its results are passed to the compiled code in place
of the weights:

    before: forward(w, var, bn_w, x):  s = bn_w / sqrt(var + eps)     (every call)
                                       y = convolution(x, w) * s
    after:  fold(w, var, bn_w) -> (w, s)       once
            forward(x, w, s):      y = convolution(x, w) * s

- Batch norm's scale and shift, and any other weight-only arithmetic, leave the
  per-call code. Views of weights (slices, transposes) stay in it: there they cost
  nothing, and folded they would be strided inputs copied on every call.
- Not done: channels-last convolution weights. Tried (weights stored channels-last,
  activations following them, compiler/extern_layouts.py): oneDNN's convolutions took
  the same time as with ember's NCHW graphs (ResNet b8, one thread, 7.2 ms either way)
  and ember's kernels on channels-last data were slower (ResNet 1.35 -> 1.98 ms,
  ConvNeXt and MobileNetV2 likewise).

Unlike inductor's freezing, a weight that changes afterwards is seen: each call compares
the weights' identity and version counters with those folded, and folds again after
`load_state_dict`, an in-place update or a new Parameter. Only inference graphs (no
gradient) are frozen; weights the graph mutates or returns stay inputs. The folded values
are kept beside the model's weights (extra memory: the size of what was folded).
"""
import threading

import torch

from .extern_ops import is_pure
from .fx_meta import value_of as _val


def freezable_inputs(num_inputs):
    """Indices of the graph inputs that are weights (Dynamo's static inputs) the graph
    neither mutates nor returns as an alias, from AOTAutograd's tracing context."""
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None)
    if meta is None or len(meta.input_info) != num_inputs:
        return []
    aliased = {o.base_idx for o in meta.output_info if o.base_idx is not None}
    return [i for i in sorted(meta.static_input_indices)
            if i < num_inputs and i not in aliased
            and not meta.input_info[i].mutates_data and not meta.input_info[i].mutates_metadata]


def _grows(node):
    """A value bigger than every input it is made of (an expand, a repeat): folding it
    would store a broadcast that the compiled code computes for free."""
    out = _val(node)
    ins = [_val(a) for a in node.all_input_nodes]
    if not isinstance(out, torch.Tensor):
        return True
    sizes = [t.numel() for t in ins if isinstance(t, torch.Tensor)]
    return not sizes or out.numel() > max(sizes)


def _foldable_nodes(gm, frozen_placeholders):
    """Nodes computed from frozen inputs alone, in graph order (placeholders included)."""
    frozen = set(frozen_placeholders)
    for node in gm.graph.nodes:
        if node.op != "call_function" or node in frozen:
            continue
        inputs = node.all_input_nodes
        if inputs and all(a in frozen for a in inputs) and is_pure(node.target) \
                and not _grows(node):
            frozen.add(node)
    return frozen


def _is_view(node):
    return node.op == "call_function" and getattr(node.target, "is_view", False)


def _frontier(gm, foldable):
    """The folded values the per-call graph reads. A view there (a weight's slice, its
    transpose) is not folded but left to the compiled code, where it costs nothing; its
    source is read instead (a folded slice would be a strided input, copied every call)."""
    while True:
        frontier = [n for n in gm.graph.nodes if n in foldable
                    and any(u not in foldable for u in n.users)]
        views = [n for n in frontier if _is_view(n)]
        if not views:
            return frontier
        foldable.difference_update(views)


def freeze(gm, example_inputs, frozen_indices):
    """Split `gm` into a folding graph and the per-call graph. Returns (per-call gm, its
    example inputs, FrozenInputs) or None when nothing would be folded."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    frozen_placeholders = [placeholders[i] for i in frozen_indices]
    if not frozen_placeholders:
        return None
    foldable = _foldable_nodes(gm, frozen_placeholders)
    frontier = _frontier(gm, foldable)
    if not frontier:
        return None
    # the folding graph: frozen placeholders -> frontier values
    fold_graph = torch.fx.Graph()
    env = {}
    for node in gm.graph.nodes:
        if node in foldable:
            env[node] = fold_graph.node_copy(node, lambda a: env[a])
    fold_graph.output(tuple(env[n] for n in frontier))
    fold_gm = torch.fx.GraphModule(gm, fold_graph)
    # the per-call graph: each frontier value becomes a new input at the end
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    last_placeholder = placeholders[-1]
    new_inputs = []
    for k, node in enumerate(frontier):
        with gm.graph.inserting_after(last_placeholder):
            ph = gm.graph.placeholder(f"frozen_{k}")
        last_placeholder = ph
        ph.meta.update(node.meta)
        node.replace_all_uses_with(ph, delete_user_cb=lambda u: u not in foldable)
        new_inputs.append(ph)
    for node in reversed(list(gm.graph.nodes)):
        if node in foldable and not node.users and node is not output:
            gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    kept = [i for i in range(len(placeholders)) if i not in set(frozen_indices)]
    examples = [example_inputs[i] for i in kept] + [_val(n) for n in frontier]
    return gm, examples, FrozenInputs(fold_gm, list(frozen_indices), kept)


def _version(t):
    try:
        return t._version
    except Exception:  # inference tensors have no version counter
        return None


class FrozenInputs:
    """The per-call side of freezing: folds the weights on the first call (and again when
    one of them changed), then hands the compiled code the kept inputs + folded values."""

    def __init__(self, fold_gm, frozen_indices, kept):
        self.fold_gm = fold_gm
        self.frozen_indices = frozen_indices
        self.kept = kept
        self._weights = None   # the tensors folded (identity check)
        self._versions = None
        self._values = None
        self._lock = threading.Lock()

    def _current(self, weights):
        if self._weights is None or len(weights) != len(self._weights):
            return False
        return all(a is b for a, b in zip(weights, self._weights)) and \
            [_version(w) for w in weights] == self._versions

    def arguments(self, args):
        weights = [args[i] for i in self.frozen_indices]
        if not self._current(weights):
            with self._lock, torch.no_grad():
                if not self._current(weights):
                    values = self.fold_gm(*weights)
                    self._values = [v.detach() if isinstance(v, torch.Tensor) else v
                                    for v in values]
                    self._weights = weights
                    self._versions = [_version(w) for w in weights]
        return [args[i] for i in self.kept] + list(self._values)

    def remap_input(self, i):
        """The per-call graph's index of original input i (None if it was frozen)."""
        return self.kept.index(i) if i in self.kept else None
