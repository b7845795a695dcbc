"""Counted warnings: problems in the input that do not stop a build, each counted and shown."""

from __future__ import annotations

from collections import OrderedDict


class WarningLog:
    """Counts warnings by kind and keeps the first few messages of each kind as examples."""

    def __init__(self, max_examples: int = 5):
        self.max_examples = max_examples
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._examples: dict[str, list[str]] = {}

    def add(self, kind: str, message: str, count: int = 1) -> None:
        self._counts[kind] = self._counts.get(kind, 0) + count
        examples = self._examples.setdefault(kind, [])
        if len(examples) < self.max_examples:
            examples.append(message)

    def merge(self, other: "WarningLog | dict") -> None:
        """Add `other`'s counts and examples (a `WarningLog` or its `to_dict`), as if its warnings came next."""
        items = other.to_dict() if isinstance(other, WarningLog) else other
        for kind, entry in items.items():
            self._counts[kind] = self._counts.get(kind, 0) + int(entry["count"])
            examples = self._examples.setdefault(kind, [])
            examples.extend(entry["examples"][: max(0, self.max_examples - len(examples))])

    def count(self, kind: str) -> int:
        return self._counts.get(kind, 0)

    def __len__(self) -> int:
        return sum(self._counts.values())

    def to_dict(self) -> dict:
        return {k: {"count": n, "examples": self._examples[k]} for k, n in self._counts.items()}

    def lines(self) -> list[str]:
        out = []
        for kind, n in self._counts.items():
            out.append(f"warning: {n} x {kind}, e.g. {self._examples[kind][0]}")
        return out
