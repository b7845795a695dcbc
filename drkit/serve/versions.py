"""Which version of the index and model a server has on disk and serves (`drkit.serve.engine.Engine`'s live
updates): the index's CURRENT version and each artifact folder's manifest stamp."""

from __future__ import annotations

from pathlib import Path


def index_version(index_dir: str | Path) -> int:
    """The version named by ``INDEX/CURRENT`` (0 for an index never added to or removed from)."""
    from drkit.index.live import read_state

    return int(read_state(index_dir)["version"])


def on_disk(*folders: str | Path) -> tuple:
    """What identifies the artifacts in `folders` as they are on disk now: each manifest's inode and time (an
    ``--overwrite`` swaps a new folder in, with a new manifest), and first the index's CURRENT version."""
    return (index_version(folders[0]), *manifest_stamps(*folders))


def manifest_stamps(*folders: str | Path) -> tuple:
    """Each folder's manifest inode and time (None where it has none)."""
    out = []
    for folder in folders:
        try:
            st = (Path(folder) / "manifest.json").stat()
            out.append((st.st_ino, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def served_version(kit, fallback: int) -> int:
    """The version of the index `kit` (a `drkit.qa.pipeline.DrKIT`) loaded: its live view's (read when it was
    loaded), else `fallback`."""
    live = kit.vkb.index.live
    return int(live.version) if live is not None else fallback
