"""Reading scattered rows of memory-mapped arrays without waiting for each page in turn.

A question reads a few thousand rows spread over files larger than memory (the mention vectors, EP).
Where those pages are not in the page cache, gathering them with fancy indexing faults one page at a
time: one disk read in flight, each waited for before the next is asked. `will_need` first tells the
kernel every page that is about to be read (``madvise(MADV_WILLNEED)`` on each run of consecutive
pages), so the reads are in flight together and the gather that follows finds them done or under way.
It changes no value read; on an array that is not a memory map, or where madvise is unavailable, it
does nothing.

Asking costs a system call a run (about 2 us), which a warm page cache does not need: at batch 64 that
is most of a hop's time. So `will_need` first looks (``mincore``) at the first pages of up to `SAMPLE` of
the rows, spread over them; when every one of those is in memory, it asks for nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap

import numpy as np

MADV_WILLNEED = getattr(mmap, "MADV_WILLNEED", 3)
PAGE = mmap.PAGESIZE
SAMPLE = 32  # rows looked at before asking: all in memory, nothing is asked


def _libc_mincore():
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).mincore
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    fn.restype = ctypes.c_int
    return fn


_mincore = _libc_mincore()


def resident(addresses) -> np.ndarray | None:
    """Whether each page at `addresses` (page-aligned, mapped) is in memory; None where mincore is unavailable
    or fails."""
    if _mincore is None:
        return None
    flag = ctypes.c_ubyte()
    out = np.zeros(len(addresses), dtype=bool)
    for i, a in enumerate(addresses):
        if _mincore(int(a), PAGE, ctypes.byref(flag)) != 0:
            return None
        out[i] = bool(flag.value & 1)
    return out


def mapping_of(array) -> mmap.mmap | None:
    """The `mmap.mmap` whose memory `array` (a numpy array or view of one) is, or None."""
    base = array
    while isinstance(base, np.ndarray):
        found = getattr(base, "_mmap", None)  # np.memmap and its views keep the mapping here
        if isinstance(found, mmap.mmap):
            return found
        base = base.base
    return base if isinstance(base, mmap.mmap) else None


def page_runs(array: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pages that rows `rows` of the C-contiguous `array` lie on, as runs of consecutive pages:
    (first page address, number of pages) of each run, ascending."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    row_bytes = int(array.strides[0]) if array.ndim else array.itemsize
    addr = int(array.ctypes.data)
    first = (addr + rows * row_bytes) // PAGE
    last = (addr + (rows + 1) * row_bytes - 1) // PAGE
    if np.array_equal(first, last):
        pages = np.unique(first)
    else:  # rows spanning several pages: every page of each
        from drkit.index.csr import concat_ranges

        pages = np.unique(concat_ranges(first, last - first + 1))
    breaks = np.flatnonzero(np.diff(pages) != 1) + 1
    starts = pages[np.r_[0, breaks]]
    counts = np.diff(np.r_[0, breaks, len(pages)])
    return starts * PAGE, counts


def will_need(array, rows) -> int:
    """Ask the kernel to start reading the pages of rows `rows` of `array` (a memory map) now; returns
    the number of runs of pages asked for (0 when `array` is not mapped, there is nothing to read, or the
    runs looked at are all in memory already)."""
    if not hasattr(mmap.mmap, "madvise") or not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        return 0
    mapping = mapping_of(array)
    if mapping is None or mapping.closed:
        return 0
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return 0
    sample = rows[np.linspace(0, len(rows) - 1, min(SAMPLE, len(rows))).astype(np.int64)]
    looked = resident(np.unique((int(array.ctypes.data) + sample * int(array.strides[0])) // PAGE) * PAGE)
    if looked is not None and looked.all():
        return 0
    starts, counts = page_runs(array, rows)
    origin = int(np.frombuffer(mapping, dtype=np.uint8).ctypes.data)  # the mapping's first byte
    advise = mapping.madvise
    for start, n in zip((starts - origin).tolist(), (counts * PAGE).tolist()):
        advise(MADV_WILLNEED, start, n)  # advice only: it changes no value read
    return len(starts)
