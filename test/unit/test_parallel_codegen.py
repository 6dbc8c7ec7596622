"""LLVM's work split into parts compiled at the same time (compiler/object_emission.py,
targets/cpu/split_module.py): the parts' objects, loaded together, compute what eager
computes, and a part whose LLVM dies is an error, not a hang or a lost process."""
import ctypes

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from ember.compiler import codegen, importer, object_emission
from ember.compiler.capture import decomposition_table
from ember.compiler.graph_outputs import plan_outputs
from ember.targets.cpu import split_module
from ember.targets.cpu.loader import LoadedKernel


def _layers(x, w1, w2, w3):
    # three layers of matmul + epilogue: several outlined kernels to spread over parts
    h = torch.nn.functional.gelu(x @ w1) * 1.5 + 0.25
    h = torch.softmax(h @ w2, dim=-1) + torch.tanh(h)
    return torch.nn.functional.layer_norm(h @ w3, (64,)), h.sum(0)


def _inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(256, 64, generator=g)] + \
        [torch.randn(64, 64, generator=g) / 8 for _ in range(3)]


def _torch_ir(fn, inputs):
    gm = make_fx(fn, decomposition_table=decomposition_table())(*inputs)
    plan, kernel_gm = plan_outputs(gm)
    outputs = [importer._val(n) for n in
               next(n for n in kernel_gm.graph.nodes if n.op == "output").args[0]]
    return importer.import_to_torch_ir(kernel_gm, None), outputs


@pytest.fixture
def split_small_modules(monkeypatch):
    monkeypatch.setattr(split_module, "MIN_SPLIT_OPS", 0)
    monkeypatch.setattr(object_emission, "usable_cores", lambda: 2)


def test_parts_compiled_in_parallel_link_and_match_eager(split_small_modules):
    inputs = _inputs()
    torch_ir, outputs = _torch_ir(_layers, inputs)
    reply = codegen.build_object(torch_ir)
    assert reply["ok"], reply
    assert len(reply["objects"]) == 2  # the entry's part and the kernels' part
    outs = [torch.empty(tuple(o.shape), dtype=o.dtype) for o in outputs]
    workspace = torch.empty(max(reply["workspace_bytes"], 1), dtype=torch.uint8)
    arg_types = ["ptr"] * (len(inputs) + len(outs)) + (["ptr"] if reply["workspace_bytes"]
                                                      else [])
    kernel = LoadedKernel(reply["objects"], importer.ENTRY, arg_types)
    pointers = [t.data_ptr() for t in inputs + outs]
    kernel.fn(*pointers, *([workspace.data_ptr()] if reply["workspace_bytes"] else []))
    for actual, expected in zip(outs, _layers(*inputs)):
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)


def test_split_defines_each_function_once_and_declares_the_rest(split_small_modules):
    torch_ir, _ = _torch_ir(_layers, _inputs())
    from torch_mlir import ir
    from ember.compiler.fusion import fuse
    from ember.targets.cpu import lower_to_llvm

    with importer.torch_context() as (context, _):
        with context:
            module = ir.Module.parse(torch_ir)
        importer.lower_torch_ir_to_linalg(module)
        fuse(module, {})
        lower_to_llvm(module)
        parts = split_module.split_module(module, 2)
    assert len(parts) == 2
    (text0, names0), (text1, names1) = parts
    assert importer.ENTRY in names0 and not set(names0) & set(names1)
    assert any(n.startswith("ember_par_") for n in names1)
    # the entry calls launchers defined in the other part: declared, with external linkage
    launcher = next(n for n in names1 if n.endswith("_launch"))
    assert f'sym_name = "{launcher}"' in text0
    assert f"@{launcher}(" in text1 and "internal @" + launcher not in text1


def test_a_part_whose_llvm_dies_is_an_error(split_small_modules, monkeypatch):
    real = object_emission._compile_text

    def dies_in_the_child(text, opt_level, path, defined):
        if defined and importer.ENTRY not in defined:
            ctypes.string_at(0)  # segfault, as an LLVM abort would end the child
        return real(text, opt_level, path, defined)

    monkeypatch.setattr(object_emission, "_compile_text", dies_in_the_child)
    torch_ir, _ = _torch_ir(_layers, _inputs())
    reply = codegen.build_object(torch_ir)
    assert not reply["ok"] and reply["stage"] == "llvm"
    assert "part 1 of 2" in reply["message"] and "signal" in reply["message"]
