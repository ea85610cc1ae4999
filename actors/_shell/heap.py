"""Hand the C heap's free memory back to the system after the controller's one large passing allocation.

Writing the experiment's state encodes every trial's row at once (its JSON text and the bytes written):
megabytes for thousands of trials, freed right after. glibc keeps freed memory of that size for the
process, so the controller's resident size grew with each write's peak, not with what it holds: 1.3 KB a
finished trial of ``benchmarks/bench_memory.py``'s 6.6 KB (measured: 5.4 KB with the writes' memory
returned, as with no periodic writes at all). ``malloc_trim`` returns it (0.05-0.2 ms measured here with a
70 MB heap). Elsewhere than glibc (macOS, musl) there is no such call and this does nothing.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any


@functools.cache
def _malloc_trim() -> Callable[[int], Any] | None:
    """glibc's ``malloc_trim``, looked up once; None where the C library has none."""
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return None


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system; False where the C library offers no way to."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


__all__ = ["release_free_heap"]
