"""options={"freezing": True}: weight-only arithmetic folded once, results like eager's,
and a weight changed afterwards is seen (compiler/freezing.py)."""
import pytest
import torch
from torch import nn

import ember
from ember.compiler import freezing
from ember.models import activation_stats, build, first_tensor


def _cnn():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16),
                          nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    with torch.no_grad():  # running statistics of a trained net, not the init's 0 / 1
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()


def _frozen(model, **kwargs):
    return ember.compile(model, options={"freezing": True, "fallback": False}, **kwargs)


@pytest.fixture
def folds(monkeypatch):
    """Counts the folds (first call, and each time a weight changed)."""
    calls = []
    real = freezing.FrozenInputs.arguments

    def arguments(self, args):
        before = self._values
        out = real(self, args)
        if self._values is not before:
            calls.append(len(self._values))
        return out
    monkeypatch.setattr(freezing.FrozenInputs, "arguments", arguments)
    return calls


def test_frozen_cnn_matches_eager_and_folds_once(folds):
    model = _cnn()
    x = torch.randn(4, 3, 12, 12)
    std, tiny = activation_stats(model(x))
    assert 0.1 < std < 10 and tiny == 0
    compiled = _frozen(model)
    with torch.no_grad():
        expected = model(x)
        for _ in range(3):
            torch.testing.assert_close(compiled(x), expected, rtol=1e-5, atol=1e-5)
    assert len(folds) == 1


def test_a_changed_weight_is_folded_again(folds):
    model = _cnn()
    x = torch.randn(2, 3, 8, 8)
    compiled = _frozen(model)
    with torch.no_grad():
        compiled(x)
        # load_state_dict copies in place: the same tensors, new versions
        other = _cnn()
        for p in other.parameters():
            p.data.mul_(1.5)
        model.load_state_dict(other.state_dict())
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
        model[1].running_var.fill_(3.0)  # a buffer updated in place
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    assert len(folds) >= 3


def test_grad_mode_is_not_frozen():
    model = _cnn()
    x = torch.randn(2, 3, 8, 8)
    ref = _cnn()
    compiled = _frozen(model)
    out = compiled(x)
    expected = ref(x)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(model[0].weight.grad, ref[0].weight.grad, rtol=1e-4, atol=1e-5)


def test_frozen_graph_with_changing_batch_size():
    model = _cnn()
    compiled = _frozen(model)
    with torch.no_grad():
        for batch in (2, 3, 5):
            x = torch.randn(batch, 3, 8, 8)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


def test_weight_only_math_leaves_the_per_call_graph(monkeypatch):
    """The per-call graph takes folded values, not the batch norm's four vectors and the
    arithmetic on them: 1/sqrt(var + eps) is computed once."""
    seen = []
    real = freezing.freeze

    def spy(gm, example_inputs, frozen_indices):
        result = real(gm, example_inputs, frozen_indices)
        seen.append(result)
        return result
    monkeypatch.setattr(freezing, "freeze", spy)
    model = _cnn()
    with torch.no_grad():
        _frozen(model)(torch.randn(2, 3, 8, 8))
    gm, _, frozen = seen[0]
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.rsqrt.default not in targets and torch.ops.aten.sqrt.default not in targets
    fold_targets = {n.target for n in frozen.fold_gm.graph.nodes if n.op == "call_function"}
    assert fold_targets & {torch.ops.aten.rsqrt.default, torch.ops.aten.sqrt.default}


def test_frozen_transformer_matches_eager():
    model, inputs = build("bert")
    model.eval()
    with torch.no_grad():
        expected = first_tensor(model(*inputs))
        actual = first_tensor(_frozen(model)(*inputs))
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
