"""A deterministic slice of PyTorch's OpInfo database, compiled with ember vs eager.

The whole sweep (every op, 3 samples, float32 and bfloat16) is a command:
`python -m ember.tools.opinfo_sweep [--dtype bfloat16]`. Here every 6th op's first
sample: no sample may end WRONG, RAISED or CRASH (each runs in a worker process, so a
crash is counted, not fatal). The gradient slice compiles every 8th differentiable op's
forward and backward (`--grad`)."""
import pytest

pytest.importorskip("expecttest")  # torch.testing._internal needs it

from ember.tools.opinfo_sweep import report, sweep


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_opinfo_slice_never_wrong_never_crashes(dtype, capsys):
    records = sweep(dtype, samples=1, jobs=2, every=6 if dtype == "float32" else 12,
                    timeout=240, progress=False)
    assert len(records) > 40
    bad = [r for r in records if r["result"] in ("WRONG", "RAISED", "CRASH")]
    assert not bad, "\n".join(f"{r['result']} {r['op']}[{r['sample']}]: {r['detail']}"
                              for r in bad)
    passed = sum(r["result"] == "PASS" for r in records)
    assert passed >= len(records) // 3  # most samples reach ember kernels


def test_opinfo_gradient_slice_never_wrong_never_crashes():
    records = sweep("float32", samples=1, jobs=2, every=8, timeout=240, progress=False,
                    grad=True)
    assert len(records) > 40
    bad = [r for r in records if r["result"] in ("WRONG", "RAISED", "CRASH")]
    assert not bad, "\n".join(f"{r['result']} {r['op']}[{r['sample']}]: {r['detail']}"
                              for r in bad)
    assert sum(r["result"] == "PASS" for r in records) >= len(records) // 3


@pytest.mark.parametrize("name", ["nn.AvgPool1d", "nn.MaxPool2d", "nn.GroupNorm"])
def test_module_sweep_slice_strict(name, capsys):
    """torch's ModuleInfo samples (unbatched inputs included: an unbatched AvgPool1d sent
    its whole graph to ATen), forward and gradients, strict. The whole database is
    `python -m ember.tools.module_sweep`."""
    from ember.tools.module_sweep import _run_one

    _run_one(name, strict=True)
    line = capsys.readouterr().out.splitlines()[0]
    assert line.split()[1] == "OK", line
