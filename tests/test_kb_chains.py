"""Two-hop training questions from chained KB facts (drkit.reason.kb_chains) against a plainly written
reference, and `drkit.data.kb.in_turn`."""

import itertools
import json

import pytest

from drkit.data.kb import Triple, chain_question, in_turn, read_kb
from drkit.reason.kb_chains import chain_questions, write_questions


def facts(*rows):
    return [Triple(s, r, o, i + 1) for i, (s, r, o) in enumerate(rows)]


KB = facts(("Film A", "director", "Ann"), ("Ann", "place of birth", "Paris"), ("Ann", "date of birth", "1950"),
           ("Film B", "director", "Ann"), ("Film C", "director", "Bob"),  # Bob has no page
           ("Bob", "place of birth", "Rome"), ("Ann", "spouse", "Film A"),  # back to the subject: no question
           ("Film A", "director", "Ann"),  # the same fact again: counted once
           ("Cal", "father", "Cal"),  # a fact about itself: no chain through it
           ("Cal", "mother", "Dee"), ("Dee", "father", "Eve"))
TITLES = ["Film A", "Film B", "Film C", "Ann", "Cal", "Dee", "Film A"]  # a second "Film A" passage: the first counts
KEYS = ["1", "2", "3", "4", "5", "6", "7"]


def reference(triples, titles, keys):
    """Every chain, by a double loop over the facts."""
    page = {}
    for t, k in zip(titles, keys):
        page.setdefault(t, k)
    seen, out = set(), set()
    unique = [t for t in triples if not ((t.subject, t.relation, t.object) in seen or seen.add((t.subject, t.relation, t.object)))]
    for a, b in itertools.product(unique, unique):
        if a.object == b.subject and a.subject in page and a.object in page and a.subject != a.object \
                and b.object != a.subject:
            out.add((f"What is the {b.relation} of the {a.relation} of {a.subject}?", (b.object,),
                     (page[a.subject], page[a.object])))
    return out


def as_set(questions):
    return {(q["question"], tuple(q["answers"]), tuple(q["supporting"])) for q in questions}


def test_every_chain_is_found_as_a_double_loop_finds_it():
    got = chain_questions(KB, TITLES, KEYS, n=100)
    assert as_set(got) == reference(KB, TITLES, KEYS)
    assert len(got) == len(as_set(got)) == 6  # Film A: 2 of Ann's facts (not the spouse), Film B: 3; Cal: 1
    assert ("What is the place of birth of the director of Film A?", ("Paris",), ("1", "4")) in as_set(got)
    assert all(q["type"] == "kb-chain" and q["id"] == f"kb-chain-{i}" for i, q in enumerate(got))
    assert chain_question("S", "r1", "r2") == "What is the r2 of the r1 of S?"


def test_a_cap_takes_each_relation_path_in_turn_and_the_seed_fixes_the_order():
    many = facts(*[(f"Film {i}", "director", f"P{i}") for i in range(20)],
                 *[(f"P{i}", "date of birth", str(1900 + i)) for i in range(20)],
                 ("Film X", "composer", "Q"), ("Q", "place of birth", "Oslo"))
    titles = [f"Film {i}" for i in range(20)] + [f"P{i}" for i in range(20)] + ["Film X", "Q"]
    keys = [str(i) for i in range(len(titles))]
    got = chain_questions(many, titles, keys, n=3, seed=0)
    assert len(got) == 3
    assert "What is the place of birth of the composer of Film X?" in [q["question"] for q in got]  # the rare path
    assert got == chain_questions(many, titles, keys, n=3, seed=0)
    orders = {tuple(q["question"] for q in chain_questions(many, titles, keys, n=20, seed=s)) for s in range(4)}
    assert len(orders) > 1
    assert as_set(chain_questions(many, titles, keys, n=1000)) == reference(many, titles, keys)
    assert chain_questions(many, titles, keys, n=0) == []


def test_in_turn_takes_the_first_of_each_queue_then_the_second():
    assert in_turn([[1, 2, 3], [4], [5, 6]], 10) == [1, 4, 5, 2, 6, 3]
    assert in_turn([[1, 2, 3], [4], [5, 6]], 4) == [1, 4, 5, 2]
    assert in_turn([], 3) == [] and in_turn([[1]], 0) == []


def test_written_questions_read_back(tmp_path):
    got = chain_questions(KB, TITLES, KEYS, n=100)
    path = write_questions(tmp_path / "sub" / "chains.jsonl", got)
    assert [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] == got


def test_a_bad_kb_line_is_named_by_the_reader(tmp_path):
    from drkit.errors import InputFormatError

    bad = tmp_path / "kb.txt"
    bad.write_text("Film A|director|Ann\nFilm B|director\n", encoding="utf-8")
    with pytest.raises(InputFormatError, match="kb.txt:2: expected"):
        chain_questions(read_kb(bad), TITLES, KEYS, n=10)
