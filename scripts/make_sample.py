"""Make the small MetaQA sample shipped in data/sample/ from the full data in ../shared/data/metaqa.

A seeded choice of directors and all their films, the articles of those films, the KB facts about
them, and MetaQA questions whose topic entity is in the sample, with answers recomputed on the
sample KB by following each question type's relation path (topic entity removed at every hop,
as MetaQA was built). Run from the repository root:

    python scripts/make_sample.py --data ../shared/data/metaqa --out data/sample
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
from collections import defaultdict
from pathlib import Path

STEP = {  # (from type, to type) -> (relation, forward?)
    "director": ("directed_by", False), "writer": ("written_by", False), "actor": ("starred_actors", False),
    "year": ("release_year", False), "genre": ("has_genre", False), "language": ("in_language", False),
    "tag": ("has_tags", False), "tags": ("has_tags", True), "imdbrating": ("has_imdb_rating", True),
    "imdbvotes": ("has_imdb_votes", True),
}


def relation_steps(qtype: str) -> list[tuple[str, bool]]:
    types = qtype.split("_to_")
    steps = []
    for a, b in zip(types[:-1], types[1:]):
        if a == "movie":
            rel, _ = STEP[b]
            steps.append((rel, True))
        else:
            rel, _ = STEP[a]
            steps.append((rel, False))
    return steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data/metaqa")
    ap.add_argument("--out", default="data/sample")
    ap.add_argument("--directors", type=int, default=45, help="directors whose films make the sample")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--max-questions", type=int, default=400, help="per hop count and split")
    args = ap.parse_args()
    data, out = Path(args.data), Path(args.out)
    rng = random.Random(args.seed)

    triples = [tuple(l.rstrip("\n").split("|")) for l in open(data / "kb.txt", encoding="utf-8") if l.strip()]
    films_of = defaultdict(set)
    for s, r, o in triples:
        if r == "directed_by":
            films_of[o].add(s)
    prolific = sorted(d for d, f in films_of.items() if len(f) >= 3)
    directors = rng.sample(prolific, args.directors)
    movies = set().union(*(films_of[d] for d in directors))
    kb = [t for t in triples if t[0] in movies]

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "kb.txt", "w", encoding="utf-8") as f:
        f.writelines(f"{s}|{r}|{o}\n" for s, r, o in kb)
    articles = open(data / "wiki.txt", encoding="utf-8").read().split("\n\n")
    kept = [a for a in articles if a.strip() and re.sub(r"^1 ", "", a.strip().split("\n")[0]) in movies]
    (out / "wiki.txt").write_text("\n\n".join(a.strip() for a in kept) + "\n", encoding="utf-8")

    fwd, inv = defaultdict(set), defaultdict(set)
    for s, r, o in kb:
        fwd[(s, r)].add(o)
        inv[(o, r)].add(s)
    entities = {s for s, _, _ in kb} | {o for _, _, o in kb}
    counts = {}
    for hops in (1, 2, 3):
        for split in ("train", "dev"):
            q_lines = open(data / f"{hops}-hop/vanilla/qa_{split}.txt", encoding="utf-8").read().splitlines()
            t_lines = open(data / f"{hops}-hop/qa_{split}_qtype.txt", encoding="utf-8").read().splitlines()
            rows = []
            for q, qtype in zip(q_lines, t_lines):
                topic = re.search(r"\[(.*?)\]", q).group(1)
                if topic not in entities:
                    continue
                frontier = {topic}
                for rel, forward in relation_steps(qtype):
                    frontier = set().union(*((fwd if forward else inv)[(e, rel)] for e in frontier)) - {topic}
                if frontier:
                    rows.append((q.split("\t")[0] + "\t" + "|".join(sorted(frontier)), qtype))
            rng.shuffle(rows)
            rows = rows[: args.max_questions]
            (out / f"{hops}-hop").mkdir(exist_ok=True)
            (out / f"{hops}-hop" / f"qa_{split}.txt").write_text("".join(r[0] + "\n" for r in rows), encoding="utf-8")
            (out / f"{hops}-hop" / f"qa_{split}_qtype.txt").write_text("".join(r[1] + "\n" for r in rows), encoding="utf-8")
            counts[f"{hops}-hop/{split}"] = len(rows)
    shutil.copy(data / "WIKIMOVIES-LICENSE.txt", out / "WIKIMOVIES-LICENSE.txt")
    print(f"{len(directors)} directors, {len(movies)} films, {len(kept)} articles, {len(kb)} facts; questions {counts}")


if __name__ == "__main__":
    main()
