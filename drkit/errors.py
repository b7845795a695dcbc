"""Typed errors. Each says what was wrong and where (file, line, field)."""

from __future__ import annotations

from pathlib import Path


class DrkitError(Exception):
    """Base class of every error drkit raises on purpose."""


class InputFormatError(DrkitError):
    """A line of an input file does not have the expected format.

    The message names the file, the 1-based line number and, where it applies, the field.
    """

    def __init__(self, path: str | Path, line: int | None, message: str, field: str | None = None):
        self.path = str(path)
        self.line = line
        self.field = field
        self.reason = message
        where = self.path if line is None else f"{self.path}:{line}"
        if field is not None:
            where += f" (field {field!r})"
        super().__init__(f"{where}: {message}")


class ArtifactError(DrkitError):
    """An artifact directory is missing, incomplete, of another kind or of an unsupported version."""


class ConfigError(DrkitError):
    """A setting has a value that cannot be used."""


class QuestionError(DrkitError):
    """A question that cannot be answered as given (no entity found, unknown entity, empty)."""
