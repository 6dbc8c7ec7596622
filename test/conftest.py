import atexit
import os
import shutil
import tempfile
import warnings

import pytest
import torch

# Tests compare against eager on this machine's cores; keep runs reproducible.
torch.manual_seed(0)

# A compile cache left by an earlier run would hide the compile path under test: each
# test session compiles into a cache of its own.
if "EMBER_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="ember-test-cache-")
    os.environ["EMBER_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, True)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def strict_ember(monkeypatch):
    """Compile with fallback disabled, so a lowering gap fails the test loudly."""
    monkeypatch.setenv("EMBER_STRICT", "1")
