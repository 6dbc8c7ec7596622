"""Compiled artifacts keyed by (graph, input shapes/dtypes, target, options)."""
import hashlib
import threading


class KernelCache:
    def __init__(self):
        self._entries = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def key(graph_text, input_specs, target, options=()):
        h = hashlib.sha256(graph_text.encode())
        h.update(repr((tuple(input_specs), target, tuple(sorted(options)))).encode())
        return h.hexdigest()

    def get_or_build(self, key, build):
        with self._lock:
            if key in self._entries:
                self.hits += 1
                return self._entries[key]
        value = build()
        with self._lock:
            self.misses += 1
            self._entries[key] = value
        return value

    def clear(self):
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0


GLOBAL_CACHE = KernelCache()
