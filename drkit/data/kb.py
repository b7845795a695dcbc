"""KB and entity readers, and the entity table.

A KB file has one fact per line, ``subject|relation|object``. An entity list has one name per line.
Both are UTF-8 (`drkit.data.lines`); lines of only whitespace are skipped, and a line that cannot be
read is an `InputFormatError` naming the file, the line and, where one is at fault, the field.
Entity names are matched case-insensitively, so names that differ only in case (the MetaQA KB has
both ``Brian Cox`` the actor and ``brian cox`` the tag) are one entity with several aliases; its
display name is the alias seen most often.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from drkit.data.lines import read_lines
from drkit.data.text import fold
from drkit.errors import InputFormatError


@dataclass(frozen=True)
class Triple:
    subject: str
    relation: str
    object: str
    line: int


def read_kb(path: str | Path) -> Iterator[Triple]:
    """Yield the facts of a ``subject|relation|object`` file. Blank lines are allowed."""
    path = Path(path)
    for line_no, line in read_lines(path, "KB file"):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != 3:
            raise InputFormatError(
                path, line_no, f"expected 'subject|relation|object' (exactly two '|'), found {len(parts) - 1}: {line[:80]!r}"
            )
        for field, value in zip(("subject", "relation", "object"), parts):
            if not value.strip():
                raise InputFormatError(path, line_no, "empty", field=field)
        yield Triple(parts[0].strip(), parts[1].strip(), parts[2].strip(), line_no)


def read_entity_list(path: str | Path) -> Iterator[str]:
    """Yield the names of a one-name-per-line file. Blank lines are allowed."""
    for _, line in read_lines(path, "entity list"):
        name = line.strip()
        if name:
            yield name


class EntityTable:
    """Entities in id order. Each has a fold key (its linking key), a display name and aliases."""

    def __init__(self, names: list[str], aliases: list[list[str]]):
        self.names = names
        self.aliases = aliases
        self.keys = [fold(n) for n in names]
        self._id_by_key = {k: i for i, k in enumerate(self.keys)}

    @classmethod
    def from_names(cls, names: Iterable[str]) -> "EntityTable":
        """Group `names` (with repeats, which count as votes for the display name) by fold key.

        Ids follow the order in which each key is first seen.
        """
        votes: dict[str, str | Counter] = {}  # a key seen once keeps its name, not a Counter (millions of them)
        for name in names:
            name = " ".join(name.split())
            key = fold(name)
            seen = votes.get(key)
            if seen is None:
                votes[key] = name
            else:
                if isinstance(seen, str):
                    seen = votes[key] = Counter([seen])
                seen[name] += 1
        display, aliases = [], []
        for counter in votes.values():
            if isinstance(counter, str):
                display.append(counter)
                aliases.append([counter])
                continue
            ranked = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
            display.append(ranked[0][0])
            aliases.append(sorted(counter))
        return cls(display, aliases)

    def __len__(self) -> int:
        return len(self.names)

    def lookup(self, name: str) -> int | None:
        """The id of the entity whose name matches `name` case-insensitively, or None."""
        return self._id_by_key.get(fold(" ".join(name.split())))

    def to_records(self) -> list[dict]:
        return list(self.records())

    def records(self) -> Iterator[dict]:
        """``{"name", "aliases"}`` of each entity, in id order, one at a time (``entities.jsonl``'s rows)."""
        return ({"name": n, "aliases": a} for n, a in zip(self.names, self.aliases))

    @classmethod
    def from_records(cls, records: list[dict]) -> "EntityTable":
        return cls([r["name"] for r in records], [r["aliases"] for r in records])


def entities_from_kb(triples: Iterable[Triple]) -> EntityTable:
    """Every subject and object of the KB is an entity."""
    def names():
        for t in triples:
            yield t.subject
            yield t.object
    return EntityTable.from_names(names())
