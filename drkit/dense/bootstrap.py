"""More facts for pretraining, found in the corpus by patterns that the KB's own facts teach (bootstrapping).

The paper pretrains the mention encoder on Wikidata facts over the whole corpus (2.3); a user's KB, like 2Wiki's
``kb.txt`` of a training split, may hold a few hundred. Those facts teach how the corpus writes each relation,
and that is used to find more of the same relation, the way DIPRE and Snowball bootstrap (Brin 1998; Agichtein
and Gravano 2000):

* **Where a pattern is learned.** A passage whose title entity is the subject of some KB fact. Each mention of
  another entity there gives one candidate per length n = 1..``context``: the n words before the mention
  (lower case; a word is a run of letters and digits or one other character) and the mention's entity kind
  (the recogniser's label, or none for an entity with a page and no label).
* **How it is scored.** For each relation R the subject has facts of, a candidate is *right* when the mention's
  entity is an object of (subject, R) in the KB and *wrong* otherwise (the KB is taken as complete for the
  relations it gives a subject: the local closed world). A pattern (R, words, kind) is kept when it is right
  at least ``min_support`` times and its precision, right / (right + wrong), is at least ``min_precision``.
* **What it finds.** Every passage with a title entity (but those of ``skip_articles``) is read again; a
  mention whose candidate matches a kept pattern of R gives the fact (title entity, R, mention's entity).

The facts are written after the KB's own, as one KB file (``subject|relation|object``) that `drkit pretrain`
reads as it reads any KB; the entities' display names are written, and a fact whose names do not name the same
entities again (a ``|`` in a name, or two pages whose titles differ only in case) is counted and left out. Only
title-entity corpora (each passage about its title's entity, as 2Wiki's) have subjects to find facts of.

``skip_articles`` is for scoring honestly: ``drkit reproduce-2wiki`` finds no fact in the dev questions' gold
passages, so that no fact of a question it scores comes from the pages that answer it (the KB already
holds only the train split's evidence).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from drkit.data.kb import Triple, read_kb
from drkit.data.lines import read_lines
from drkit.errors import ConfigError, InputFormatError
from drkit.index.sparse import SparseIndex

WORD = re.compile(r"\w+|[^\w\s]")
LOOK_BACK = 80  # characters before a mention searched for its `context` words


@dataclass(frozen=True)
class BootstrapConfig:
    """Which patterns the KB's facts teach are kept."""

    context: int = field(default=3, metadata={"help": "at most this many words before a mention make a pattern"})
    min_support: int = field(default=3, metadata={"help": "a pattern is kept when it finds at least this many of "
                                                           "the KB's own facts"})
    min_precision: float = field(default=0.7, metadata={"help": "... and at least this share of what it finds in "
                                                                 "the KB subjects' passages is a KB fact"})

    def __post_init__(self):
        if self.context < 1 or self.min_support < 1:
            raise ConfigError("context and min_support must be at least 1")
        if not 0 < self.min_precision <= 1:
            raise ConfigError(f"min_precision must be in (0, 1], got {self.min_precision}")


@dataclass(frozen=True)
class Pattern:
    relation: str
    words: tuple  # the words before the object's mention, lower case
    kind: str | None  # the object entity's kind (None: an entity without one)
    right: int
    wrong: int

    @property
    def precision(self) -> float:
        return self.right / (self.right + self.wrong)


def _candidates(index: SparseIndex, passage: int, kinds: list, context: int) -> Iterator[tuple[int, int, tuple]]:
    """``(subject, object, (words, kind))`` for each mention of `passage` of an entity other than its title
    entity, for each length of words 1..`context` the text before it has."""
    subject = int(index.passage_entity[passage])
    text = index.passage_text(passage)
    lo, hi = index.passage_mention_indptr[passage], index.passage_mention_indptr[passage + 1]
    for m in range(lo, hi):
        entity, start = int(index.mentions[m, 0]), int(index.mentions[m, 4])
        if entity == subject:
            continue
        before = tuple(w.lower() for w in WORD.findall(text[max(0, start - LOOK_BACK):start]))
        for n in range(1, min(context, len(before)) + 1):
            yield subject, entity, (before[-n:], kinds[entity])


def _kb_facts(index: SparseIndex, triples: Iterable[Triple]) -> dict[tuple[int, str], set[int]]:
    """(subject id, relation) -> object ids, of the facts whose two names are entities of the index."""
    facts: dict[tuple[int, str], set[int]] = defaultdict(set)
    for t in triples:
        s, o = index.entities.lookup(t.subject), index.entities.lookup(t.object)
        if s is not None and o is not None and s != o:
            facts[(s, t.relation)].add(o)
    return facts


def learn_patterns(index: SparseIndex, triples: Iterable[Triple], config: BootstrapConfig = BootstrapConfig()
                   ) -> list[Pattern]:
    """The patterns the facts of `triples` teach over `index` (module docstring), best supported first."""
    facts = _kb_facts(index, triples)
    relations_of: dict[int, list[str]] = defaultdict(list)
    for s, r in facts:
        relations_of[s].append(r)
    kinds = index.entities.kinds_or_none()
    counts: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for p in range(index.n_passages):
        if int(index.passage_entity[p]) not in relations_of:
            continue
        for s, o, key in _candidates(index, p, kinds, config.context):
            for r in relations_of[s]:
                counts[(r, *key)][0 if o in facts[(s, r)] else 1] += 1
    kept = [Pattern(r, words, kind, right, wrong) for (r, words, kind), (right, wrong) in counts.items()
            if right >= config.min_support and right / (right + wrong) >= config.min_precision]
    return sorted(kept, key=lambda q: (-q.right, q.relation, q.words, str(q.kind)))


def find_facts(index: SparseIndex, patterns: list[Pattern], skip_articles: Iterable[int] = (),
               context: int | None = None) -> list[tuple[int, str, int]]:
    """The facts ``(subject id, relation, object id)`` that `patterns` find in the passages of `index` with a
    title entity, those of `skip_articles` left out; sorted, each once."""
    if not patterns:
        return []
    by_key: dict[tuple, set[str]] = defaultdict(set)
    for q in patterns:
        by_key[(q.words, q.kind)].add(q.relation)
    context = context or max(len(q.words) for q in patterns)
    skip = set(int(a) for a in skip_articles)
    kinds = index.entities.kinds_or_none()
    found = set()
    for p in range(index.n_passages):
        if int(index.passage_entity[p]) < 0 or int(index.passage_article[p]) in skip:
            continue
        for s, o, key in _candidates(index, p, kinds, context):
            for r in by_key.get(key, ()):
                found.add((s, r, o))
    return sorted(found)


def corpus_id_articles(index_dir: str | Path, path: str | Path) -> list[int]:
    """The article ids of the corpus ids listed in `path` (one per line, blank lines allowed); an id the index
    does not hold is an `InputFormatError` naming its line."""
    ids = {key: a for a, key in enumerate(SparseIndex.load(index_dir).article_keys)}
    out = []
    for line_no, line in read_lines(path, "list of corpus ids"):
        if line.strip():
            if line.strip() not in ids:
                raise InputFormatError(path, line_no, f"{line.strip()!r} is not a corpus id of the index {index_dir}")
            out.append(ids[line.strip()])
    return out


def bootstrap_kb(index_dir: str | Path, kb: str | Path, out: str | Path, config: BootstrapConfig = BootstrapConfig(),
                 skip_articles: Iterable[int] = (), log=print) -> dict:
    """Write to `out` the facts of `kb` followed by those its patterns find in the index (module docstring), and
    beside it ``<out>.json``: the settings, the patterns kept and the counts. Returns that report."""
    index = SparseIndex.load(index_dir)
    triples = list(read_kb(kb))
    if not triples:
        raise ConfigError(f"{kb}: the KB has no facts to learn patterns from")
    patterns = learn_patterns(index, triples, config)
    found = find_facts(index, patterns, skip_articles, config.context)
    names, lookup = index.entities.names, index.entities.lookup
    lines = dict.fromkeys(f"{t.subject}|{t.relation}|{t.object}" for t in triples)
    new, not_writable = Counter(), 0
    for s, r, o in found:
        a, b = names[s], names[o]
        if "|" in a + b + r or "\n" in a + b or lookup(a) != s or lookup(b) != o:
            not_writable += 1
            continue
        line = f"{a}|{r}|{b}"
        if line not in lines:
            lines[line] = None
            new[r] += 1
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    report = {"kb": str(kb), "index": str(index_dir), "config": asdict(config), "kb_facts": len(triples),
              "skipped_articles": len(set(skip_articles)), "patterns": [
                  {"relation": q.relation, "words": " ".join(q.words), "kind": q.kind, "right": q.right,
                   "wrong": q.wrong} for q in patterns],
              "found": len(found), "new_facts": sum(new.values()), "new_by_relation": dict(new.most_common()),
              "not_writable": not_writable, "written": len(lines)}
    Path(f"{out}.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    most = ", ".join(f"{r} {n:,}" for r, n in new.most_common(4)) + (", ..." if len(new) > 4 else "")
    log(f"bootstrapped facts: {len(patterns)} patterns learned from {len(triples):,} KB facts found "
        f"{report['new_facts']:,} new facts{f' ({most})' if new else ''}; wrote {out}")
    return report
