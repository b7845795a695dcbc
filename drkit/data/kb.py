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
from typing import Iterable, Iterator, Sequence

from drkit.data.lines import read_lines
from drkit.data.text import fold, nfc
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
        yield Triple(nfc(parts[0].strip()), nfc(parts[1].strip()), nfc(parts[2].strip()), line_no)


def kb_question(subject: str, relation: str) -> str:
    """The templated single-hop question of a fact: "What is the {relation} of {subject}?"."""
    return f"What is the {relation} of {subject}?"


def chain_question(subject: str, first: str, second: str) -> str:
    """The templated two-hop question of a chain (subject, first, x), (x, second, y), whose answer is y:
    "What is the {second} of the {first} of {subject}?"."""
    return f"What is the {second} of the {first} of {subject}?"


def in_turn(queues: Sequence[list], n: int) -> list:
    """At most `n` items taken from each queue in turn (the first of each, then the second of each, ...), so
    that a long queue does not crowd out a short one."""
    queues = [list(q) for q in queues]
    picked: list = []
    depth = 0
    while len(picked) < n and any(depth < len(q) for q in queues):
        picked.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return picked[:n]


def read_entity_list(path: str | Path) -> Iterator[str]:
    """Yield the names of a one-name-per-line file. Blank lines are allowed."""
    for _, line in read_lines(path, "entity list"):
        name = nfc(line.strip())
        if name:
            yield name


def name_key(name: str) -> str:
    """The linking key of a name: its words joined by one space, in composed form, case-folded
    (`drkit.data.text.fold`)."""
    return fold(nfc(" ".join(name.split())))


class EntityTable:
    """Entities in id order. Each has a fold key (its linking key), a display name and aliases, and where a
    recogniser found it, a kind (its label: "PERSON", "GPE", "DATE", ...; `kinds` is None when no entity has one,
    whatever was given)."""

    def __init__(self, names: list[str], aliases: list[list[str]], kinds: list[str | None] | None = None):
        self.names = names
        self.aliases = aliases
        self.kinds = kinds if kinds is not None and any(k is not None for k in kinds) else None
        self.keys = [fold(nfc(n)) for n in names]
        self._id_by_key = {k: i for i, k in enumerate(self.keys)}
        # (folded form, entity id) of each alias that folds to something else than its entity's key
        self._alias_keys = [(k, i) for i, forms in enumerate(aliases) if len(forms) > 1 or (forms and forms[0] != names[i])
                            for k in dict.fromkeys(name_key(f) for f in forms) if k != self.keys[i]]
        for k, i in self._alias_keys:  # another written form of an entity (a date's) finds it too
            self._id_by_key.setdefault(k, i)

    @classmethod
    def from_names(cls, names: Iterable[str]) -> "EntityTable":
        """Group `names` (with repeats, which count as votes for the display name) by fold key.

        Ids follow the order in which each key is first seen.
        """
        votes: dict[str, str | Counter] = {}  # a key seen once keeps its name, not a Counter (millions of them)
        for name in names:
            name = nfc(" ".join(name.split()))
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

    def with_aliases(self, aliases: dict[str, set[str]]) -> "EntityTable":
        """This table with other written forms of some entities (name -> forms, e.g. "12 December 1915" ->
        {"December 12, 1915"}), which the linker and `lookup` then find as that entity. A form that is another
        entity's name is left to that entity; a name not in the table is passed over."""
        if not aliases:
            return self
        merged = [list(a) for a in self.aliases]
        for name, forms in aliases.items():
            i = self.lookup(name)
            if i is None:
                continue
            for form in sorted(forms):
                form = " ".join(form.split())
                if self.lookup(form) is None and form not in merged[i]:
                    merged[i].append(form)
        return EntityTable(self.names, merged, self.kinds)

    def with_kinds(self, kinds: dict[str, str]) -> "EntityTable":
        """This table with the kind of each entity that `kinds` (name or alias -> kind) names; an entity named
        twice keeps the first kind given."""
        if not kinds:
            return self
        out = self.kinds_or_none()
        for name, kind in kinds.items():
            i = self.lookup(name)
            if i is not None and out[i] is None:
                out[i] = kind
        return EntityTable(self.names, self.aliases, out)

    def subset(self, ids: Sequence[int]) -> "EntityTable":
        """The entities `ids`, in that order (their ids become 0, 1, ...)."""
        kinds = self.kinds_or_none()
        return EntityTable([self.names[i] for i in ids], [self.aliases[i] for i in ids], [kinds[i] for i in ids])

    @classmethod
    def concat(cls, tables: Sequence["EntityTable"]) -> "EntityTable":
        """The entities of `tables`, one table after the other (each one's ids shifted by those before it)."""
        return cls([n for t in tables for n in t.names], [a for t in tables for a in t.aliases],
                   [k for t in tables for k in t.kinds_or_none()])

    def kinds_or_none(self) -> list[str | None]:
        """Each entity's kind, None where it has none (a list even when the table has no kinds)."""
        return list(self.kinds) if self.kinds is not None else [None] * len(self)

    def alias_keys(self) -> list[tuple[str, int]]:
        """(folded form, entity id) of each alias that folds to something else than its entity's key: what the
        linker finds besides the keys."""
        return self._alias_keys

    def case_variants(self) -> list[list[str]]:
        """The names of each entity that holds several equal but for case (other forms, such as a date's, left out)."""
        out = []
        for k, forms in zip(self.keys, self.aliases):
            if len(forms) > 1:
                same = [f for f in forms if name_key(f) == k]
                if len(same) > 1:
                    out.append(same)
        return out

    def __len__(self) -> int:
        return len(self.names)

    def lookup(self, name: str) -> int | None:
        """The id of the entity whose name or alias matches `name` case-insensitively, or None."""
        return self._id_by_key.get(name_key(name))

    def to_records(self) -> list[dict]:
        return list(self.records())

    def records(self) -> Iterator[dict]:
        """``{"name", "aliases"}`` of each entity, and ``"kind"`` where it has one, in id order, one at a time
        (``entities.jsonl``'s rows)."""
        return ({"name": n, "aliases": a, **({"kind": k} if k is not None else {})}
                for n, a, k in zip(self.names, self.aliases, self.kinds_or_none()))

    @classmethod
    def from_records(cls, records: list[dict]) -> "EntityTable":
        return cls([r["name"] for r in records], [r["aliases"] for r in records], [r.get("kind") for r in records])


def entities_from_kb(triples: Iterable[Triple]) -> EntityTable:
    """Every subject and object of the KB is an entity."""
    def names():
        for t in triples:
            yield t.subject
            yield t.object
    return EntityTable.from_names(names())
