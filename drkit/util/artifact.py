"""Self-describing artifact directories.

An artifact is a directory holding ``manifest.json`` (format name and version, the config that
built it, input checksums, counts, drkit version, command line) next to ``.npy`` arrays and JSON
or JSONL files; never a pickle. It is written into a temporary sibling directory and renamed into
place only when complete, so a crash never leaves a half-written artifact under the final name.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as _dt
import errno
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from drkit import __version__
from drkit.errors import ArtifactError

MANIFEST = "manifest.json"


def path_record(target: str | Path, folder: str | Path, key: str) -> dict:
    """Where `target` is, as an artifact at `folder` records it: an absolute ``path`` (a relative one would be read
    against whatever folder a later command runs in) and, under `key`, the path from `folder`, so that a tree of
    runs moved or copied as a whole still finds it (`recorded_places`)."""
    target = Path(target).resolve()
    return {"path": str(target), key: os.path.relpath(target, Path(folder).resolve())}


def recorded_places(record: dict, folder: str | Path, key: str) -> list[Path]:
    """The places a `path_record` made at `folder` names, in order: its ``path``, then its path from `folder` (a
    record made before `key` existed names only the first)."""
    return [Path(record["path"])] + ([Path(folder) / record[key]] if record.get(key) else [])


def file_checksum(path: str | Path) -> dict:
    """``{"path", "bytes", "sha256"}`` of an input file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return {"path": str(path), "bytes": os.path.getsize(path), "sha256": h.hexdigest()}


def _rename_exchange(a: Path, b: Path) -> bool:
    """Exchange the paths `a` and `b` in one step (Linux renameat2 with RENAME_EXCHANGE); False where the system
    cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EXDEV):  # an old kernel, a file system without
        return False                                                      # it, or overlayfs's lower layer
    raise OSError(code, f"cannot exchange {a} and {b}: {os.strerror(code)}")


def swap_in(new: str | Path, out: str | Path) -> None:
    """Put the folder `new` at `out`. When `out` exists, the two are exchanged in one atomic rename (then the old
    one, now at `new`, is deleted): a reader, or a crash at any point, finds at `out` the old artifact or the
    new one, whole, never neither. Without an atomic exchange (not Linux), the old one is renamed aside first
    (``.NAME.old-PID`` beside it, where a crash between the two renames would leave it); where a folder cannot
    be renamed at all (a container image's lower layer), it is deleted first. A crash after the exchange leaves
    the old artifact at `new` (a ``.NAME.tmp-*`` folder beside it), to be deleted by hand."""
    new, out = Path(new), Path(out)
    if not out.exists():
        os.replace(new, out)
        return
    if _rename_exchange(new, out):
        shutil.rmtree(new)
        return
    aside = out.with_name(f".{out.name}.old-{os.getpid()}")
    try:
        os.replace(out, aside)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        shutil.rmtree(out)  # a folder that cannot be renamed (overlayfs's lower layer): deleted first, as before
        os.replace(new, out)
        return
    os.replace(new, out)
    shutil.rmtree(aside)


class ArtifactWriter:
    """Write an artifact atomically::

        with ArtifactWriter(out, "drkit.sparse_index", 1, overwrite=False) as w:
            w.save_array("A_indptr", indptr)
            w.manifest.update(config=..., counts=...)
    """

    def __init__(self, out: str | Path, format_name: str, format_version: int, overwrite: bool = False,
                 work_dir: str | Path | None = None):
        """`work_dir`: write into this directory (made if missing) instead of a fresh temporary one, and keep
        it when the block fails, so that a long build can resume from what it wrote there."""
        self.out = Path(out)
        self.work_dir = Path(work_dir) if work_dir is not None else None
        if self.out.exists() and not overwrite:
            raise ArtifactError(f"{self.out} already exists; choose another --out or pass --overwrite")
        self.manifest: dict[str, Any] = {
            "format": format_name,
            "format_version": format_version,
            "drkit_version": __version__,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
        }
        self.files: dict[str, dict] = {}
        self.tmp: Path | None = None
        self.reused = False  # whether the last `open_array` found its file there (a resumed build)

    def __enter__(self) -> "ArtifactWriter":
        self.out.parent.mkdir(parents=True, exist_ok=True)
        if self.work_dir is not None:
            self.work_dir.mkdir(parents=True, exist_ok=True)
            self.tmp = self.work_dir
        else:
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.tmp-", dir=self.out.parent))
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        assert self.tmp is not None
        if exc_type is not None:
            if self.work_dir is None:
                shutil.rmtree(self.tmp, ignore_errors=True)
            return
        self.manifest["files"] = self.files
        self.write_json(MANIFEST, self.manifest)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.tmp, 0o777 & ~umask)  # mkdtemp makes it 0700
        for root, dirs, files in os.walk(self.tmp):  # some writers (safetensors) make files 0600
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o777 & ~umask)
            for f in files:
                os.chmod(os.path.join(root, f), 0o666 & ~umask)
        swap_in(self.tmp, self.out)

    def path(self, name: str) -> Path:
        assert self.tmp is not None, "use ArtifactWriter as a context manager"
        return self.tmp / name

    def save_array(self, name: str, array: np.ndarray, note: str = "") -> None:
        array = np.ascontiguousarray(array)
        np.save(self.path(f"{name}.npy"), array, allow_pickle=False)
        self.files[f"{name}.npy"] = {"dtype": str(array.dtype), "shape": list(array.shape), "note": note}

    def open_array(self, name: str, shape: tuple[int, ...], dtype, note: str = "") -> np.memmap:
        """A ``.npy`` file of `shape` and `dtype` opened for writing in place (memory-mapped), so that an array
        larger than memory is written as it is computed; one already there with that shape and dtype (a
        resumed build) is opened as it is."""
        file = self.path(f"{name}.npy")
        reuse = False
        if file.exists():
            try:
                old = np.load(file, mmap_mode="r", allow_pickle=False)
                reuse = old.shape == tuple(shape) and old.dtype == np.dtype(dtype)
                del old
            except (ValueError, EOFError, OSError):
                reuse = False
        self.reused = reuse
        array = np.lib.format.open_memmap(file, mode="r+" if reuse else "w+", dtype=dtype, shape=tuple(shape))
        self.files[f"{name}.npy"] = {"dtype": str(np.dtype(dtype)), "shape": list(shape), "note": note}
        return array

    def write_json(self, name: str, obj: Any) -> None:
        with open(self.path(name), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, ensure_ascii=False)
            f.write("\n")

    def write_jsonl(self, name: str, rows, note: str = "") -> None:
        with self.jsonl(name, note) as add:
            for row in rows:
                add(row)

    @contextlib.contextmanager
    def jsonl(self, name: str, note: str = ""):
        """A JSONL file written a row at a time: ``with w.jsonl(name) as add: add(row)``."""
        n = 0
        with open(self.path(name), "w", encoding="utf-8") as f:
            def add(row) -> None:
                nonlocal n
                f.write(json.dumps(row, ensure_ascii=False))
                f.write("\n")
                n += 1

            yield add
        self.files[name] = {"rows": n, "note": note}


def read_manifest(path: str | Path, format_name: str, max_version: int) -> dict:
    """Read and check ``manifest.json``: right format, a version this drkit can read."""
    path = Path(path)
    manifest_path = path / MANIFEST
    if not path.is_dir():
        raise ArtifactError(f"{path} is not a directory (expected a {format_name} artifact)")
    if not manifest_path.exists():
        raise ArtifactError(f"{path} has no {MANIFEST}; " + _artifacts_below(path, format_name))
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{manifest_path} is not valid JSON: {exc}") from None
    found = manifest.get("format")
    if found != format_name:
        raise ArtifactError(f"{path} holds a {found!r} artifact, not a {format_name!r}")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise ArtifactError(f"{manifest_path}: invalid format_version {version!r}")
    if version > max_version:
        raise ArtifactError(
            f"{path} has {format_name} format version {version}, written by drkit "
            f"{manifest.get('drkit_version', '?')}; this drkit ({__version__}) reads up to version {max_version}. "
            "Upgrade drkit or rebuild the artifact."
        )
    return manifest


def _artifacts_below(path: Path, format_name: str) -> str:
    """What a folder without a manifest holds, for the error: the artifacts one or two levels down (a run folder's
    model, a reproduction's steps), the wanted kind first, or that it is not an artifact."""
    found = []
    for manifest_path in sorted(path.glob(f"*/{MANIFEST}")) + sorted(path.glob(f"*/*/{MANIFEST}")):
        try:
            kind = json.loads(manifest_path.read_text(encoding="utf-8")).get("format")
        except (OSError, ValueError, AttributeError):
            continue
        found.append((kind != format_name, str(manifest_path.parent), kind))
    wanted = [where for other, where, _ in sorted(found) if not other]
    if wanted:
        return f"the {format_name!r} artifact it holds is {' or '.join(wanted[:3])}: pass that"
    if found:
        listed = ", ".join(f"{where} (a {kind!r})" for _, where, kind in found[:4])
        return f"it holds {listed}{' and more' if len(found) > 4 else ''}, not a {format_name!r} artifact"
    return "it is not a drkit artifact or its build did not finish"


def load_array(path: str | Path, name: str, mmap: bool = True) -> np.ndarray:
    """The array `name`.npy of an artifact, memory-mapped read-only unless `mmap` is False. A mapped array is
    returned as a plain ndarray view of the np.memmap (the mapping stays open while the view lives;
    `drkit.util.pages.mapping_of` finds it): np.memmap runs Python code on every index and every result it makes
    (about 25 us each, dozens a question at batch 1), an ndarray view none."""
    file = Path(path) / f"{name}.npy"
    if not file.exists():
        raise ArtifactError(f"{file} is missing; the artifact is incomplete")
    array = np.load(file, mmap_mode="r" if mmap else None, allow_pickle=False)
    return np.asarray(array) if mmap else array


def read_jsonl(path: str | Path, name: str) -> list:
    file = Path(path) / name
    if not file.exists():
        raise ArtifactError(f"{file} is missing; the artifact is incomplete")
    with open(file, encoding="utf-8") as f:
        return [json.loads(line) for line in f]
