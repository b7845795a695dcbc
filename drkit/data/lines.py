"""The lines of a UTF-8 text file, numbered, for every reader of drkit's input files.

A line ends at ``\\n``; a ``\\r`` before it (Windows line endings) is removed with it, so a line
number is the one ``grep -n`` or an editor shows. A byte-order mark at the start of the file is not
part of line 1. A line that is not valid UTF-8 is an `InputFormatError` naming the file, the line,
the column and the byte; a file that cannot be opened is a `ConfigError` naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from drkit.errors import ConfigError, InputFormatError

_BOM = "\ufeff"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def open_binary(path: str | Path, what: str = "input file"):
    """`path` opened for reading bytes; `ConfigError` naming it when it cannot be."""
    try:
        return open(path, "rb")
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None


def decode_line(raw: bytes, path: str | Path, line_no: int) -> str:
    """`raw` (one line with its ending) decoded as UTF-8, without its ending; see the module docstring."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        column = len(raw[: exc.start].decode("utf-8", errors="replace")) + 1
        message = f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {column} ({exc.reason})"
        if line_no == 1 and raw.startswith(_UTF16_BOMS):
            message += "; the file looks like UTF-16: save it as UTF-8"
        raise InputFormatError(path, line_no, message) from None
    if text.endswith("\n"):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    if line_no == 1 and text.startswith(_BOM):
        text = text[1:]
    return text


def read_lines(path: str | Path, what: str = "input file") -> Iterator[tuple[int, str]]:
    """``(line number from 1, text without its line ending)`` for every line of `path`, blank ones too."""
    with open_binary(path, what) as f:
        for line_no, raw in enumerate(f, 1):
            yield line_no, decode_line(raw, path, line_no)
