"""glibc's mmap threshold, fixed for the server: a large block freed goes back to the system."""

import platform
import subprocess
import sys

import pytest

from tnmt.config import ServeConfig

# In a fresh interpreter: free one 8 MB block (glibc's adaptive threshold then rises to 8 MB), allocate and
# touch another, free it, and print how much of it stayed resident.
PROBE = """
import ctypes, sys
from tnmt.serve.allocator import fix_mmap_threshold
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
def rss_kb():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS"))
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold(1 << 20)
size = 8 << 20
libc.free(libc.malloc(size))
before = rss_kb()
block = libc.malloc(size)
ctypes.memset(block, 1, size)
libc.free(block)
print(rss_kb() - before)
"""


def kept_kb(mode: str) -> int:
    return int(subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True).stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the C library is not glibc")
def test_a_fixed_threshold_returns_large_blocks_that_the_adaptive_one_keeps():
    assert kept_kb("adaptive") > 6 * 1024  # the heap kept the block: RSS grew by most of its 8 MB
    assert kept_kb("fixed") < 1024  # mapped and unmapped


def test_the_threshold_is_bounded_like_glibcs():
    assert ServeConfig(mmap_threshold_mb=0).mmap_threshold_mb == 0
    with pytest.raises(ValueError, match="mmap_threshold_mb = 64: must be from 0 to 32"):
        ServeConfig(mmap_threshold_mb=64)
