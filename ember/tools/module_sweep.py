"""torch's ModuleInfo database (every torch.nn module torch tests: pools, pads, norms, losses,
convolutions, RNNs, attention, Transformer) compiled with ember vs eager, as a user calls
a module.

    python -m ember.tools.module_sweep                        # all 114 modules (~25 min)
    python -m ember.tools.module_sweep --modules nn.LSTM,nn.AvgPool3d
    python -m ember.tools.module_sweep --strict               # any fallback is a failure

For each module, in eval mode (and train mode where they differ), its first three
samples: the module and a copy built from the same seed, the copy compiled with ember; the
forward outputs compared, then the backward of a fixed random projection of every float
output, every parameter's and input's gradient compared (1e-4 / 1e-3). Each module runs in
its own process. A line per module:
  OK       every sample matched (ember warnings, the ops that ran through ATen, follow)
  WRONG    a sample differs (the first difference follows)
  RAISED   ember raised where eager did not (with --strict: a fallback)
  CRASH    the process died or timed out
"""
import sys
import time
import warnings

from ember.tools.per_process import tool_main

_WIDTH = 28


def _leaves(value):
    import torch

    return [v for v in torch.utils._pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


def _fresh(value):
    """Detached copies of the sample's tensors, requires_grad kept (the samples are not
    leaves: deepcopy refuses them)."""
    import torch

    return torch.utils._pytree.tree_map_only(
        torch.Tensor, lambda t: t.detach().clone().requires_grad_(t.requires_grad), value)


def _grads(module, inputs):
    return [p.grad for p in module.parameters()] + [
        t.grad for t in _leaves(inputs) if t.requires_grad]


def _run_sample(info, sample, training, strict):
    """None if ember matched eager on this sample, else what differed; raises what ember
    raised. Returns the ember warnings too."""
    import torch
    import ember

    torch.manual_seed(0)
    module = info.module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
    torch.manual_seed(0)
    copy = info.module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
    copy.load_state_dict(module.state_dict())
    module.train(training)
    copy.train(training)
    call = (sample.forward_input.args, sample.forward_input.kwargs)
    eager_in, ember_in = _fresh(call), _fresh(call)
    torch.manual_seed(1)  # dropout draws the same numbers on both sides
    try:
        expected = module(*eager_in[0], **eager_in[1])
    except Exception:  # noqa: BLE001 - a sample eager rejects tests nothing
        return None, []
    compiled = ember.compile(copy, options={"fallback": False} if strict else None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.manual_seed(1)
        actual = compiled(*ember_in[0], **ember_in[1])
    fallbacks = [str(w.message).splitlines()[0][:160] for w in caught if "ember" in str(w.message)]
    want, got = _leaves(expected), _leaves(actual)
    if len(want) != len(got):
        return f"{len(got)} outputs, eager has {len(want)}", fallbacks
    try:
        for w, g in zip(want, got):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4, equal_nan=True)
        generator = torch.Generator().manual_seed(2)
        terms = [(w, g, torch.randn(w.shape, generator=generator)) for w, g in zip(want, got)
                 if w.requires_grad and w.is_floating_point() and w.numel()]
        if terms:
            sum((w * r).sum() for w, _, r in terms).backward()
            sum((g * r).sum() for _, g, r in terms).backward()
            for w, g in zip(_grads(module, eager_in), _grads(copy, ember_in)):
                if w is None or g is None:
                    assert w is None and (g is None or not g.any()), "a gradient is missing"
                else:
                    torch.testing.assert_close(g, w, rtol=1e-3, atol=1e-3, equal_nan=True)
    except AssertionError as exc:
        return " ".join(str(exc).split())[:300], fallbacks
    return None, fallbacks


def _run_one(name, strict):
    import torch
    from torch.testing._internal.common_modules import module_db

    info = next(m for m in module_db if m.name == name)
    start = time.perf_counter()
    checked, fallbacks = 0, set()
    modes = [False, True] if info.train_and_eval_differ else [False]
    try:
        for training in modes:
            samples = info.module_inputs_func(info, device="cpu", dtype=torch.float32,
                                              requires_grad=True, training=training)
            for k, sample in enumerate(samples[:3]):
                torch._dynamo.reset()
                wrong, warned = _run_sample(info, sample, training, strict)
                fallbacks.update(warned)
                checked += 1
                if wrong:
                    print(f"{name:{_WIDTH}s} WRONG  {time.perf_counter() - start:6.1f}s "
                          f"{'train' if training else 'eval'} sample {k}: {wrong}", flush=True)
                    return
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        first = str(exc).splitlines()[0][:300] if str(exc) else ""
        print(f"{name:{_WIDTH}s} RAISED {time.perf_counter() - start:6.1f}s "
              f"{type(exc).__name__}: {first}", flush=True)
        return
    print(f"{name:{_WIDTH}s} OK     {time.perf_counter() - start:6.1f}s {checked} samples",
          flush=True)
    for line in sorted(fallbacks):
        print(f"{'':{_WIDTH}s}   warning: {line}", flush=True)


def _names():
    from torch.testing._internal.common_modules import module_db

    return sorted(m.name for m in module_db)


def main(argv=None):
    return tool_main(argv, tool="ember.tools.module_sweep", doc=__doc__, all_names=_names,
                     run_one=_run_one, what="modules", timeout=600, width=_WIDTH)


if __name__ == "__main__":
    sys.exit(main())
