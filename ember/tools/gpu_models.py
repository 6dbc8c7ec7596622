"""Compile the benchmark models for the GPU targets on a machine without a GPU and run
them on the host executor: every kernel to sm_90 PTX assembled by ptxas, and (with
--target rocm) to a gfx942 code object linked with --no-undefined, outputs vs eager.

    python -m ember.tools.gpu_models [--models bert,gpt2] [--target cuda|rocm] [--dynamic]
"""
import argparse
import logging
import os
import sys
import time
import warnings

import torch


def check_model(name, target, dynamic):
    from ember.compiler import gpu_driver
    from ember.models import build, first_tensor

    with gpu_driver.record_graphs() as graphs:
        torch._dynamo.reset()
        model, inputs = build(name, "small", 2)
        compiled = torch.compile(model, backend="ember", dynamic=dynamic or None,
                                 options={"target": target})
        t = time.perf_counter()
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            expected = first_tensor(model(*inputs))
            actual = first_tensor(compiled(*inputs))
        seconds = time.perf_counter() - t
    stats = [g.stats for g in graphs if g.launch_plan is not None]
    return {"model": name, "rel_err": ((actual - expected).abs().max() /
                                       expected.abs().max()).item(),
            "graphs": len(stats), "launches": sum(s.get("kernels", 0) for s in stats),
            "kernels": sum(s.get("unique_kernels", 0) for s in stats),
            "ptxas": all(s.get("ptxas_checked") for s in stats),
            "amd": sum(s.get("amd_kernels_linked", 0) for s in stats),
            "fallbacks": sum("ember" in str(w.message) for w in caught), "seconds": seconds}


def main(argv=None):
    from ember.models import MODEL_NAMES

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", default=",".join(MODEL_NAMES))
    p.add_argument("--target", default="rocm", choices=["cuda", "rocm"])
    p.add_argument("--dynamic", action="store_true")
    args = p.parse_args(argv)
    os.environ["EMBER_GPU_EXECUTOR"] = "host"
    logging.getLogger("ember").setLevel(logging.WARNING)
    print(f"{'model':12s} {'rel err':>8s} {'graphs':>6s} {'launches':>8s} {'kernels':>7s} "
          f"{'ptxas':>5s} {'amd':>4s} {'fb':>3s} {'s':>5s}")
    failed = 0
    for name in [m for m in args.models.split(",") if m]:
        r = check_model(name, args.target, args.dynamic)
        ok = r["rel_err"] < 1e-4 and r["ptxas"] and r["graphs"] > 0
        failed += not ok
        print(f"{name:12s} {r['rel_err']:8.1e} {r['graphs']:6d} {r['launches']:8d} "
              f"{r['kernels']:7d} {str(r['ptxas']):>5s} {r['amd']:4d} {r['fallbacks']:3d} "
              f"{r['seconds']:5.1f}{'' if ok else '  <-- check'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
