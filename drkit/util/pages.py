"""Reading scattered rows of memory-mapped arrays without waiting for each page in turn.

A question reads a few thousand rows spread over files larger than memory (the mention vectors, EP).
Where those pages are not in the page cache, gathering them with fancy indexing faults one page at a
time: one disk read in flight, each waited for before the next is asked. `will_need` first tells the
kernel every page that is about to be read (``madvise(MADV_WILLNEED)`` on each run of consecutive
pages), so the reads are in flight together and the gather that follows finds them done or under way.

It is advice only: it changes no value read and never raises. It does nothing for an array that is not a
C-contiguous memory map, where madvise is unavailable (Windows), or where the kernel refuses the advice.

Asking costs a system call a run (about 2 us), which a warm page cache does not need: at batch 64 that
is most of a hop's time. So `will_need` first looks (``mincore``): at the whole mapping in one call when it
is at most `WHOLE` pages, then at the first pages of up to `SAMPLE` of the rows, spread over them; when every
page looked at is in memory, it asks for nothing (the whole mapping in memory implies the sample is). A cache that is
warm at those pages but not at others is then read as without advice: one fault at a time, as fast as
before. A whole mapping is warm when at most `WARM` (1%) of its pages are out of memory: a process that has read
most of a file does not advise on its last few pages at every read (2Wiki's mention vectors stay 3 pages short of
whole, never read), which fault in as without advice when a row needs them. Looking at a whole mapping costs about
40 ns a page (0.5 ms for those 45 MB), which a question at batch 1 would pay at each of its seven reads: a mapping
found warm is taken as warm for `RECHECK` seconds (`_seen_warm`), so a stream of questions looks once in that
time; pages evicted within it are read as without advice.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import time

import numpy as np

MADV_WILLNEED = getattr(mmap, "MADV_WILLNEED", 3)
PAGE = mmap.PAGESIZE
SAMPLE = 32  # rows looked at before asking: all on pages in memory, nothing is asked


def _libc_mincore():
    if os.name != "posix":
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).mincore  # libc, already loaded in this process
    except Exception:  # no such symbol, or no C library to load: the advice is then always given
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


WHOLE = 1 << 16  # pages: a mapping of up to 256 MiB (4 KiB pages) is first looked at whole, in one call


def missing_pages(mapping: mmap.mmap) -> int | None:
    """How many pages of `mapping` are not in memory, by one mincore call (None where it cannot tell)."""
    if _mincore is None or len(mapping) == 0:
        return None
    flags = np.zeros(-(-len(mapping) // PAGE), dtype=np.uint8)
    if _mincore(_origin(mapping), len(mapping), flags.ctypes.data) != 0:
        return None
    return int(len(flags) - np.count_nonzero(flags & 1))


def all_resident(mapping: mmap.mmap) -> bool:
    """Whether every page of `mapping` is in memory, by one mincore call (False where it cannot tell)."""
    return missing_pages(mapping) == 0


RECHECK = 1.0  # seconds a mapping found warm is taken as still warm
WARM = 0.01  # a mapping with at most this share of its pages out of memory is warm (read as without advice)
_SEEN: dict[tuple[int, int, int], float] = {}  # (id, first address, length) of a mapping -> when last found warm


def _seen_warm(mapping: mmap.mmap) -> bool:
    """Whether at most `WARM` of `mapping`'s pages are out of memory, by `missing_pages`; once found so, taken as
    still so for `RECHECK` seconds without looking."""
    key, now = (id(mapping), _origin(mapping), len(mapping)), time.monotonic()
    seen = _SEEN.get(key)
    if seen is not None and now - seen < RECHECK:
        return True
    missing = missing_pages(mapping)
    if missing is None or missing > WARM * -(-len(mapping) // PAGE):
        _SEEN.pop(key, None)
        return False
    if len(_SEEN) >= 1024:  # mappings come and go (a test's temporary files): keep the memo small
        _SEEN.clear()
    _SEEN[key] = now
    return True


def _origin(mapping: mmap.mmap) -> int:
    """The address of `mapping`'s first byte (page-aligned)."""
    return int(np.frombuffer(mapping, dtype=np.uint8).ctypes.data)


def mapping_of(array) -> mmap.mmap | None:
    """The `mmap.mmap` whose memory `array` (a numpy array or view of one) is, or None."""
    base = array
    while isinstance(base, np.ndarray):
        found = getattr(base, "_mmap", None)  # np.memmap and its views keep the mapping here
        if isinstance(found, mmap.mmap):
            return found
        base = base.base
    return base if isinstance(base, mmap.mmap) else None


def row_bytes(array: np.ndarray) -> int:
    """Bytes a row of a C-contiguous array (its strides[0] may be anything when it has one row)."""
    return array.itemsize * math.prod(array.shape[1:])


def _page_numbers(array: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The numbers (address // PAGE) of the first and last page of each of rows `rows` of `array`."""
    size, addr = row_bytes(array), int(array.ctypes.data)
    return (addr + rows * size) // PAGE, (addr + (rows + 1) * size - 1) // PAGE


def page_runs(array: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pages that rows `rows` of the C-contiguous `array` lie on, as runs of consecutive pages:
    (first page address, number of pages) of each run, ascending."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    first, last = _page_numbers(array, rows)
    if np.array_equal(first, last):
        pages = np.unique(first)
    else:  # rows spanning several pages: every page of each, the ranges [first, last] one after another
        n = last - first + 1
        pages = np.unique(np.arange(int(n.sum()), dtype=np.int64) + np.repeat(first - (np.cumsum(n) - n), n))
    breaks = np.flatnonzero(np.diff(pages) != 1) + 1
    starts = pages[np.r_[0, breaks]]
    counts = np.diff(np.r_[0, breaks, len(pages)])
    return starts * PAGE, counts


def advice_ranges(array: np.ndarray, rows: np.ndarray, mapping: mmap.mmap) -> tuple[np.ndarray, np.ndarray]:
    """`page_runs` as (offset in `mapping`, bytes) pairs, kept within the mapping."""
    starts, counts = page_runs(array, rows)
    offsets = starts - _origin(mapping)
    ends = np.minimum(offsets + counts * PAGE, len(mapping))
    keep = (offsets >= 0) & (offsets < ends)
    return offsets[keep], (ends - offsets)[keep]


def will_need(array, rows) -> int:
    """Ask the kernel to start reading the pages of rows `rows` (ids in ``[0, len(array))``) of `array`, a
    memory map, now. Returns the number of runs of pages asked for: 0 when `array` is not a C-contiguous
    memory map, there is nothing to read, a mapping of at most `WHOLE` pages is warm (at most `WARM` of its pages
    out of memory, looked at once a `RECHECK`: rows on those pages then fault in as without advice), the sampled
    rows' pages are all in memory already, or the advice could not be given."""
    if not hasattr(mmap.mmap, "madvise") or not isinstance(array, np.ndarray) or array.ndim == 0 \
            or not array.flags.c_contiguous:
        return 0
    mapping = mapping_of(array)
    if mapping is None or mapping.closed:
        return 0
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return 0
    if len(mapping) <= WHOLE * PAGE and _seen_warm(mapping):  # a small file in memory: one call says so
        return 0
    sample = rows[np.linspace(0, len(rows) - 1, min(SAMPLE, len(rows))).astype(np.int64)]
    looked = resident(np.unique(_page_numbers(array, sample)[0]) * PAGE)
    if looked is not None and looked.all():
        return 0
    offsets, lengths = advice_ranges(array, rows, mapping)
    advise = mapping.madvise
    try:
        for offset, n in zip(offsets.tolist(), lengths.tolist()):
            advise(MADV_WILLNEED, offset, n)
    except (ValueError, OSError):  # refused: the gather reads the pages as it would have anyway
        return 0
    return len(offsets)


def drop_from_page_cache(*folders) -> None:
    """Drop the pages of every file under `folders` from the page cache (``posix_fadvise(DONTNEED)``), but for
    those a process has mapped: what a cold start finds. For benchmarks; POSIX only."""
    for folder in folders:
        for parent, _, names in os.walk(folder):
            for name in names:
                fd = os.open(os.path.join(parent, name), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
