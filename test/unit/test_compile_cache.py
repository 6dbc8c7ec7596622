"""The on-disk compile cache (compiler/object_cache.py): a fresh process loads what an
earlier one compiled, a damaged entry is recompiled, the size cap evicts."""
import os
import subprocess
import sys
import textwrap

import torch

import ember
from ember.compiler import object_cache

_SCRIPT = textwrap.dedent("""
    import torch, ember
    from ember.compiler import importer
    from ember.compiler.object_cache import OBJECT_CACHE
    imports, real_import = [], importer.import_to_torch_ir
    importer.import_to_torch_ir = lambda *a, **k: imports.append(1) or real_import(*a, **k)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    with torch.no_grad():
        torch.testing.assert_close(ember.compile(m, options={"fallback": False})(x), m(x))
    print("HITS", OBJECT_CACHE.hits, "STORES", OBJECT_CACHE.stores, "IMPORTS", len(imports))
""")


def _run(cache_dir):
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache_dir))
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [l for l in done.stdout.splitlines() if l.startswith("HITS")][-1].split()
    return int(line[1]), int(line[3]), int(line[5])


def _entries(cache_dir):
    """The object entries (not the graph-key index entries, "fx-...")."""
    root = os.path.join(cache_dir, "objects")
    return [os.path.join(b, f) for b, _, files in os.walk(root) for f in files
            if not f.startswith("fx-")]


def test_a_fresh_process_loads_instead_of_compiling(tmp_path):
    assert _run(tmp_path) == (0, 1, 1)  # cold: imported, compiled and stored
    # warm: loaded, nothing compiled, and not even imported to torch IR (the graph's key
    # leads to the object)
    assert _run(tmp_path) == (1, 0, 0)
    (entry,) = _entries(tmp_path)
    with open(entry, "wb") as f:  # damaged (a disk error, a killed writer)
        f.write(b"ember-object-cache-1 not a pickle")
    assert _run(tmp_path) == (0, 1, 1)  # dropped, compiled again, correct results


def test_key_covers_the_ir_and_the_opt_level():
    base = {"torch_ir": b"module A", "opt_level": 3}
    key = object_cache.request_key(base)
    assert key == object_cache.request_key(dict(base))
    assert key != object_cache.request_key({**base, "opt_level": 2})
    assert key != object_cache.request_key({**base, "torch_ir": b"module B"})


def test_size_cap_evicts_least_recently_used(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    cache = object_cache.ObjectCache()
    reply = {"ok": True, "object": b"x" * 4000}
    monkeypatch.setenv("EMBER_CACHE_MB", "1")  # no eviction while storing
    for i in range(5):
        cache.store(f"{i:064x}", reply)
        os.utime(cache._path(f"{i:064x}"), (1000 + i, 1000 + i))  # used in this order
    object_cache.evict(9000)  # room for two entries
    left = sorted(os.path.basename(p) for p in _entries(tmp_path))
    assert left == [f"{3:064x}", f"{4:064x}"]


def test_disabled_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_DISK_CACHE", "0")
    m = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    with torch.no_grad():
        torch.testing.assert_close(ember.compile(m)(x), m(x))
    assert _entries(tmp_path) == []
