"""`drkit.util.pages`: the page runs asked for, against a loop over rows; advice on memory maps only."""

import mmap

import numpy as np
import pytest

from drkit.util import pages
from drkit.util.pages import PAGE, advice_ranges, mapping_of, page_runs, will_need


def runs_by_loop(array, rows):
    """(start address, pages) of each run of consecutive pages the rows lie on, one row at a time."""
    addr, row_bytes = array.ctypes.data, array.itemsize * int(np.prod(array.shape[1:]))
    pages = set()
    for r in rows:
        first = (addr + r * row_bytes) // PAGE
        last = (addr + (r + 1) * row_bytes - 1) // PAGE
        pages.update(range(first, last + 1))
    runs = []
    for p in sorted(pages):
        if runs and runs[-1][0] + runs[-1][1] == p:
            runs[-1][1] += 1
        else:
            runs.append([p, 1])
    return [r[0] * PAGE for r in runs], [r[1] for r in runs]


@pytest.mark.parametrize("shape,dtype", [((50_000,), np.int32), ((3000, 256), np.float16), ((400, 1500), np.float32)])
def test_page_runs_match_a_loop(tmp_path, shape, dtype):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.standard_normal(shape).astype(dtype))
    array = np.load(tmp_path / "a.npy", mmap_mode="r")  # a 128-byte header: rows start off a page boundary
    for n in (1, 7, 300):
        rows = rng.choice(shape[0], n, replace=False)
        rows = np.concatenate([rows, [0, shape[0] - 1], rows[:3]])  # both ends, and repeats
        starts, counts = page_runs(array, rows)
        want_starts, want_counts = runs_by_loop(array, rows.tolist())
        assert starts.tolist() == want_starts and counts.tolist() == want_counts


def covered(offsets, lengths, lo, hi) -> bool:
    """Whether the bytes [lo, hi) lie inside the advised ranges (offset, length)."""
    return any(o <= lo and hi <= o + n for o, n in zip(offsets, lengths))


@pytest.mark.skipif(not hasattr(mmap.mmap, "madvise"), reason="no madvise here")
@pytest.mark.parametrize("rows_of_file", [2999, 3000])  # the file ends inside a page, or on its boundary
def test_advice_covers_each_row_within_the_mapping(tmp_path, rows_of_file):
    """The ranges advised hold every byte of every row asked for, at the row's place in the file (the
    mapping starts at the header's offset rounded down), and stay inside the mapping, for views too."""
    np.save(tmp_path / "v.npy", np.zeros((rows_of_file, 100), np.float32))
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")
    mapping = mapping_of(mapped)
    head = mapped.offset % mmap.ALLOCATIONGRANULARITY  # the .npy header, inside the mapping
    for shift, rows in ((0, np.array([0, 1, 2, 11, 1500, rows_of_file - 1])), (1000, np.array([0, 3, rows_of_file - 1001]))):
        offsets, lengths = advice_ranges(mapped[shift:], rows, mapping)
        assert (offsets >= 0).all() and (offsets % PAGE == 0).all() and (offsets + lengths <= len(mapping)).all()
        for r in rows + shift:
            assert covered(offsets, lengths, head + r * 400, head + (r + 1) * 400), (shift, r)


@pytest.mark.skipif(not hasattr(mmap.mmap, "madvise") or pages._mincore is None, reason="no madvise or mincore here")
def test_will_need_advises_memory_maps_only(tmp_path, monkeypatch):
    values = np.arange(299_900, dtype=np.float32).reshape(-1, 100)
    np.save(tmp_path / "v.npy", values)
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")
    assert isinstance(mapping_of(mapped), mmap.mmap) and isinstance(mapping_of(mapped[5:]), mmap.mmap)
    rows = np.array([0, 1, 2, 1500, 2998])  # the last row ends inside the file's last page
    assert float(np.asarray(mapped).sum()) == float(values.sum())  # every page read: in memory
    starts, _ = page_runs(mapped, rows)
    assert pages.resident(starts).all()
    assert will_need(mapped, rows) == 0  # a warm cache: nothing asked
    whole = mapping_of(mapped)  # the whole file in one call, as page by page
    origin = np.frombuffer(whole, dtype=np.uint8).ctypes.data
    assert pages.all_resident(whole) and pages.resident(origin + np.arange(-(-len(whole) // PAGE)) * PAGE).all()
    monkeypatch.setattr(pages, "resident", lambda addresses: np.zeros(len(addresses), bool))  # as if cold
    monkeypatch.setattr(pages, "missing_pages", lambda mapping: len(mapping) // PAGE)
    monkeypatch.setattr(pages, "_SEEN", {})  # forget that the mapping was found warm a moment ago
    assert will_need(mapped, rows) == len(starts) >= 2  # each run asked for
    view = rows[rows < 1998]
    assert will_need(mapped[1000:], view) == len(page_runs(mapped[1000:], view)[0]) >= 2  # a view of the map
    assert will_need(mapped, np.array([-5, 10**9])) == 0  # rows outside the map: no advice, no error
    np.testing.assert_array_equal(mapped[rows], values[rows])  # nothing read differs
    assert will_need(values, rows) == 0 and mapping_of(values) is None  # in memory: nothing to ask
    assert will_need(mapped[:, ::2], rows) == 0  # not contiguous: nothing to ask
    assert will_need(mapped, np.zeros(0, np.int64)) == 0


@pytest.mark.skipif(not hasattr(mmap.mmap, "madvise") or pages._mincore is None, reason="no madvise or mincore here")
def test_a_warm_mapping_is_looked_at_once_a_recheck(tmp_path, monkeypatch):
    np.save(tmp_path / "v.npy", np.arange(500_000, dtype=np.float32).reshape(-1, 50))
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")
    np.asarray(mapped).sum()  # every page read: in memory
    whole = mapping_of(mapped)
    n_pages = -(-len(whole) // PAGE)
    assert n_pages > 200 and pages.missing_pages(whole) == 0 and pages.all_resident(whole)
    looked, missing, clock = [], [0], [100.0]
    monkeypatch.setattr(pages, "_SEEN", {})
    monkeypatch.setattr(pages, "missing_pages", lambda mapping: looked.append(mapping) or missing[0])
    monkeypatch.setattr(pages, "resident", lambda addresses: np.zeros(len(addresses), bool))  # the sample: cold
    monkeypatch.setattr(pages.time, "monotonic", lambda: clock[0])
    rows = np.array([0, 7, 9999])
    assert [will_need(mapped, rows) for _ in range(3)] == [0, 0, 0] and len(looked) == 1  # looked at once
    clock[0] += pages.RECHECK / 2
    assert will_need(mapped[10:], rows) == 0 and len(looked) == 1  # a view of the same mapping: the same memo
    clock[0] += pages.RECHECK
    missing[0] = int(pages.WARM * n_pages)  # a few pages never read: still warm, nothing asked
    assert will_need(mapped, rows) == 0 and len(looked) == 2 and looked[-1] is whole
    clock[0] += pages.RECHECK
    missing[0] += 1  # more out of memory than WARM allows: advice, and the next read looks again
    assert will_need(mapped, rows) >= 1 and will_need(mapped, rows) >= 1 and len(looked) == 4
