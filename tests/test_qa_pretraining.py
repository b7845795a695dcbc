"""Pretraining from question-answer pairs (drkit.dense.qa_supervision): labels, gold spans and negatives
against their definitions, checked pair by pair on a tiny title-entity corpus; pretraining runs on QA
pairs alone and on a KB and QA pairs in turn; bad lines name file and line."""

import json

import numpy as np
import pytest
from test_retrieve import CITY, title_corpus, write_jsonl

from drkit.dense.distant import IGNORED, NEGATIVE, POSITIVE
from drkit.errors import InputFormatError


@pytest.fixture(scope="module")
def qa_corpus(tmp_path_factory):
    from drkit.index.build import build_index

    d = tmp_path_factory.mktemp("qa")
    rows, questions = title_corpus(3)
    questions.append({"id": "lost", "question": "Who is nobody?", "supporting": ["no-such-id"]})
    write_jsonl(d / "corpus.jsonl", rows)
    write_jsonl(d / "questions.jsonl", questions)
    (d / "cities.txt").write_text("\n".join(CITY) + "\n")
    index = build_index(d / "corpus.jsonl", d / "index", entities=["titles", d / "cities.txt"], log=lambda *a: None)
    kb = [f"{r['title']}|born_in|{r['text'].split('born in ')[1].rstrip('.')}" for r in rows if "born in" in r["text"]]
    (d / "kb.txt").write_text("\n".join(kb) + "\n")
    return d, index, rows, questions


def test_labels_spans_and_negatives_match_their_definitions(qa_corpus):
    from drkit.dense.qa_supervision import QASupervision

    d, index, rows, questions = qa_corpus
    ds = QASupervision(index, d / "questions.jsonl", retrieved=10)
    assert ds.summary()["questions"] == len(questions) and ds.summary()["without_gold"] == 1
    assert ds.summary()["supporting_not_in_index"] == 1
    kept = [q for q in questions if q["id"] != "lost"]
    assert ds.queries.texts == [q["question"] for q in kept]
    key_of_article = index.article_keys
    passage_article = np.asarray(index.passage_article)
    mention_entity = np.asarray(index.mentions[:, 0])
    mention_passage = np.asarray(index.mentions[:, 1])
    for qi, q in enumerate(kept):
        gold = {index.entities.lookup(r["title"]) for r in rows if r["id"] in q["supporting"]}
        assert set(ds.queries.answers(qi).tolist()) == gold
        for p in range(index.n_passages):
            mentioned = set(mention_entity[mention_passage == p].tolist())
            supporting = key_of_article[int(passage_article[p])] in q["supporting"]
            expected = NEGATIVE if not (mentioned & gold) else POSITIVE if supporting else IGNORED
            assert ds.label(qi, p) == expected
            if expected == POSITIVE:
                rows_ = ds.gold_mentions(qi, p)
                assert set(rows_.tolist()) == {m for m in np.flatnonzero(mention_passage == p) if mention_entity[m] in gold}
                assert p in ds.anchors and qi in ds.training_queries(p)
        rng = np.random.default_rng(qi)
        for kind in ("tfidf", "random"):
            p = ds.negative(qi, kind, rng)
            assert p is None or ds.label(qi, p) == NEGATIVE
        assert all(ds.label(qi, int(p)) == NEGATIVE for p in ds.retrieved[qi])


def test_bad_question_line_names_file_and_line(qa_corpus, tmp_path):
    from drkit.dense.qa_supervision import QASupervision

    _, index, _, _ = qa_corpus
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "ok?", "supporting": []}) + "\n" + json.dumps({"question": "x", "supporting": "s"}) + "\n")
    with pytest.raises(InputFormatError, match=r"bad.jsonl:2 \(field .supporting.\)"):
        QASupervision(index, bad)


@pytest.mark.parametrize("sources", ["qa", "kb+qa"])
def test_pretraining_on_qa_pairs_alone_and_with_a_kb(qa_corpus, tiny_base, tmp_path, sources):
    from drkit.dense.encoder import EncoderConfig
    from drkit.dense.pretrain import PretrainConfig, pretrain

    d, _, _, _ = qa_corpus
    out = tmp_path / "run"
    pretrain(d / "index", d / "kb.txt" if sources == "kb+qa" else None, out,
             PretrainConfig(steps=4, anchor_passages=2, max_passages=6, precision="fp32", checkpoint_every=2),
             EncoderConfig(base=str(tiny_base), dim=32), log=lambda *a: None, qa=d / "questions.jsonl")
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4]
    assert all(np.isfinite(r["loss"]) and r["pairs_pos"] > 0 for r in log)
    qa_steps = log if sources == "qa" else log[1::2]  # with both: even steps KB, odd steps QA
    assert all(set(r["negatives"]) == {"tfidf", "random"} for r in qa_steps)
    if sources == "kb+qa":
        assert all(set(r["negatives"]) == {"shared_entity", "shared_relation", "random"} for r in log[0::2])
    manifest = json.loads((out / "encoder" / "manifest.json").read_text())
    assert manifest["pretraining"]["settings"]["qa"] == str(d / "questions.jsonl")
