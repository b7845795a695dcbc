"""The entity answer's preference for the kind of entity a question asks for (`drkit.data.asked`: "when" a
date, "where" a place, "who" a person, ...), where the index knows its entities' kinds (`drkit index --entities
ner` gives each entity it recognised the recogniser's label: `drkit.index.ner`).

Among the last hop's best entities the question does not name (`KIND_POOL` of them), those that may be of
the kind asked for (of that kind, or of no known kind: a title the recogniser did not label) keep the hops'
order ahead of those known to be of another kind; where none may be, or the index has no kinds (titles
alone), the order is the hops'.
"""

from __future__ import annotations

from typing import Sequence

KIND_POOL = 50  # the last hop's best entities among which one of the kind asked for is looked for


def kinds_lost(index) -> bool:
    """Whether `index` (a `drkit.index.sparse.SparseIndex`) recognised its entities (``--entities ner``) but holds
    no kinds for them: built before `drkit index` recorded them, so the answer's kind filter has nothing to use
    until the index is built again."""
    entities = (index.manifest.get("inputs") or {}).get("entities") or []
    return index.entities.kinds is None and "ner" in map(str, entities)


def prefer_kinds(found: Sequence[tuple[int, float]], kinds: Sequence[str | None] | None,
                 asked: frozenset | None) -> list[tuple[int, float]]:
    """`found` ((entity id, probability), best first) with the entities that may be of a kind in `asked` (of
    it, or of no known kind) first, each part in its own order; `found` as it is when nothing is asked for."""
    if kinds is None or asked is None:
        return list(found)
    may = [kinds[e] is None or kinds[e] in asked for e, _ in found]
    return [f for f, m in zip(found, may) if m] + [f for f, m in zip(found, may) if not m]
