import json

import pytest

from drkit.errors import InputFormatError
from drkit.experiments.twowiki_data import bracketed_questions, split_questions, train_kb


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


ROWS = [
    {"id": "a", "question": "Who is the child of the performer of song Me And Bobby Mcgee?", "answers": ["Dean Miller"],
     "type": "compositional", "supporting": ["1", "2"],
     "evidence": [["Me and Bobby McGee", "performer", "Roger Miller"], ["Roger Miller", "child", "Dean Miller"]]},
    {"id": "b", "question": "Are X and Y both in the same country?", "answers": ["no"], "type": "comparison",
     "supporting": ["3", "4"], "evidence": [["X", "country", "Iran"], ["Y", "country", "Georgia"]]},
    {"id": "c", "question": "Who is Mugain's mother-in-law?", "answers": ["Ness"], "type": "inference",
     "supporting": ["5", "6"], "evidence": [["Mugain", "spouse", "Conchobar"], ["Conchobar", "mother", "Ness"]]},
    {"id": "d", "question": "Where was the director of film Zed born?", "answers": ["Paris"], "type": "compositional",
     "supporting": ["7", "8"], "evidence": [["Not In The Question", "director", "Q"], ["Q", "place of birth", "Paris"]]},
    {"id": "e", "question": "Are X and Z both in the same country?", "answers": ["yes"], "type": "comparison",
     "supporting": ["3", "9"], "evidence": [["X", "country", "Iran"], ["Z", "country", "Iran"]]},
]


def test_split_is_stratified_seeded_and_disjoint(tmp_path):
    src = _write(tmp_path / "q.jsonl", ROWS * 1)
    split = split_questions(src, tmp_path / "s", dev_fraction=0.5, seed=3)
    train = [json.loads(x)["id"] for x in (tmp_path / "s" / "train.jsonl").read_text().splitlines()]
    dev = [json.loads(x)["id"] for x in (tmp_path / "s" / "dev.jsonl").read_text().splitlines()]
    assert sorted(train + dev) == ["a", "b", "c", "d", "e"] and not set(train) & set(dev)
    # per type: round(0.5 * n) in dev: comparison 2 -> 1, compositional 2 -> 1, inference 1 -> round(0.5) = 0
    assert split["counts"] == {"comparison": {"train": 1, "dev": 1}, "compositional": {"train": 1, "dev": 1},
                               "inference": {"train": 1, "dev": 0}}
    assert split["dev_ids"] == dev
    again = split_questions(src, tmp_path / "s2", dev_fraction=0.5, seed=3)
    assert again["dev_ids"] == dev
    assert (tmp_path / "s" / "dev.jsonl").read_text() == (tmp_path / "s2" / "dev.jsonl").read_text()


def test_split_refuses_duplicate_ids_and_bad_lines(tmp_path):
    with pytest.raises(InputFormatError, match="'a' appears more than once"):
        split_questions(_write(tmp_path / "d.jsonl", [ROWS[0], ROWS[0]]), tmp_path / "s")
    bad = tmp_path / "b.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({"id": "x", "question": 3}) + "\n", encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"b.jsonl:2.*question"):
        split_questions(bad, tmp_path / "s")


def test_train_kb_is_the_evidence_of_the_given_questions_only(tmp_path):
    src = _write(tmp_path / "q.jsonl", [ROWS[1], ROWS[4], {**ROWS[2], "evidence": [["A|B", "r", "c"], ["M", "r", "N"]]}])
    counts = train_kb(src, tmp_path / "kb.txt")
    assert (tmp_path / "kb.txt").read_text().splitlines() == [
        "X|country|Iran", "Y|country|Georgia", "Z|country|Iran", "M|r|N"]
    assert counts == {"triples": 4, "not_writable": 1}


def test_bracketed_questions_mark_the_first_subject_as_written(tmp_path):
    src = _write(tmp_path / "q.jsonl", ROWS)
    counts = bracketed_questions(src, tmp_path / "b.txt")
    assert (tmp_path / "b.txt").read_text().splitlines() == [
        "Who is the child of the performer of song [Me And Bobby Mcgee]?\tDean Miller",
        "Who is [Mugain]'s mother-in-law?\tNess",
    ]
    assert counts == {"written": 2, "subject_not_in_question": 1, "no_answer": 0, "ids": ["a", "c"]}


def test_the_second_fold_swaps_train_and_dev(tmp_path):
    src = _write(tmp_path / "q.jsonl", ROWS)
    first = split_questions(src, tmp_path / "f0", dev_fraction=0.5, seed=3)
    second = split_questions(src, tmp_path / "f1", dev_fraction=0.5, seed=3, swap=True)
    assert (tmp_path / "f1" / "dev.jsonl").read_text() == (tmp_path / "f0" / "train.jsonl").read_text()
    assert (tmp_path / "f1" / "train.jsonl").read_text() == (tmp_path / "f0" / "dev.jsonl").read_text()
    assert second["swapped"] and not first["swapped"]
    ids = {r["id"] for r in ROWS}
    assert set(first["dev_ids"]) | set(second["dev_ids"]) == ids and not set(first["dev_ids"]) & set(second["dev_ids"])
