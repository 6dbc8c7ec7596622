"""Real HuggingFace models from small configs: ember (fallback off) against eager."""
import pytest
import torch

from ember.models import MODEL_NAMES, build, first_tensor
from helpers import compile_strict

pytest.importorskip("transformers")


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_model_matches_eager(name):
    torch.manual_seed(0)
    model, inputs = build(name)
    model = model.eval()
    with torch.no_grad():
        expected = first_tensor(model(*inputs))
        actual = first_tensor(compile_strict(model)(*inputs))
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
