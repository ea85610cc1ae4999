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
from collections.abc import Callable
from typing import Any

_trim: Callable[[int], Any] | None = None
_looked = False


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system; False where the C library offers no way to."""
    global _trim, _looked
    if not _looked:
        _looked = True
        try:
            _trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
        except OSError:
            _trim = None
    if _trim is None:
        return False
    _trim(0)
    return True


__all__ = ["release_free_heap"]
