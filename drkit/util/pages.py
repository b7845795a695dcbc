"""Reading scattered rows of memory-mapped arrays without waiting for each page in turn.

A question reads a few thousand rows spread over files larger than memory (the mention vectors, EP).
Where those pages are not in the page cache, gathering them with fancy indexing faults one page at a
time: one disk read in flight, each waited for before the next is asked. `will_need` first tells the
kernel every page that is about to be read (``madvise(MADV_WILLNEED)`` on each run of consecutive
pages), so the reads are in flight together and the gather that follows finds them done or under way.
It changes no value read; on an array that is not a memory map, or where madvise is unavailable, it
does nothing.
"""

from __future__ import annotations

import mmap

import numpy as np

MADV_WILLNEED = getattr(mmap, "MADV_WILLNEED", 3)
PAGE = mmap.PAGESIZE


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
    the number of runs of pages asked for (0 when `array` is not mapped or there is nothing to read)."""
    if not hasattr(mmap.mmap, "madvise") or not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        return 0
    mapping = mapping_of(array)
    if mapping is None or mapping.closed:
        return 0
    starts, counts = page_runs(array, rows)
    origin = int(np.frombuffer(mapping, dtype=np.uint8).ctypes.data)  # the mapping's first byte
    advise = mapping.madvise
    for start, n in zip((starts - origin).tolist(), (counts * PAGE).tolist()):
        advise(MADV_WILLNEED, start, n)  # advice only: it changes no value read
    return len(starts)
