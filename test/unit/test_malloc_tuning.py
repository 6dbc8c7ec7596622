"""Once ember runs CPU code, freed tensor memory is kept for reuse (targets/cpu/malloc_tuning):
blocks that glibc would unmap or trim and map again, page-faulting on every call, are not
returned to the kernel, unless the user opts out."""
import os
import platform
import subprocess
import sys
import textwrap

import pytest

# Three 28 MiB blocks live at once, freed, four times: glibc's defaults trim the heap top
# (3 x 28 > twice its adapted 28 MiB threshold) and fault the pages in again each time.
_SCRIPT = textwrap.dedent("""
    import logging, resource, torch, ember
    logging.basicConfig(level=logging.INFO)
    compiled = ember.compile(lambda x: x * 2 + 1)
    assert torch.equal(compiled(torch.ones(8)), torch.full((8,), 3.0))
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(4):
        before = faults()
        blocks = [torch.empty(7 << 20).fill_(1) for _ in range(3)]
        del blocks
        print("FAULTS", faults() - before)
""")


def _run(**env):
    """(page faults of the quietest of the last three rounds, the child's stderr: its log).
    The quietest: an object the interpreter allocates meanwhile can sit where one block
    was and push it onto fresh pages once (a suite run saw 7,168 faults, one block, in
    one round); glibc's defaults fault all three blocks in every round."""
    env = dict(os.environ, **env)
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    faults = [int(l.split()[1]) for l in done.stdout.splitlines() if l.startswith("FAULTS")]
    return min(faults[1:]), done.stderr


_APPLIED = "glibc malloc keeps freed memory for reuse"


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_freed_memory_is_reused_without_page_faults():
    faults, log = _run()
    assert _APPLIED in log
    assert faults < 500  # 84 MiB touched: 21,500 pages if they were fresh


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_opting_out_leaves_malloc_alone():
    # Whether glibc's defaults then fault depends on what else sits at the heap top (a
    # suite run saw 0), so the test checks that ember did not apply its setting.
    for env in ({"EMBER_RETAIN_FREED_MEMORY": "0"}, {"MALLOC_ARENA_MAX": "2"}):
        _, log = _run(**env)
        assert _APPLIED not in log, env
