"""Demo: compile a real HuggingFace model (BERT from a small config) with ember, check it
against eager, and time both.  python -m ember.demo [model]"""
import logging
import sys
import time

import torch

import ember
from ember.models import MODEL_NAMES, build, first_tensor


def _median_ms(fn, inputs, iters=10):
    times = []
    with torch.no_grad():
        for _ in range(iters):
            t = time.perf_counter()
            fn(*inputs)
            times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] * 1e3


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    name = argv[0] if argv else "bert"
    if name not in MODEL_NAMES:
        print(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.manual_seed(0)
    model, inputs = build(name, scale="bench", batch=4)
    model = model.eval()
    print(f"ember demo: {name}, inputs {[tuple(i.shape) for i in inputs]}")
    fast = ember.compile(model)
    t = time.perf_counter()
    with torch.no_grad():
        out = first_tensor(fast(*inputs))
        ref = first_tensor(model(*inputs))
    print(f"first call (compile + run): {time.perf_counter() - t:.1f}s")
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    print(f"matches eager: max abs error {(out - ref).abs().max().item():.2e}")
    # A plain call (grad mode, as in the README) compiles the training forward graph.
    out_grad = first_tensor(fast(*inputs))
    torch.testing.assert_close(out_grad, ref, rtol=1e-4, atol=1e-4)
    print(f"grad-mode call matches eager too (requires_grad={out_grad.requires_grad})")
    eager_ms, ember_ms = _median_ms(model, inputs), _median_ms(fast, inputs)
    print(f"median latency: eager {eager_ms:.2f} ms, ember {ember_ms:.2f} ms "
          f"(eager/ember {eager_ms / ember_ms:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
