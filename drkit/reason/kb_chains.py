"""Two-hop training questions from a KB's chained facts, for hop-mixing training (`drkit train-mixing --more-kb`).

A user's training questions are few (2WikiMultiHopQA's split: 216), and the entity answer's own hop (the
answer head, `drkit.reason.mixing.MixConfig.answer_head`) sees only those whose answer is an entity of the index.
A KB that `drkit bootstrap-kb` grew from the training KB holds thousands of facts found in the corpus, each in its
subject's page. Two of them chain when the first one's object is the second one's subject and has a page of its
own: (s, r1, x), (x, r2, y) gives the templated question "What is the r2 of the r1 of s?" (`chain_question`),
whose gold passages are the pages of s and x and whose answer is y, as a compositional question's are. No
question of a benchmark is used; the template names the relations as the KB does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

from drkit.data.kb import Triple, chain_question, in_turn
from drkit.util.sampling import generator


def chain_questions(triples: Iterable[Triple], titles: Sequence[str], keys: Sequence[str], n: int,
                    seed: int = 0) -> list[dict]:
    """At most `n` questions of the chains (s, r1, x), (x, r2, y) of `triples` where s and x are titles of
    passages (`titles`, with their corpus ids `keys`; a title of several passages: its first) and y is not s,
    each one a training line ``{"id", "question", "answers", "type": "kb-chain", "supporting"}``. Chains are taken
    in turn from each relation path (r1, r2), each path's in a seeded order, so that the paths the KB holds
    thousands of do not crowd out the rest; a repeated fact counts once."""
    page: dict[str, str] = {}
    for title, key in zip(titles, keys):
        page.setdefault(title, str(key))
    facts = list(dict.fromkeys((t.subject, t.relation, t.object) for t in triples))
    by_subject: dict[str, list[tuple[str, str]]] = {}
    for s, r, o in facts:
        by_subject.setdefault(s, []).append((r, o))
    paths: dict[tuple[str, str], list[tuple]] = {}
    for s, r1, x in facts:
        if s in page and x in page and x != s:
            for r2, y in by_subject.get(x, ()):
                if y != s:
                    paths.setdefault((r1, r2), []).append((s, r1, x, r2, y))
    rng = generator(seed, 3)
    queues = [[chains[i] for i in rng.permutation(len(chains))] for _, chains in sorted(paths.items())]
    return [{"id": f"kb-chain-{i}", "question": chain_question(s, r1, r2), "answers": [y], "type": "kb-chain",
             "supporting": [page[s], page[x]]} for i, (s, r1, x, r2, y) in enumerate(in_turn(queues, n))]


def write_questions(path: str | Path, questions: Sequence[dict]) -> Path:
    """`questions` as a JSONL question file (the format `drkit train-mixing --train` reads)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for q in questions:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    return path
