"""glibc's malloc keeps the memory that tensors free, instead of returning it to the kernel.

glibc maps every block above its mmap threshold (128 KiB, adapting up to 32 MiB) with
mmap and unmaps it when it is freed, and trims the top of its heap whenever more than
twice that much is free there. A model whose activations are megabytes then gets fresh
pages for its tensors on every call, and the kernel zero-fills each 4 KiB page at its first
touch. Measured on wav2vec2 at batch 8 (2 cores): 43,000 minor page faults per ember call
(inductor 33,000, eager 80,000); once freed memory is kept, none, and the call takes
137 ms instead of 230 ms (inductor 222 -> 135 ms, eager 390 -> 190 ms: the setting is
process-wide).

So, as PyTorch's CUDA caching allocator does on GPUs and the CPU tuning guides advise
(jemalloc / tcmalloc with decay off), the first time ember loads CPU code it sets the mmap
threshold to glibc's maximum (32 MiB: larger blocks are still mapped) and the trim
threshold to 1 GiB. The cost: the resident set stays near its high-water mark instead of
shrinking after each call. It is left alone where the user chose otherwise:
EMBER_RETAIN_FREED_MEMORY=0, any MALLOC_*_ variable or glibc.malloc tunable of their own,
or a C library other than glibc.
"""
import ctypes
import logging
import os
import platform

log = logging.getLogger("ember")

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_MMAP_THRESHOLD = 32 << 20  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
_TRIM_THRESHOLD = 1 << 30

_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                  "MALLOC_MMAP_MAX_", "MALLOC_ARENA_MAX")

_done = [False]


def _user_chose_malloc_settings():
    if os.environ.get("EMBER_RETAIN_FREED_MEMORY", "1") in ("0", ""):
        return True
    if any(name in os.environ for name in _USER_SETTINGS):
        return True
    return "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")


def retain_freed_memory():
    """Apply the setting once per process (see the module doc); True when it was applied
    by this call."""
    if _done[0]:
        return False
    _done[0] = True
    if _user_chose_malloc_settings() or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    applied = (mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) == 1
               and mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1)
    log.info("ember: glibc malloc keeps freed memory for reuse (mmap threshold 32 MiB, trim "
             "threshold 1 GiB)%s; EMBER_RETAIN_FREED_MEMORY=0 leaves malloc alone",
             "" if applied else " - mallopt refused it")
    return applied
