import os
import warnings

import pytest
import torch

# Tests compare against eager on this machine's cores; keep runs reproducible.
torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def strict_ember(monkeypatch):
    """Compile with fallback disabled, so a lowering gap fails the test loudly."""
    monkeypatch.setenv("EMBER_STRICT", "1")
