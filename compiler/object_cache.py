"""The on-disk cache of code generation: a fresh process that compiles a graph it compiled
before loads the object file instead of running MLIR's lowering and LLVM again.

What the codegen worker returns (object code, workspace size, run-time check messages) is
a function of its request alone: the torch-dialect IR of the graph (its bytecode holds the
graph's ops, shapes, symbols and constants), the LLVM optimisation level, the host CPU
LLVM generates code for, and the code of ember, torch-mlir and llvmlite. The key hashes
exactly those. ember's own version is the hash of its source files, so editing a pass
invalidates every entry without a version bump.

Entries live in `$EMBER_CACHE_DIR/objects` (default `~/.cache/ember/objects`), one file
each, written to a temporary name and renamed into place: two processes compiling the
same graph at once both write a whole file, and a reader never sees half of one. The
directory is kept under `EMBER_CACHE_MB` (default 1024) by evicting the least recently
used entries. `EMBER_DISK_CACHE=0` turns the cache off.
"""
import functools
import hashlib
import logging
import os
import pickle
import tempfile
import threading
from importlib import metadata

log = logging.getLogger("ember")
_FORMAT = b"ember-object-cache-1"
_INDEX_FORMAT = b"ember-graph-index-1:"
_lock = threading.Lock()


def cache_root():
    """ember's cache directory: $EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember, else
    ~/.cache/ember."""
    return os.environ.get("EMBER_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "ember")


def enabled():
    return os.environ.get("EMBER_DISK_CACHE", "1").strip().lower() not in ("0", "false",
                                                                           "no", "off")


def _directory():
    return os.path.join(cache_root(), "objects")


def _limit_bytes():
    try:
        return int(float(os.environ.get("EMBER_CACHE_MB", "1024")) * 2 ** 20)
    except ValueError:
        return 2 ** 30


# Every package whose code can change what the codegen worker produces.
_PACKAGES = ("ember", "ember.compiler", "ember.compiler.passes", "ember.dialects",
             "ember.targets", "ember.targets.cpu", "ember.targets.gpu", "ember.targets.cuda",
             "ember.targets.rocm",
             "ember.runtime")


@functools.lru_cache(maxsize=None)
def _code_fingerprint():
    """ember's source files, and the versions of the code generators it drives."""
    import importlib.util

    h = hashlib.sha256(_FORMAT)
    for package in _PACKAGES:
        # find_spec, not import: importing ember.compiler.passes would load every pass and
        # torch-mlir's dialects (0.3 s) in a process that only loads cached objects.
        for directory in importlib.util.find_spec(package).submodule_search_locations:
            for name in sorted(os.listdir(directory)):
                if name.endswith(".py"):
                    h.update(f"{package}/{name}".encode())
                    with open(os.path.join(directory, name), "rb") as f:
                        h.update(f.read())
    for dist in ("torch", "torch-mlir", "llvmlite"):
        try:
            h.update(f"{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=?".encode())
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def _host_cpu():
    """What LLVM generates code for here (ExecutionEngine targets the host)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    return f"{llvm.get_process_triple()}|{llvm.get_host_cpu_name()}|" \
           f"{llvm.get_host_cpu_features().flatten()}"


def request_key(request):
    """The cache key of one codegen request (torch IR bytes, opt level, in-place
    candidates)."""
    h = hashlib.sha256(_code_fingerprint().encode())
    h.update(_host_cpu().encode())
    h.update(repr((request.get("opt_level", 3), request.get("in_place", []),
                   request.get("kind"), request.get("vendor"), request.get("arch"),
                   request.get("host_executor"))).encode())
    if request.get("kind") == "gpu":
        from ember.targets.cuda.ptx import toolchain_fingerprint
        h.update(toolchain_fingerprint().encode())
    h.update(request["torch_ir"])
    return h.hexdigest()


def index_key(graph_key):
    """The key under which the request key of an FX graph's compile is remembered:
    `graph_key` (runtime/cache.py: the graph's code, constants, input specs, options,
    shape facts) with ember's code and the host CPU. A fresh process that finds it skips
    the torch-mlir import that the request key hashes."""
    h = hashlib.sha256(b"ember-graph-index-1")
    h.update(_code_fingerprint().encode())
    h.update(_host_cpu().encode())
    h.update(graph_key.encode())
    return "fx-" + h.hexdigest()


class ObjectCache:
    """load(key) -> reply or None; store(key, reply); load_index / store_index map a
    graph's index_key to its request key. Counters for tests and logging."""

    def __init__(self):
        self.hits = self.misses = self.stores = 0

    def _path(self, key):
        return os.path.join(_directory(), key[:2], key)

    def load(self, key):
        if not enabled():
            return None
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            with _lock:
                self.misses += 1
            return None
        try:
            if not data.startswith(_FORMAT):
                raise ValueError("not an ember cache entry")
            reply = pickle.loads(data[len(_FORMAT):])
        except Exception as exc:  # a damaged entry: drop it, compile again
            log.info("ember: dropping damaged cache entry %s (%s)", path, exc)
            _remove(path)
            with _lock:
                self.misses += 1
            return None
        try:
            os.utime(path)  # recently used: evicted last
        except OSError:
            pass
        with _lock:
            self.hits += 1
        return reply

    def store(self, key, reply):
        if not enabled() or not reply.get("ok"):
            return
        if not _write_whole(self._path(key), _FORMAT + pickle.dumps(
                reply, protocol=pickle.HIGHEST_PROTOCOL)):
            return
        with _lock:
            self.stores += 1
        evict(_limit_bytes())


    def load_index(self, key):
        """The request key stored for index `key`, or None."""
        if not enabled():
            return None
        try:
            with open(self._path(key), "rb") as f:
                data = f.read()
        except OSError:
            return None
        if not data.startswith(_INDEX_FORMAT):
            return None
        return data[len(_INDEX_FORMAT):].decode("ascii", "replace")

    def store_index(self, key, request_key):
        if not enabled():
            return
        _write_whole(self._path(key), _INDEX_FORMAT + request_key.encode("ascii"))


def _write_whole(path, data):
    """Write `data` to a temporary name and rename it into place (readers never see
    half a file); False when the disk refuses (that costs the cache, not the compile)."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".partial-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(partial, path)
        return True
    except OSError as exc:
        log.info("ember: cannot write the compile cache (%s)", exc)
        return False


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


def evict(limit):
    """Delete the least recently used entries until the cache holds at most `limit`
    bytes."""
    entries, total = [], 0
    for base, _dirs, files in os.walk(_directory()):
        for name in files:
            path = os.path.join(base, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            entries.append((st.st_mtime, st.st_size, path))
            total += st.st_size
    for _mtime, size, path in sorted(entries):
        if total <= limit:
            break
        _remove(path)
        total -= size


OBJECT_CACHE = ObjectCache()
