"""Keep a long-running server's resident memory flat under glibc's malloc.

glibc's malloc serves an allocation above its mmap threshold with a fresh mapping that goes back to the
system when freed, and everything below from its heaps, which keep what they free for reuse. The
threshold starts at 128 KB and rises to the size of every mapping freed (up to 32 MB), so after a few
decoder batches their tensors all come from the heaps. Batches of ever-changing shapes (sentence
lengths, batch sizes, beams leaving) then leave holes that no later tensor fits, and a server's RSS grows
in steps of tens of MB over thousands of requests. A fixed threshold stops the rise: tensors above it
are mapped and returned, and the heaps only hold the small ones.

Measured with `benchmarks/speed/serve.py` (batching, 1 thread, 6000 requests at concurrency 64, the Multi30k
model; NOTEBOOK.md; one run each): glibc's default grew 5.7-7.3% at 111.6-114.1 sentences/s; a fixed 16 MB threshold
stayed flat (348.4 -> 348.8 MB) at 111.6; 1 MB and 4 MB were flat too, but 12% and 6.5% slower (every
mapping costs page faults on first touch); 32 MB still grew 3.3%.
"""

import ctypes

M_MMAP_THRESHOLD = -3  # the mallopt parameter, from glibc's malloc.h


def fix_mmap_threshold(nbytes: int) -> bool:
    """Fix the C library's mmap threshold at `nbytes`; False where that library is not glibc.

    musl and macOS's libc have no such threshold (musl's `mallopt` does nothing, macOS has none), so
    there is nothing to set.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process already uses
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, nbytes) == 1
