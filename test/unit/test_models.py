"""Real HuggingFace models from small configs: ember (fallback off) against eager, called
the way users call them: under no_grad, and plainly (grad mode, which saves activations
for backward and so returns values twice)."""
import contextlib

import pytest
import torch

from ember.models import MODEL_NAMES, activation_stats, build, first_tensor
from helpers import compile_strict

pytest.importorskip("transformers")


@pytest.mark.parametrize("mode", ["no_grad", "grad"])
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_model_matches_eager(name, mode):
    torch.manual_seed(0)
    model, inputs = build(name)
    context = torch.no_grad() if mode == "no_grad" else contextlib.nullcontext()
    with context:
        expected = first_tensor(model(*inputs))
        actual = first_tensor(compile_strict(model)(*inputs))
    # Realistic activations: O(1) spread and no denormals, so that the tolerance means
    # something (HF's random MobileNetV2 gave ~1e-23).
    std, tiny = activation_stats(expected)
    assert 0.05 < std < 20 and tiny == 0, (std, tiny)
    assert actual.requires_grad == expected.requires_grad
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4 * std)
