"""The reader (drkit.reader): answer scoring, input layout, labels, decoding, training and `drkit answer`."""

import dataclasses
import json

import numpy as np
import pytest
import torch
from test_retrieve import mixing_run, title_corpus, write_jsonl  # noqa: F401  (mixing_run: a fixture)

from drkit.cli import main
from drkit.data.text import split_sentences
from drkit.reader.decode import bridge_names, decode
from drkit.reader.examples import OrderConfig, ReaderExample, ReaderPassage, arrange
from drkit.reader.model import TITLE, Reader, ReaderConfig, allot
from drkit.reader.reading import ReadConfig
from drkit.reader.text import best_scores, exact_match, f1, find_all, normalize_answer


def test_hotpot_normalisation_and_scores_by_hand():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("an Apple a day") == "apple day"
    assert exact_match("the Iran", "Iran") == 1.0 and exact_match("Iran.", "Irán") == 0.0
    # F1 over words: "walter lang" vs "lang" -> precision 1/2, recall 1 -> 2/3
    assert f1("Walter Lang", "Lang") == pytest.approx(2 / 3)
    assert f1("yes", "no") == 0.0 and f1("no", "no") == 1.0 and f1("yes it is", "yes") == 0.0
    assert best_scores("Lang", ["Walter Lang", "Lang"]) == (1.0, 1.0)
    assert best_scores("x", []) == (0.0, 0.0)


def test_sentences_and_occurrences():
    text = "Kismet is a 1944 film by Dr. Who. It stars J. Smith in Iran. \"Quoted.\" Then 1990."
    spans = split_sentences(text)
    assert [text[a:b] for a, b in spans] == ["Kismet is a 1944 film by Dr. Who.", "It stars J. Smith in Iran.",
                                             "\"Quoted.\"", "Then 1990."]
    assert split_sentences("   ") == [] and split_sentences("no full stop") == [(0, 12)]
    # a Roman numeral ends a sentence when a sentence-starting word follows; an initial before a name does not
    text = "He fought in World War I. He later moved. Louis XIV. was king. John F. Kennedy was born."
    assert [text[a:b] for a, b in split_sentences(text)] == ["He fought in World War I.", "He later moved.",
                                                             "Louis XIV. was king.", "John F. Kennedy was born."]
    assert find_all("Iran and Iranian; iran.", "IRAN") == [(0, 4), (18, 22)]  # not inside "Iranian"
    assert find_all("C++ is", "c++") == [(0, 3)] and find_all("abc", " ") == []


@pytest.mark.parametrize("seed", range(20))
def test_allot_is_water_filling(seed):
    rng = np.random.default_rng(seed)
    costs = [int(c) for c in rng.integers(0, 200, rng.integers(1, 7))]
    room = int(rng.integers(0, 700))
    got = allot(costs, room)
    assert sum(got) <= room and all(0 <= g <= c for g, c in zip(got, costs))
    if sum(costs) <= room:
        assert got == costs
    else:  # the level L: the largest with sum(min(c, L)) <= room; each gets min(c, L) or one more piece at most
        level = max(x for x in range(max(costs) + 1) if sum(min(c, x) for c in costs) <= room)
        assert all(min(c, level) <= g <= min(c, level + 1) for g, c in zip(got, costs))
        assert room - sum(got) < len(costs)


def test_arrange_keeps_the_gold_and_puts_it_first_in_the_asked_share():
    gold = [ReaderPassage(str(i), f"g{i}", "t") for i in range(2)]
    dist = [ReaderPassage(f"d{i}", f"d{i}", "t") for i in range(6)]
    rng = np.random.default_rng(0)
    first = 0
    for _ in range(2000):
        got = arrange(gold, dist, OrderConfig(passages=5, gold_first=0.6), rng)
        assert len(got) == 5 and set(gold) <= set(got) and set(got) - set(gold) == set(dist[:3])
        first += list(got[:2]) == gold
    # gold first: 60% by rule, plus the shuffles that happen to put them first (2/5 * 1/4 = 1/10 of 40%)
    assert abs(first / 2000 - (0.6 + 0.4 * 0.1)) < 0.04


def test_a_share_of_the_single_hop_kb_questions_is_read_on_its_own_page_alone():
    from drkit.reader.examples import Source, epoch_examples, own_page_sources

    gold = [ReaderPassage(f"g{i}", f"G{i}", "t") for i in range(10)]
    dist = tuple(ReaderPassage(f"d{i}", f"D{i}", "t") for i in range(6))
    sources = [Source(f"s{i}", "q", ("a",), (gold[i],), dist, qtype="kb" if i < 8 else "kb-bridge") for i in range(10)]
    alone = own_page_sources(sources, 0.5, seed=0)
    assert len(alone) == 4 and alone <= set(range(8))  # half of the 8 single-hop ones, never a composed one
    assert own_page_sources(sources, 0.5, seed=0) == alone and own_page_sources(sources, 0.0, seed=0) == frozenset()
    assert own_page_sources(sources, 1.0, seed=0) == frozenset(range(8))
    got = epoch_examples(sources, OrderConfig(passages=5), seed=0, epoch=0, alone=alone)
    assert all(got[i].passages == (gold[i],) for i in alone)
    assert all(len(got[i].passages) == 5 and gold[i] in got[i].passages for i in range(10) if i not in alone)


def example(answers=("Walter Lang",), support=()):
    passages = (ReaderPassage("a", "Moon Over Miami", "Moon Over Miami is a 1941 film. It was directed by Walter Lang."),
                ReaderPassage("b", "Walter Lang", "Walter Lang was born in Memphis. He directed State Fair."),
                ReaderPassage("c", "Kismet", "Kismet is a 1944 film directed by William Dieterle."))
    return ReaderExample("q1", "Who directed Moon Over Miami?", passages, answers, frozenset({"a", "b"}), support)


def test_featurize_lays_out_markers_and_maps_pieces_back_to_the_text(tiny_reader):
    e = example()
    f = tiny_reader.featurize(e, labels=True)
    tok = tiny_reader.tokenizer
    assert len(f.ids) <= 96 and f.ids[0] == tok.cls_token_id and f.ids[-1] == tok.sep_token_id
    assert f.ids.count(tiny_reader.passage_marker) == 3
    assert [f.ids[m] for m in f.markers] == [tiny_reader.sentence_marker] * len(f.markers)
    assert f.marker_of == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]
    for pos in np.flatnonzero(f.segment >= 0):  # each piece is the word piece of the characters it points to
        p, s = f.segments[int(f.segment[pos])]
        source = e.passages[p].title if s == TITLE else e.passages[p].text
        c0, c1 = f.chars[pos]
        piece = tok.convert_ids_to_tokens(f.ids[pos]).removeprefix("##")
        assert source[c0:c1].lower() == piece
    # the answer occurs in passage a's text and in passage b's title and text: all three are targets
    got = {(int(f.chars[s, 0]), int(f.chars[t, 1]), f.segments[int(f.segment[s])])
           for s, t in zip(f.start_targets, f.end_targets)}
    assert {(s[2][0], s[2][1]) for s in got} == {(0, 1), (1, TITLE), (1, 0)}
    assert f.type_label == 0
    # supporting: the gold passages' sentences that hold the answer
    assert f.support_labels == [0.0, 1.0, 1.0, 0.0, 0.0]
    assert tiny_reader.featurize(example(answers=("yes",)), labels=True).type_label == 1


def test_yes_no_answers_mark_no_sentence_by_their_word(tiny_reader):
    passages = (ReaderPassage("a", "Kismet", "No one knew the film. Kismet was made in Iran."),
                ReaderPassage("b", "Juarez", "Juarez was made in Mexico. Yes, it was."))
    e = ReaderExample("q", "Were both made in the same country?", passages, ("no",), frozenset({"a", "b"}),
                      ("Iran", "Mexico"))
    f = tiny_reader.featurize(e, labels=True)
    assert f.type_label == 2 and f.start_targets == []
    assert f.support_labels == [0.0, 1.0, 1.0, 0.0]  # the sentences of the objects, not those that say no or yes


def test_a_span_reading_points_into_its_passage(tiny_reader):
    from drkit.qa.results import reader_answer

    e = example()
    f = tiny_reader.featurize(e)
    n = len(f.ids)
    for target in (5, 20, 40):  # whichever title or sentence a forced span falls in, the offsets point to it
        start = torch.full((n,), -5.0)
        end = torch.full((n,), -5.0)
        pos = int(np.flatnonzero(f.segment >= 0)[target])
        start[pos] = end[pos] = 5.0
        r = decode(e, f, {"type": torch.tensor([3.0, 0, 0]), "start": start, "end": end, "support": torch.zeros(n)},
                   0.5, tiny_reader.config.max_answer_pieces)
        a = reader_answer(r, e.passages)
        passage = next(p for p in e.passages if p.id == a.passage_id)
        assert (passage.title if a.in_title else passage.text)[a.start : a.end] == a.text == r.answer != ""


def test_a_long_input_is_cut_to_max_pieces_with_a_share_for_each_passage(tiny_reader):
    long = ReaderPassage("x", "Long", " ".join(f"Sentence number {i} is here." for i in range(60)))
    e = ReaderExample("q", "Who?", (long, example().passages[2]))
    f = tiny_reader.featurize(e)
    assert 95 <= len(f.ids) <= 96  # a last piece of room too small for a sentence marker and a piece stays empty
    assert f.ids.count(tiny_reader.passage_marker) == 2
    assert any(p == 1 for p, _ in f.marker_of)  # the short passage was read whole
    assert max(int(c) for c in f.chars[:, 1]) <= len(long.text)


def brute_force_span(f, start, end, longest):
    best = (-np.inf, -1, -1)
    n = len(f.ids)
    for i in range(n):
        for j in range(i, min(n, i + longest)):
            if f.segment[i] >= 0 and f.segment[i] == f.segment[j] and start[i] + end[j] > best[0]:
                best = (start[i] + end[j], i, j)
    return best


def span_scores_by_loop(start, end, seg, max_answer_pieces):
    """The span scores one diagonal at a time: row d, column i = start[i] + end[i + d] where pieces i..i+d lie in
    one segment (the first version of `drkit.reader.decode.span_scores`)."""
    n = len(seg)
    out = torch.full((max(1, min(max_answer_pieces, n)), n), float("-inf"))
    for d in range(min(max_answer_pieces, n)):
        ok = (seg[: n - d] >= 0) & (seg[: n - d] == seg[d:])
        out[d, : n - d] = (start[: n - d] + end[d:]).masked_fill(~ok, float("-inf"))
    return out


@pytest.mark.parametrize("n, longest", [(1, 30), (7, 30), (40, 6), (320, 30)])
def test_span_scores_are_the_diagonals_read_one_at_a_time(n, longest):
    from drkit.reader.decode import span_scores

    g = torch.Generator().manual_seed(n)
    start, end = torch.randn(n, generator=g), torch.randn(n, generator=g)
    seg = torch.randint(-1, 4, (n,), generator=g).sort().values  # runs of segments, -1 (outside them) first
    seg[torch.rand(n, generator=g) < 0.1] = -1
    got = span_scores(start, end, seg, longest)
    assert torch.equal(got, span_scores_by_loop(start, end, seg, longest))  # bit for bit, -inf where the loop has it
    assert torch.isfinite(got).any() == bool((seg >= 0).any())


@pytest.mark.parametrize("seed", range(5))
def test_span_decoding_matches_a_brute_force_search(tiny_reader, seed):
    e = example()
    f = tiny_reader.featurize(e)
    g = torch.Generator().manual_seed(seed)
    n = len(f.ids)
    logits = {"type": torch.tensor([3.0, 0.0, 0.0]), "start": torch.randn(n, generator=g),
              "end": torch.randn(n, generator=g), "support": torch.randn(n, generator=g)}
    r = decode(e, f, logits, 0.5, tiny_reader.config.max_answer_pieces)
    score, i, j = brute_force_span(f, logits["start"].numpy(), logits["end"].numpy(), 6)
    assert r.span.score == pytest.approx(score, abs=1e-5)
    p, s = f.segments[int(f.segment[i])]
    source = e.passages[p].title if s == TITLE else e.passages[p].text
    assert r.answer == source[f.chars[i, 0] : f.chars[j, 1]] and r.answer_type == "span"
    probs = torch.sigmoid(logits["support"][f.markers])
    assert [(x.passage, x.sentence) for x in r.supporting] == [f.marker_of[k] for k in range(len(probs)) if probs[k] > 0.5]


def test_bridge_names_are_the_titles_read_that_the_question_does_not_name():
    assert bridge_names(example()) == {"walter lang", "kismet"}  # "Moon Over Miami" is named
    e = ReaderExample("q", "Who is the father of the director of Kismet?",
                      (ReaderPassage("x", "Kismet (1944 film)", "A film."), ReaderPassage("y", "The Dieterle", "A man.")))
    assert bridge_names(e) == {"kismet 1944 film", "dieterle"}  # the bare "kismet" is named
    e = ReaderExample("q", "Who is Edith Of Wessex's mother-in-law?", (ReaderPassage("x", "Edith of Wessex", "A queen."),))
    assert bridge_names(e) == set()  # named, with a possessive


def random_spans(reader, e, seed: int):
    """`e`'s features, their length, the longest answer and seeded random start and end logits."""
    f = reader.featurize(e)
    n = len(f.ids)
    g = torch.Generator().manual_seed(seed)
    return f, n, reader.config.max_answer_pieces, torch.randn(n, generator=g), torch.randn(n, generator=g)


@pytest.mark.parametrize("seed", range(5))
def test_skip_bridges_takes_the_best_span_that_is_not_a_bridge_name(tiny_reader, seed):
    e = example()
    f, n, longest, start, end = random_spans(tiny_reader, e, seed)
    walter = [int(i) for i in np.flatnonzero(f.segment >= 0) if e.passages[0].text[f.chars[i, 0]:].startswith("Walter")
              and f.segments[int(f.segment[i])][1] != TITLE][0]
    last = walter + next(d for d in range(longest) if e.passages[0].text[f.chars[walter, 0]: f.chars[walter + d, 1]]
                         == "Walter Lang")
    start[walter], end[last] = 9.0, 9.0  # "Walter Lang", a bridge's name, is the best span by far
    logits = {"type": torch.tensor([3.0, 0.0, 0.0]), "start": start, "end": end, "support": torch.zeros(n)}
    assert decode(e, f, logits, 0.5, longest).answer == "Walter Lang"
    want = max((x for x in every_span(e, f, start, end, longest) if normalize_answer(x[1]) not in bridge_names(e)),
               key=lambda x: x[0])
    r = decode(e, f, logits, 0.5, longest, skip_bridges=True)
    assert (r.answer, r.span.score) == (want[1], pytest.approx(want[0], abs=1e-5))


def every_span(e, f, start, end, longest) -> list[tuple[float, str]]:
    """(score, text) of every span decoding may answer, by brute force."""
    spans = []
    for i in range(len(f.ids)):
        for j in range(i, min(len(f.ids), i + longest)):
            if f.segment[i] >= 0 and f.segment[i] == f.segment[j]:
                p, s = f.segments[int(f.segment[i])]
                text = (e.passages[p].title if s == TITLE else e.passages[p].text)[f.chars[i, 0]: f.chars[j, 1]]
                spans.append((float(start[i] + end[j]), text))
    return spans


def piece_at(e, f, passage: int, word: str) -> int:
    """The piece where `word` starts in passage `passage`'s text."""
    at = e.passages[passage].text.index(word)
    return next(int(i) for i in np.flatnonzero(f.segment >= 0) if f.segments[int(f.segment[i])][0] == passage
                and f.segments[int(f.segment[i])][1] != TITLE and int(f.chars[i, 0]) == at)


@pytest.mark.parametrize("seed", range(5))
def test_span_checks_takes_the_best_span_of_the_kind_asked_for(tiny_reader, seed):
    from drkit.reader.dates import is_date
    from drkit.reader.decode import CANDIDATES, is_name

    e = example()
    f, n, longest, start, end = random_spans(tiny_reader, e, seed)
    memphis, year = piece_at(e, f, 1, "Memphis"), piece_at(e, f, 2, "1944")
    start[memphis], end[memphis] = 9.0, 9.0  # "Memphis" the best span by far, "1944" (a date) well placed
    start[year], end[year] = 4.0, 4.0
    spans = sorted(every_span(e, f, start, end, longest), key=lambda x: -x[0])
    logits = {"type": torch.tensor([3.0, 0.0, 0.0]), "start": start, "end": end, "support": torch.zeros(n)}
    date = next(x for x in spans[:CANDIDATES] if is_date(x[1]))
    assert spans[0][1] == "Memphis" and date[1] == "1944"
    for question, want in (("When was Kismet made?", date), ("Where was Walter Lang born?", spans[0]),
                           ("What is Kismet?", spans[0])):
        q = dataclasses.replace(e, question=question)
        r = decode(q, f, logits, 0.5, longest, span_checks=True)
        assert (r.answer, r.span.score) == (want[1], pytest.approx(want[0], abs=1e-5))
        assert decode(q, f, logits, 0.5, longest).answer == "Memphis"  # off: the best span
    start[year], end[year] = 12.0, 12.0  # now the date is best: a place, a person or a nationality is not a date
    spans = sorted(every_span(e, f, start, end, longest), key=lambda x: -x[0])
    other = next(x for x in spans[:CANDIDATES] if not is_date(x[1]) and is_name(x[1]))
    assert spans[0][1] == "1944" and other[1] == "Memphis"
    for question in ("Where was Walter Lang born?", "Who directed Kismet?", "What nationality is William Dieterle?"):
        r = decode(dataclasses.replace(e, question=question), f, logits, 0.5, longest, span_checks=True)
        assert (r.answer, r.span.score) == (other[1], pytest.approx(other[0], abs=1e-5))
    born = piece_at(e, f, 1, "born")
    start[born], end[memphis] = 15.0, 15.0  # "born in Memphis" now the best: no name, so not a place's
    spans = sorted(every_span(e, f, start, end, longest), key=lambda x: -x[0])
    name = next(x for x in spans[:CANDIDATES] if not is_date(x[1]) and is_name(x[1]))
    assert spans[0][1] == "born in Memphis" and name[1] != spans[0][1]
    for question, want in (("Where was Walter Lang born?", name), ("What is Kismet?", spans[0])):
        r = decode(dataclasses.replace(e, question=question), f, logits, 0.5, longest, span_checks=True)
        assert (r.answer, r.span.score) == (want[1], pytest.approx(want[0], abs=1e-5))
    no_date = {"a": ReaderPassage("a", "Moon Over Miami", "It was directed by Walter Lang."), "b": e.passages[1]}
    plain = dataclasses.replace(e, question="When was Walter Lang born?", passages=tuple(no_date.values()))
    fp = tiny_reader.featurize(plain)
    m = len(fp.ids)
    got = decode(plain, fp, {"type": torch.tensor([3.0, 0.0, 0.0]), "start": start[:m], "end": end[:m],
                             "support": torch.zeros(m)}, 0.5, longest, span_checks=True)
    assert got.answer == max(every_span(plain, fp, start[:m], end[:m], longest), key=lambda x: x[0])[1]  # no date read: the best


@pytest.mark.parametrize("seed", range(5))
def test_a_which_of_two_answer_is_one_of_the_options(tiny_reader, seed):
    """With span checks, "Which ..., A or B?" whose A and B are titles read is answered by the option that the best
    span holding or held by one names; options that are not both titles read, or no span checks: the best span."""
    from drkit.reader.clues import held_title
    from drkit.reader.decode import CANDIDATES

    e = example()
    f, n, longest, start, end = random_spans(tiny_reader, e, seed)
    memphis = piece_at(e, f, 1, "Memphis")
    start[memphis], end[memphis] = 9.0, 9.0  # "Memphis", named by neither option, the best span by far
    logits = {"type": torch.tensor([3.0, 0.0, 0.0]), "start": start, "end": end, "support": torch.zeros(n)}
    spans = sorted(every_span(e, f, start, end, longest), key=lambda x: -x[0])
    options = ("Moon Over Miami", "Kismet")
    want = next(held_title(text, options) for _, text in spans[:CANDIDATES] if held_title(text, options))
    for question in ("Which film came out first, Moon Over Miami or Kismet?",
                     "Which film was released later, Kismet or Moon Over Miami?",
                     "Which film is older between Moon Over Miami and Kismet?"):
        q = dataclasses.replace(e, question=question)
        assert decode(q, f, logits, 0.5, longest, span_checks=True).answer == want
        assert decode(q, f, logits, 0.5, longest).answer == "Memphis"  # off: the best span
    for question in ("Which film came out first, Moon Over Miami or Casablanca?", "Who directed Kismet?",
                     "What was filmed between Moon Over Miami and Kismet?"):  # no choice offered
        q = dataclasses.replace(e, question=question)
        assert decode(q, f, logits, 0.5, longest, span_checks=True).answer == "Memphis"


def test_is_date_is_a_date_and_nothing_more():
    from drkit.reader.dates import is_date

    for text in ("12 January 1968", "January 12, 1968", "1968", "c. 1900", "circa 1900", "March 1908", "1849-1916"):
        assert is_date(text), text
    for text in ("Paris, 1968", "1968 Summer Olympics", "in 1968", "a 1944", "London", "1,200", "", "875"):
        assert not is_date(text), text


def test_loss_by_hand(tiny_reader):
    f1_ = tiny_reader.featurize(example(), labels=True)
    f2 = tiny_reader.featurize(example(answers=("no",)), labels=True)
    batch = tiny_reader.batch([f1_, f2])
    g = torch.Generator().manual_seed(0)
    B, L = batch["input_ids"].shape
    out = {"type": torch.randn(B, 3, generator=g), "support": torch.randn(B, L, generator=g),
           "start": torch.randn(B, L, generator=g).masked_fill(~batch["content"], float("-inf")),
           "end": torch.randn(B, L, generator=g).masked_fill(~batch["content"], float("-inf"))}
    total, parts = tiny_reader.loss(out, [f1_, f2])
    lt = -(torch.log_softmax(out["type"][0], 0)[0] + torch.log_softmax(out["type"][1], 0)[2]) / 2
    pairs = [(0, m, y) for m, y in zip(f1_.markers, f1_.support_labels)] + \
        [(1, m, y) for m, y in zip(f2.markers, f2.support_labels)]
    ls = -sum(y * torch.log(torch.sigmoid(out["support"][b, m])) + (1 - y) * torch.log(1 - torch.sigmoid(out["support"][b, m]))
              for b, m, y in pairs) / len(pairs)
    p_start = torch.softmax(out["start"][0], 0)
    lstart = -torch.log(p_start[f1_.start_targets].sum())  # only the span example counts
    p_end = torch.softmax(out["end"][0], 0)
    lend = -torch.log(p_end[f1_.end_targets].sum())
    assert parts["type"] == pytest.approx(float(lt), rel=1e-5)
    assert parts["support"] == pytest.approx(float(ls), rel=1e-5)
    assert parts["start"] == pytest.approx(float(lstart), rel=1e-5) and parts["end"] == pytest.approx(float(lend), rel=1e-5)
    assert float(total) == pytest.approx(float(lt + ls + lstart + lend) / 4, rel=1e-5)


def test_score_by_type_by_hand():
    from drkit.qa.answer import score

    records = [{"id": "1", "answers": ["Oslo"], "type": "a", "supporting": ["p1", "p2"]},
               {"id": "2", "answers": ["yes"], "type": "b", "supporting": ["p3"]},
               {"id": "3", "answers": ["Walter Lang"], "type": "a", "supporting": ["p4"]}]
    rows = [{"answer": "oslo", "supporting": [{"passage_id": "p1"}], "passages": [{"id": "p9"}, {"id": "p7"}, {"id": "p1"}],
             "entity_answer": "Oslo"},
            {"answer": "no", "supporting": [], "passages": [{"id": "p3"}], "entity_answer": None},
            {"answer": "Lang", "supporting": [{"passage_id": "p9"}], "passages": [{"id": "p4"}], "entity_answer": "X"}]
    for r, rec in zip(rows, records):
        r["em"], r["f1"] = best_scores(r["answer"], rec["answers"])
    got = score(records, rows)
    assert got["em"] == pytest.approx(1 / 3, abs=1e-4) and got["f1"] == pytest.approx((1 + 0 + 2 / 3) / 3, abs=1e-4)
    assert got["by_type"]["a"]["em"] == 0.5 and got["by_type"]["b"]["questions"] == 1
    assert got["entity_answer"]["em"] == pytest.approx(1 / 3, abs=1e-4)
    assert got["passage_recall_read"] == pytest.approx((0.5 + 1 + 1) / 3, abs=1e-4)
    assert got["supporting_in_gold_passages"] == 0.5
    # R@2 of the passages as read (p9, p7 first: no gold) and with the one holding a supporting sentence first
    assert got["passage_R@2"] == {"as_read": round(2 / 3, 4), "supporting_first": round((0.5 + 1 + 1) / 3, 4)}
    lo, hi = got["em_ci95"]
    assert lo <= got["em"] <= hi


@pytest.fixture(scope="module")
def reader_run(mixing_run, tiny_base):  # noqa: F811
    from drkit.reader.train import ReaderTrainConfig, train_reader

    d = mixing_run
    # without the hop questions (trained in test_training_resumes_from_its_last_checkpoint): the reading tests'
    # tiny reader stays the one they were written against
    config = ReaderTrainConfig(epochs=2, batch_size=4, checkpoint_every=3, log_every=1, hops=False, precision="fp32")
    path = train_reader(d / "corpus1.jsonl", d / "questions1.jsonl", d / "reader-run", None,
                        ReaderConfig(base=str(tiny_base), max_pieces=128), OrderConfig(passages=3), config,
                        log=lambda *a: None)
    return path


def test_training_writes_a_reader_that_loads_and_reads_the_same(reader_run):
    log = [json.loads(line) for line in (reader_run.parent / "train_log.jsonl").read_text().splitlines()]
    steps = json.loads((reader_run.parent / "done.json").read_text())["steps"]
    assert [r["step"] for r in log] == list(range(1, steps + 1))
    assert all(np.isfinite(r["loss"]) for r in log)
    assert (reader_run.parent / "curve.png").stat().st_size > 0
    reader = Reader.load(reader_run.parent)  # the run directory is accepted too
    again = Reader.load(reader_run)
    e = example()
    a, b = reader.read([e]), again.read([e])
    assert a == b and a[0].answer_type in ("span", "yes", "no")
    assert reader.manifest["format"] == "drkit.reader" and reader.manifest["training"]["questions"] == 32


def test_training_resumes_from_its_last_checkpoint(mixing_run, tiny_base, tmp_path, monkeypatch):  # noqa: F811
    from safetensors.torch import load_file

    from drkit.reader.train import ReaderTrainConfig, train_reader

    d = mixing_run
    config = ReaderTrainConfig(epochs=1, batch_size=8, checkpoint_every=2, log_every=1, precision="fp32")
    args = (d / "corpus1.jsonl", d / "questions1.jsonl")
    kw = dict(reader_config=ReaderConfig(base=str(tiny_base), max_pieces=96), order=OrderConfig(passages=2),
              config=config, log=lambda *a: None)
    whole = train_reader(*args, tmp_path / "whole", **kw)
    cut = train_reader(*args, tmp_path / "cut", **kw)
    # with the hop questions (the default): the 16 of the 32 questions read in two steps give two each
    assert json.loads((whole.parent / "done.json").read_text())["hop_questions"] == 32
    import shutil  # a crash after the step-2 checkpoint: the finished reader and the later checkpoints are gone

    shutil.rmtree(cut)
    (cut.parent / "done.json").unlink()
    kept = sorted((cut.parent / "checkpoints").glob("step-*"), key=lambda c: int(c.name.split("-")[1]))
    for c in kept[1:]:  # the earliest checkpoint kept (older ones are pruned as training goes on)
        shutil.rmtree(c)
    said = []
    train_reader(*args, tmp_path / "cut", **{**kw, "log": said.append})
    assert kept[0].name != "step-8" and any(f"resuming at {kept[0].name.replace('-', ' ')}" in s for s in said), said
    a, b = load_file(str(whole / "model.safetensors")), load_file(str(cut / "model.safetensors"))
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    with pytest.raises(Exception, match="other settings"):
        train_reader(*args, tmp_path / "cut", **{**kw, "config": ReaderTrainConfig(epochs=2, precision="fp32")})
    monkeypatch.chdir(tiny_base.parent)  # the base given by another path to the same folder: the same run
    said = []
    train_reader(*args, tmp_path / "cut", **{**kw, "reader_config": ReaderConfig(base=tiny_base.name, max_pieces=96),
                                              "log": said.append})
    assert any("already trained" in s for s in said), said
    run_json = tmp_path / "cut" / "run.json"  # a run made before one spelling was stored: its base as it was given
    saved = json.loads(run_json.read_text())
    saved["reader"]["base"] = tiny_base.name
    run_json.write_text(json.dumps(saved))
    said.clear()
    train_reader(*args, tmp_path / "cut", **{**kw, "log": said.append})
    assert any("already trained" in s for s in said), said
    with pytest.raises(Exception, match=r"base \(--base\): 'no-such-folder' is neither"):
        train_reader(*args, tmp_path / "cut", **{**kw, "reader_config": ReaderConfig(base="no-such-folder")})


def test_the_front_door_puts_the_passages_of_supporting_sentences_first(mixing_run, reader_run, monkeypatch):  # noqa: F811
    """With a reader, `DrKIT.answer`'s passages: those read that hold a supporting sentence first, each group in the
    retriever's order with the retriever's scores, then the rest; `retrieve` keeps the retriever's order and does not
    read. The reader here is a stub that supports the third passage read, so the order must change."""
    from drkit.qa.pipeline import DrKIT
    from drkit.reader.reading import Reading, Supporting

    d = mixing_run
    question = json.loads((d / "questions1.jsonl").read_text().splitlines()[0])["question"]
    plain = DrKIT.load(d / "index1", d / "run")
    ranked = plain.retrieve(question, 5)
    assert len(ranked) == 5
    kit = DrKIT.load(d / "index1", d / "run", reader=reader_run, reading=ReadConfig(passages=3, compare=False,
                                                                                    decompose=False))
    read = []

    def stub(examples, batch_size, compute=None, config=None):
        read.append([p.id for p in examples[0].passages])
        third = examples[0].passages[2]
        return [Reading("yes", "yes", 0.9, None, (Supporting(2, 0, third.id, third.text, 0.8),), {"yes": 0.9})]

    monkeypatch.setattr(kit.reader, "read", stub)
    ids = [p.id for p in ranked]
    assert [p.id for p in kit.retrieve(question, 5)] == ids and not read  # the retriever's order, nothing read
    two = kit.answer(question, passages=2)
    assert read == [ids[:3]] and [p.id for p in two.passages] == [ids[2], ids[0]]
    five = kit.answer(question, passages=5)
    assert [p.id for p in five.passages] == [ids[2], ids[0], ids[1], ids[3], ids[4]]
    assert [p.score for p in five.passages] == [ranked[i].score for i in (2, 0, 1, 3, 4)]
    assert [s.passage_id for s in five.reading.supporting] == [ids[2]]


def test_answer_cli_and_the_front_door_agree(mixing_run, reader_run, tmp_path, capsys):  # noqa: F811
    from drkit.qa.answer import supporting_first
    from drkit.qa.pipeline import DrKIT
    from drkit.reader.text import best_scores

    d = mixing_run
    out = tmp_path / "answers"
    assert main(["answer", "--index", str(d / "index1"), "--model", str(d / "run"), "--reader", str(reader_run),
                 "--questions", str(d / "questions1.jsonl"), "--out", str(out), "--passages", "3",
                 "--qps-sample", "2", "--precision", "fp32"]) == 0
    assert "answer EM" in capsys.readouterr().out
    questions = [json.loads(line) for line in (d / "questions1.jsonl").read_text().splitlines()]
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [q["id"] for q in questions]
    for r, q in zip(rows, questions):
        assert r["answer_type"] in ("span", "yes", "no") and len(r["passages"]) <= 3
        assert {s["passage_id"] for s in r["supporting"]} <= {p["id"] for p in r["passages"]}
        assert (r["em"], r["f1"]) == best_scores(r["answer"], q["answers"])
        assert "entity_answer" in r
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["em"] == pytest.approx(np.mean([r["em"] for r in rows]), abs=1e-4)
    assert set(metrics["by_type"]) == {"comparison", "compositional"}
    assert metrics["reader_ms_per_question_batch1"] > 0 and metrics["questions_per_s"] > 0
    # the timed sample (the first 2 questions): those the rules settled are counted, the others timed alone
    assert metrics["reader_batch1_sample_settled"] == sum("comparison" in r for r in rows[:2])
    assert (metrics.get("reader_ms_per_read_batch1", 0) > 0) == (metrics["reader_batch1_sample_settled"] < 2)
    # the front door with the reader reads the same passages and gives the same answer
    kit = DrKIT.load(d / "index1", d / "run", reader=reader_run, reading=ReadConfig(passages=3))
    result = kit.answer(questions[0]["question"], passages=2)
    assert len(result.passages) == 2 and result.reading is not None
    # its passages: those read with a supporting sentence first, as drkit answer's supporting_first orders them
    assert [p.id for p in result.passages] == supporting_first(rows[0])[:2]
    assert result.reading.text == rows[0]["answer"] and result.reading.type == rows[0]["answer_type"]
    assert [s.passage_id for s in result.reading.supporting] == [s["passage_id"] for s in rows[0]["supporting"]]
    assert (result.reading.comparison is not None) == ("comparison" in rows[0])
    if result.reading.comparison is not None:  # settled by the dates read: the answer is an option, not a span
        assert result.reading.comparison == rows[0]["comparison"] and result.reading.passage_id is None
        assert result.reading.text in [v["option"] for v in result.reading.comparison["values"]]
    elif result.reading.type == "span":
        passage = next(p for p in kit.retrieve(questions[0]["question"], 3) if p.id == result.reading.passage_id)
        source = passage.title if result.reading.in_title else passage.text
        assert source[result.reading.start : result.reading.end] == result.reading.text
    assert json.loads(json.dumps(result.to_dict()))["reading"]["text"] == result.reading.text
    # int8 reading: the kit reads with a quantised copy; the reader it was given stays fp32
    loaded = Reader.load(reader_run)
    from drkit.qa.pipeline import LoadConfig

    int8 = DrKIT.load(d / "index1", d / "run", config=LoadConfig(precision="fp32"), reader=loaded,
                      reading=ReadConfig(passages=3, reader_quantize="int8"))  # int8 reads in fp32
    assert int8.reader.quantize == "int8" and loaded.quantize == "none"
    assert int8.answer(questions[0]["question"], passages=2).reading is not None
    # a model computing in bf16 (as `auto` chooses on a CPU with AMX) keeps it; its int8 reader reads in fp32, as
    # drkit answer's does, instead of being refused
    bf16 = DrKIT.load(d / "index1", d / "run", config=LoadConfig(precision="bf16"), reader=loaded,
                      reading=ReadConfig(passages=3, reader_quantize="int8"))
    assert bf16.vkb.compute.precision == "bf16" and bf16.read_compute.precision == "fp32"
    assert bf16.read_compute.device.type == "cpu" and "int8 reader" in bf16.read_compute.reason
    assert bf16.answer(questions[0]["question"], passages=2).reading is not None
    # an int8 reader given as one reads as one, asked for or not; drkit serve's info says so
    given = DrKIT.load(d / "index1", d / "run", config=LoadConfig(precision="bf16"), reader=int8.reader)
    assert given.reader is int8.reader and given.read_compute.precision == "fp32"
    from drkit.serve.engine import Engine

    info = Engine.load(d / "index1", d / "run", reader=reader_run,
                       reading=ReadConfig(reader_quantize="int8")).info()["manifests"]["reader"]
    assert info["quantize"] == "int8" and info["compute"]["precision"] == "fp32"
    assert info["compute"]["device"] == "cpu" and "int8 reader" in info["compute"]["reason"]


def test_the_front_door_reads_as_its_read_config_says_as_the_cli_does(mixing_run, reader_run, tmp_path):  # noqa: F811
    from drkit.errors import ConfigError
    from drkit.qa.pipeline import DrKIT

    d = mixing_run
    flags = {"support_threshold": 0.05, "max_pieces": 80}
    out = tmp_path / "answers"
    assert main(["answer", "--index", str(d / "index1"), "--model", str(d / "run"), "--reader", str(reader_run),
                 "--questions", str(d / "questions1.jsonl"), "--out", str(out), "--passages", "3", "--qps-sample", "0",
                 "--precision", "fp32", "--support-threshold", "0.05", "--max-pieces", "80"]) == 0
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()]
    kits = {name: DrKIT.load(d / "index1", d / "run", reader=reader_run, reading=ReadConfig(passages=3, **kw))
            for name, kw in (("flags", flags), ("defaults", {}))}
    seen = []  # the word pieces the front door asks the reader to read
    featurize = kits["flags"].reader.featurize
    kits["flags"].reader.featurize = lambda e, **kw: seen.append(kw.get("max_pieces")) or featurize(e, **kw)
    said = {name: [kit.answer(q, passages=3).reading for q in questions] for name, kit in kits.items()}
    assert seen and set(seen) == {80}
    for row, reading in zip(rows, said["flags"]):
        assert (reading.text, reading.type) == (row["answer"], row["answer_type"])
        assert [(s.passage_id, s.sentence) for s in reading.supporting] == \
            [(s["passage_id"], s["sentence"]) for s in row["supporting"]]
    # a lower threshold keeps at least the sentences the default one keeps, and here more
    counts = {name: sum(len(r.supporting) for r in readings) for name, readings in said.items()}
    assert counts["flags"] > counts["defaults"]
    import drkit

    assert drkit.ReadConfig is ReadConfig
    for bad, match in (({"passages": 0}, "passages"), ({"support_threshold": 1.0}, "support_threshold"),
                       ({"max_pieces": 0}, "max_pieces")):
        with pytest.raises(ConfigError, match=match):
            ReadConfig(**bad)


def test_no_compare_reads_without_the_rules_in_the_cli_the_front_door_and_serve(mixing_run, reader_run,  # noqa: F811
                                                                                tmp_path):
    from drkit.serve.engine import Engine
    from drkit.serve.views import Request

    d = mixing_run
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()]
    assert main(["answer", "--index", str(d / "index1"), "--model", str(d / "run"), "--reader", str(reader_run),
                 "--questions", str(d / "questions1.jsonl"), "--out", str(tmp_path / "off"), "--qps-sample", "0",
                 "--no-compare"]) == 0
    cli_off = [json.loads(line) for line in (tmp_path / "off" / "predictions.jsonl").read_text().splitlines()]
    engines = [Engine.load(d / "index1", d / "run", reader=reader_run, reading=ReadConfig(compare=c)) for c in (True, False)]
    assert [e.info()["manifests"]["reader"]["compare"] for e in engines] == [True, False]
    assert [e.info()["manifests"]["reader"]["skip_bridges"] for e in engines] == [False, False]
    on, off = (e.run(questions, Request(top_k=5)) for e in engines)
    settled = [i for i, r in enumerate(on) if r["reading"] and r["reading"].get("comparison")]
    assert settled, "no question of the sample was settled by a comparison: the switch would be untested"
    assert not any(r["reading"] and r["reading"].get("comparison") for r in off)
    assert not any("comparison" in row for row in cli_off)
    # off, every answer is the reader's own (the CLI's too); where no rule settled it, on and off read alike
    assert [r["reading"]["answer"] if r["reading"] else "" for r in off] == [row["answer"] for row in cli_off]
    assert all(on[i]["reading"] == off[i]["reading"] for i in range(len(on)) if i not in settled)


def test_two_hop_questions_are_read_in_two_steps_unless_no_decompose(mixing_run, reader_run, tmp_path):  # noqa: F811
    from drkit.reader.decompose import Decomposer
    from drkit.serve.engine import Engine

    if Decomposer.shared() is None:
        pytest.skip("spaCy's English pipeline is not installed")
    d = mixing_run
    rows = {}
    for name, flags in (("on", []), ("off", ["--no-decompose"])):
        assert main(["answer", "--index", str(d / "index1"), "--model", str(d / "run"), "--reader", str(reader_run),
                     "--questions", str(d / "questions1.jsonl"), "--out", str(tmp_path / name), "--qps-sample", "0",
                     *flags]) == 0
        rows[name] = [json.loads(line) for line in (tmp_path / name / "predictions.jsonl").read_text().splitlines()]
    two = [r for r in rows["on"] if "steps" in r]
    assert two, "no question of the sample was read in two steps: the switch would be untested"
    assert all(r["question"].startswith("Where was the director of film ") for r in two)
    assert all(r["steps"]["inner"] == r["question"].replace("Where was", "What is").replace(" born?", "?") and
               r["steps"]["outer"] == f"Where was {r['steps']['bridge']} born?" for r in two)
    assert not any("steps" in r for r in rows["off"])
    metrics = {name: json.loads((tmp_path / name / "metrics.json").read_text()) for name in rows}
    assert (metrics["on"]["decompose"], metrics["on"]["decomposed"]) == (True, len(two))
    assert (metrics["off"]["decompose"], metrics["off"]["decomposed"]) == (False, 0)
    engines = [Engine.load(d / "index1", d / "run", reader=reader_run, reading=ReadConfig(decompose=x)) for x in (True, False)]
    assert [e.info()["manifests"]["reader"]["decompose"] for e in engines] == [True, False]


def test_ask_with_a_reader_prints_what_the_front_door_reads(mixing_run, reader_run, capsys):  # noqa: F811
    from drkit import DrKIT

    d = mixing_run
    question = next(json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()
                    if "director of film" in line)
    ask = ["ask", "--index", str(d / "index1"), "--model", str(d / "run"), "--reader", str(reader_run), question]
    assert main(ask + ["--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    kit = DrKIT.load(d / "index1", d / "run", reader=reader_run)
    reading = kit.answer(question, passages=5).reading
    assert printed["reading"]["text"] == reading.text and printed["reading"]["steps"] == reading.steps
    assert main(ask) == 0
    text = capsys.readouterr().out
    assert f"  reader: {reading.text or '(no answer)'}  (" in text
    assert ("read in two steps" in text) == (reading.steps is not None)
    assert main(ask + ["--no-decompose"]) == 0
    assert "read in two steps" not in capsys.readouterr().out
    assert main(ask[:-1] + ["--support-threshold", "2", question]) == 2  # a bad setting: a clear error, no trace
    assert "support_threshold must be in (0, 1)" in capsys.readouterr().err


def test_a_question_without_passages_is_answered_with_nothing(mixing_run, reader_run, tmp_path):  # noqa: F811
    d = mixing_run
    questions = [json.loads(line) for line in (d / "questions1.jsonl").read_text().splitlines()][:2]
    questions.append({"id": "none", "question": "Zzyzx qwv?", "answers": ["no"], "type": "comparison"})
    write_jsonl(tmp_path / "q.jsonl", questions)
    assert main(["answer", "--index", str(d / "index1"), "--model", str(d / "run"), "--reader", str(reader_run),
                 "--questions", str(tmp_path / "q.jsonl"), "--out", str(tmp_path / "o"), "--qps-sample", "0"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "o" / "predictions.jsonl").read_text().splitlines()]
    assert "no entity" in rows[2]["error"] and rows[2]["passages"] == []
    assert (rows[2]["answer"], rows[2]["answer_type"], rows[2]["em"]) == ("", None, 0.0)
    metrics = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert metrics["without_passages"] == 1 and metrics["errors"] == 1 and metrics["questions"] == 3
    assert best_scores("1922", [1922]) == (1.0, 1.0)


def test_answer_cli_names_a_bad_line_and_a_missing_reader(mixing_run, reader_run, tmp_path, capsys):  # noqa: F811
    d = mixing_run
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "question": "Who?"}\n{"id": "2"}\n{not json\n{"id": 4, "question": "Who directed it?"}\n'
                   '{"id": true, "question": "Who?"}\n')  # a whole-number id is taken, as drkit retrieve takes it
    base = ["answer", "--index", str(d / "index1"), "--model", str(d / "run"), "--out", str(tmp_path / "o")]
    assert main(base + ["--reader", str(reader_run), "--questions", str(bad)]) == 0  # as drkit retrieve: each bad
    assert f"skipped {bad}:2 (field 'question')" in capsys.readouterr().err  # line skipped, named and counted
    written = (tmp_path / "o" / "bad_lines.txt").read_text().splitlines()
    assert [line.split(" ")[0] for line in written] == [f"{bad}:2", f"{bad}:3:", f"{bad}:5"]
    assert "field 'id'" in written[2] and "or a whole number" in written[2]
    rows = [json.loads(line) for line in (tmp_path / "o" / "predictions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["1", "4"]
    assert json.loads((tmp_path / "o" / "metrics.json").read_text())["bad_lines"] == 3
    bad.write_text('{"id": "2"}\n')
    assert main(base + ["--reader", str(reader_run), "--questions", str(bad)]) == 2
    assert f"holds no questions that can be read (1 bad lines: {bad}:1 (field 'question')" in capsys.readouterr().err
    assert main(base + ["--reader", str(tmp_path / "nope"), "--questions", str(bad)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_train_reader_cli_refuses_supporting_ids_not_in_the_corpus(mixing_run, tiny_base, tmp_path, capsys):  # noqa: F811
    rows, questions = title_corpus(1)
    questions[3]["supporting"] = ["nope"]
    write_jsonl(tmp_path / "q.jsonl", questions)
    assert main(["train-reader", "--corpus", str(mixing_run / "corpus1.jsonl"), "--questions", str(tmp_path / "q.jsonl"),
                 "--out", str(tmp_path / "r"), "--base", str(tiny_base)]) == 2
    assert f"{tmp_path / 'q.jsonl'}:4 (field 'supporting')" in capsys.readouterr().err


def test_dates_are_compared_only_as_far_as_both_tell():
    from drkit.reader.examples import earlier, parse_date

    assert parse_date("December 24, 1886") == (1886, 12, 24) and parse_date("15 November 1911") == (1911, 11, 15)
    assert parse_date("1322") == (1322, 0, 0) and parse_date("unknown") is None
    assert earlier(parse_date("1 May 1900"), parse_date("2 May 1900")) is True
    assert earlier(parse_date("1901"), parse_date("2 May 1900")) is False
    assert earlier(parse_date("1900"), parse_date("2 May 1900")) is None  # the month of the first is not given
    assert earlier(parse_date("2 May 1900"), parse_date("May 2, 1900")) is None


def test_composed_questions_follow_from_the_triples():
    from drkit.data.kb import Triple
    from drkit.reader.examples import composed_sources, earlier, kb_sources, parse_date

    films = [("Alpha", "Ann Lee", "1950"), ("Beta", "Ann Lee", "1961"), ("Gamma", "Bo Kim", "1944"),
             ("Delta", "Cy Dow", "1971")]
    born = {"Ann Lee": "3 May 1901", "Bo Kim": "7 June 1899", "Cy Dow": "1 July 1930"}
    passages = [ReaderPassage(f"f{i}", f, f"{f} is a {y} film directed by {d}.") for i, (f, d, y) in enumerate(films)]
    passages += [ReaderPassage(f"p{i}", p, f"{p} was born on {b}.") for i, (p, b) in enumerate(born.items())]
    triples = [Triple(f, "director", d, i) for i, (f, d, _) in enumerate(films)]
    triples += [Triple(f, "publication date", y, 10 + i) for i, (f, _, y) in enumerate(films)]
    triples += [Triple(p, "date of birth", b, 20 + i) for i, (p, b) in enumerate(born.items())]

    def no_distractors(questions, gold, k):
        return [()] * len(questions)

    singles = kb_sources(triples, passages, no_distractors)
    assert len(singles) == len(triples) and singles[0].question == "What is the director of Alpha?"
    made = composed_sources(singles, seed=0)
    director = {f: d for f, d, _ in films}
    year = {f: y for f, _, y in films}
    kinds = {m.qtype for m in made}
    assert kinds == {"kb-same", "kb-compare", "kb-chain", "kb-bridge"}
    for m in made:
        if m.qtype == "kb-same":  # only the director relation has a shared object (Ann Lee)
            a, b = (g.title for g in m.gold)
            assert m.answers == (("yes",) if director[a] == director[b] else ("no",))
        elif m.qtype == "kb-compare":
            a, b = (g.title for g in m.gold)
            rel = "publication date" if a in year else "date of birth"
            value = (lambda t: year[t]) if a in year else (lambda t: born[t])
            first = a if earlier(parse_date(value(a)), parse_date(value(b))) else b
            assert m.answers == (first if "earlier" in m.question else ({a, b} - {first}).pop(),)
            assert rel in m.question
        elif m.qtype == "kb-chain":
            film, person = (g.title for g in m.gold)
            assert director[film] == person and m.answers == (born[person],)
            assert m.question == f"What is the date of birth of the director of {film}?"
        else:
            f1_, d1, f2, d2 = (g.title for g in m.gold)
            first = f1_ if earlier(parse_date(born[d1]), parse_date(born[d2])) else f2
            want = first if "earlier" in m.question else ({f1_, f2} - {first}).pop()
            assert m.answers == (want,) and director[f1_] == d1 and director[f2] == d2
    yes = sum(m.answers == ("yes",) for m in made)
    assert yes == sum(m.answers == ("no",) for m in made) > 0
    assert all(set(m.answers) <= {"yes", "no"} or any(find_all(g.title + " " + g.text, m.answers[0]) for g in m.gold)
               for m in made)


def test_layers_keeps_the_base_first_layers_and_saves_and_loads_them(tiny_base, tmp_path):
    from drkit.dense.encoder import load_transformer
    from drkit.errors import ConfigError

    cut = Reader.from_base(ReaderConfig(base=str(tiny_base), max_pieces=96, layers=1))
    whole = load_transformer(tiny_base)  # the base as it is, 2 layers
    assert len(cut.transformer.encoder.layer) == cut.transformer.config.num_hidden_layers == 1
    kept = cut.transformer.state_dict()
    assert {k for k in kept if ".layer.1." in k} == set()
    assert all(torch.equal(v, whole.state_dict()[k]) for k, v in kept.items())  # embeddings and layer 0 as the base's
    # the cut transformer computes what the base's first layer computes (reference: the base's own layers)
    ids = torch.tensor([[101, 2054, 2003, 102]])
    with torch.no_grad():
        ref = whole(input_ids=ids, output_hidden_states=True).hidden_states[1]
        got = cut.transformer(input_ids=ids).last_hidden_state
    assert torch.allclose(got, ref, atol=1e-6)
    cut.save(tmp_path / "r")
    again = Reader.load(tmp_path / "r")
    assert again.config.layers == 1 and len(again.transformer.encoder.layer) == 1
    e = example()
    assert again.read([e]) == cut.eval().read([e])
    assert len(Reader.from_base(ReaderConfig(base=str(tiny_base), max_pieces=96)).transformer.encoder.layer) == 2
    with pytest.raises(ConfigError, match="has 2"):
        Reader.from_base(ReaderConfig(base=str(tiny_base), max_pieces=96, layers=3))
    with pytest.raises(ConfigError, match="layers"):
        ReaderConfig(layers=-1)


def test_a_reader_run_made_before_layers_existed_resumes_as_all_layers(reader_run, tmp_path):
    import shutil

    from drkit.reader.train import ReaderTrainConfig, train_reader

    run = tmp_path / "old"
    shutil.copytree(reader_run.parent, run)
    settings = json.loads((run / "run.json").read_text())
    del settings["reader"]["layers"]
    (run / "run.json").write_text(json.dumps(settings))
    manifest = json.loads((run / "reader" / "manifest.json").read_text())
    del manifest["config"]["layers"]
    (run / "reader" / "manifest.json").write_text(json.dumps(manifest))
    d = reader_run.parent.parent
    config = ReaderTrainConfig(epochs=2, batch_size=4, checkpoint_every=3, log_every=1, hops=False, precision="fp32")
    said = []
    path = train_reader(d / "corpus1.jsonl", d / "questions1.jsonl", run, None,
                        ReaderConfig(base=settings["reader"]["base"], max_pieces=128), OrderConfig(passages=3), config,
                        log=said.append)
    assert said == [f"{run}: already trained"]
    assert Reader.load(path).config.layers == 0



def test_a_reader_run_made_before_bucketing_reads_as_batched_as_drawn(tmp_path):
    from drkit.errors import ConfigError
    from drkit.reader.train import ReaderTrainConfig
    from drkit.util.runs import as_saved

    section = dataclasses.asdict(ReaderTrainConfig())
    assert section.pop("bucket") == 16
    assert as_saved(ReaderTrainConfig, section).bucket == 0
    with pytest.raises(ConfigError, match="bucket"):
        ReaderTrainConfig(bucket=-1)
    # reproduce-2wiki keeps the batching of a reader run already there (one made before the setting: as drawn)
    from drkit.experiments.twowiki_reader import reader_train_config

    assert reader_train_config(tmp_path / "none", 3) == ReaderTrainConfig(epochs=3)
    (tmp_path / "run.json").write_text(json.dumps({"train": section}))
    assert reader_train_config(tmp_path, 2) == ReaderTrainConfig(epochs=2, bucket=0)
    (tmp_path / "run.json").write_text(json.dumps({"train": {**section, "bucket": 16}}))
    assert reader_train_config(tmp_path, 2).bucket == 16
    # one made before the hop questions trained without them, and resumes so
    del section["hops"]
    assert as_saved(ReaderTrainConfig, section).hops is False and ReaderTrainConfig().hops is True
    (tmp_path / "run.json").write_text(json.dumps({"train": section}))
    assert reader_train_config(tmp_path, 2) == ReaderTrainConfig(epochs=2, bucket=0, hops=False)


def test_an_int8_reader_is_a_quantised_copy_that_reads_as_the_fp32_one_nearly(reader_run, tmp_path):
    from drkit.errors import ConfigError
    from drkit.qa.answer import AnswerConfig, read_and_score

    reader = Reader.load(reader_run)
    int8 = reader.quantized()
    assert int8 is not reader and int8.quantize == "int8" and reader.quantize == "none"
    assert type(reader.transformer.encoder.layer[0].intermediate.dense) is torch.nn.Linear  # the original stays fp32
    assert type(int8.transformer.encoder.layer[0].intermediate.dense) is not torch.nn.Linear
    assert int8.quantized() is int8
    e = example()
    f = reader.featurize(e)
    with torch.no_grad():
        a, b = reader(**reader.batch([f])), int8(**int8.batch([f]))
    for key in ("type", "support"):
        assert torch.nn.functional.cosine_similarity(a[key].flatten(), b[key].flatten(), dim=0) > 0.99
    assert int8.read([e])[0].answer_type in ("span", "yes", "no")
    with pytest.raises(ConfigError, match="fp32"):
        reader.quantized("bf16")
    from drkit.reader.model import int8_compute

    assert int8_compute("auto").precision == "fp32" and int8_compute("fp32", "cpu").device.type == "cpu"
    with pytest.raises(ConfigError, match="pass --precision fp32 or auto"):
        int8_compute("bf16")
    with pytest.raises(ConfigError, match=r"the reader is on cuda \(pass --device cpu\)"):
        int8_compute("auto", "cuda")
    with pytest.raises(ConfigError, match="reader_quantize"):
        ReadConfig(reader_quantize="int4")
    # drkit answer's reading: the reader read as int8 (in fp32), the reader given left as it is
    records = [{"id": "q", "question": e.question, "answers": ["Walter Lang"]}]
    metrics = read_and_score(reader, records, [e.passages], tmp_path / "a", AnswerConfig(reader_quantize="int8"),
                             log=lambda *a: None)
    assert metrics["reader"]["quantize"] == "int8"
    assert metrics["reader"]["compute"].startswith("fp32 on cpu (an int8 reader")  # not "(as set)": auto chose it
    assert reader.quantize == "none"

def test_the_commands_reading_settings_are_their_readconfig():
    from drkit.qa.answer import AnswerConfig
    from drkit.reader.reading import ReadConfig
    from drkit.serve.config import ServeConfig

    got = AnswerConfig(passages=3, support_threshold=0.4, max_pieces=300, compare=False, skip_bridges=True,
                       decompose=False).reading()
    assert got == ReadConfig(3, 0.4, 300, compare=False, skip_bridges=True, decompose=False)
    assert AnswerConfig().reading() == ReadConfig() == ServeConfig().reading()
    assert ServeConfig(compare=False, decompose=False).reading() == ReadConfig(compare=False, decompose=False)


def test_fits_wants_balanced_brackets_and_the_kind_asked_for():
    from drkit.data.asked import asked_kinds
    from drkit.reader.decode import fits

    assert fits("Leo Fong", None) and fits("Leo Fong (actor)", None) and fits("", None)
    for text in ("Mladá Boleslav) is a Czech", "Constantin J. David (18 February 1886", "a] b [c", ")("):
        assert not fits(text, None), text
    when, where = asked_kinds("When was Leo Fong born?"), asked_kinds("Where was Leo Fong born?")
    assert fits("1968", when) and not fits("Canton", when) and fits("Canton", where) and not fits("1968", where)
    assert not fits("1143 – 1193), also", when)  # a date, but a bracket closes that never opened
    who = asked_kinds("Who is the father of Leo Fong?")
    assert fits("Leo Fong", who) and not fits("Leo Fong (actor)", who) and fits("Leo Fong (actor)", None)
    assert fits("Rockland, California", where) and not fits("Rockland, California, and died in Los Angeles", where)
    assert fits("1968 in film", None) and not fits("1968 in film", when)  # a date and more is not a date


def test_is_name_takes_capitals_numbers_and_particles_not_a_clause():
    from drkit.reader.decode import is_name

    for text in ("Edmund Grey, 1st Earl of Kent", "Prince Arthur, Duke of Connaught and Strathearn", "Stoke-on-Trent",
                 "d'Este", "Bishop's Stortford", "University of North Carolina at Chapel Hill", "Otto von Habsburg",
                 "la Riera de Gaià, Catalonia", "Hungarian- Australian", "北京", '"Weird Al" Yankovic', "Frankfurt am Main",
                 "Saint-Martin-de-Ré", "", "1968", "God's Gift to Women", "Return to Cabin by the Lake", "It'll Be Me"):
        assert is_name(text), text
    for text in ("Silvia Pinal and singer Enrique Guzmán", "Halton Region, just northwest of Toronto", "actor",
                 "Australian-American professional racing driver from Sydney", "Leo Fong (actor)",
                 "Carlos, Duke of Madrid, Carlist claimant to the throne of Spain", "Bosnia and herzegovina"):
        assert not is_name(text), text


def test_a_reading_row_read_with_other_settings_is_read_again(tmp_path):
    from drkit.experiments.steps import made_again
    from drkit.experiments.twowiki_reader import row_made_with
    from drkit.qa.answer import AnswerConfig

    questions = tmp_path / "dev.jsonl"
    questions.write_text('{"id": "q", "question": "When?"}\n')
    metrics = tmp_path / "metrics.json"

    def made(config=AnswerConfig(), trained=512):
        return row_made_with("sha", questions, None, config, trained)

    metrics.write_text(json.dumps({"em": 0.5, "made_with": made()}))
    assert not made_again(metrics, made(), log=lambda m: None)
    said = []
    assert made_again(metrics, made(AnswerConfig(span_checks=False)), log=said.append)
    assert "span_checks" in said[0]
    assert made_again(metrics, made(AnswerConfig(decompose=False)), log=lambda m: None)
    # the word pieces read are recorded as read: the default is 320 of a 512-piece reader's, all of a 96-piece one's
    assert made()["settings"]["max_pieces"] == 320 and made(trained=96)["settings"]["max_pieces"] == 96
    assert not made_again(metrics, made(AnswerConfig(max_pieces=320)), log=lambda m: None)
    assert made_again(metrics, made(AnswerConfig(max_pieces=512)), log=lambda m: None)
    earlier = made()
    earlier["settings"]["max_pieces"] = None  # read before 320 was the default: all the reader's 512
    metrics.write_text(json.dumps({"em": 0.5, "made_with": earlier}))
    assert made_again(metrics, made(), log=lambda m: None)
    earlier = made()
    earlier["span_checks_rules"] = 1  # read with the first rules (brackets and dates, no names)
    metrics.write_text(json.dumps({"em": 0.5, "made_with": earlier}))
    assert made_again(metrics, made(), log=lambda m: None)


def test_by_default_a_reader_reads_320_word_pieces_or_what_it_was_trained_with_where_fewer(tiny_base):
    from drkit.reader.model import Reader, ReaderConfig
    from drkit.reader.reading import READ_PIECES

    assert READ_PIECES == 320
    assert ReadConfig().pieces(512) == 320 and ReadConfig().pieces(96) == 96
    assert ReadConfig(max_pieces=400).pieces(512) == 400 and ReadConfig(max_pieces=400).pieces(96) == 400
    long = ReaderPassage("x", "Long", " ".join(f"Sentence number {i} is here." for i in range(200)))
    e = ReaderExample("q", "Who?", (long, example().passages[2]))
    wide = Reader.from_base(ReaderConfig(base=str(tiny_base), max_pieces=512, max_question_pieces=12,
                                         max_answer_pieces=6))
    seen = []
    featurize = wide.featurize
    wide.featurize = lambda x, **kw: seen.append(len(featurize(x, **kw).ids)) or featurize(x, **kw)
    for config in (ReadConfig(), ReadConfig(max_pieces=512), ReadConfig(max_pieces=200)):
        wide.read([e], 1, config=config)
    assert 319 <= seen[0] <= 320 and 511 <= seen[1] <= 512 and 199 <= seen[2] <= 200
    assert len(wide.featurize(e).ids) > 320  # featurize alone still reads all the reader was trained with


def test_without_spacy_the_reader_trains_without_hop_questions_and_says_so(mixing_run, monkeypatch, capsys):  # noqa: F811
    from drkit.reader.decompose import Decomposer
    from drkit.reader.train import ReaderTrainConfig, training_sources

    d = mixing_run
    args = (d / "corpus1.jsonl", d / "questions1.jsonl", None, OrderConfig(passages=2))
    if Decomposer.shared() is not None:  # with spaCy: 16 of the 32 questions give their two hops
        assert sum(s.alone for s in training_sources(*args, ReaderTrainConfig())[2]) == 32
    monkeypatch.setattr(Decomposer, "shared", classmethod(lambda cls: None))
    _, _, sources, _, _ = training_sources(*args, ReaderTrainConfig())
    assert sources and not any(s.alone or s.qtype.startswith("hop") for s in sources)
    assert "no hop questions" in capsys.readouterr().err
    assert training_sources(*args, ReaderTrainConfig(hops=False))[2] == sources


def test_balanced_facts_take_each_relation_in_turn_and_leave_out_the_known():
    from collections import Counter

    from drkit.data.kb import Triple
    from drkit.reader.examples import balanced_facts

    triples = [Triple(f"s{i}", "date of death", f"d{i}", i) for i in range(50)]
    triples += [Triple(f"p{i}", "place of birth", f"c{i}", 100 + i) for i in range(3)]
    triples += [Triple(f"f{i}", "director", f"m{i}", 200 + i) for i in range(10)]
    known = {("p0", "place of birth", "c0")}
    picked = balanced_facts(triples, 12, seed=0, known=known)
    assert Counter(t.relation for t in picked) == {"place of birth": 2, "director": 5, "date of death": 5}
    assert ("p0", "place of birth", "c0") not in {(t.subject, t.relation, t.object) for t in picked}
    assert len(set(picked)) == len(picked) and set(picked) <= set(triples)
    assert picked == balanced_facts(triples, 12, seed=0, known=known)  # seeded
    assert len(balanced_facts(triples, 1000, seed=1, known=known)) == len(triples) - 1  # all there are
    assert balanced_facts(triples, 0, seed=0) == []


def test_more_kb_adds_single_hop_questions_of_its_new_facts_last(mixing_run, tmp_path):  # noqa: F811
    from drkit.data.kb import read_kb
    from drkit.reader.examples import read_passages
    from drkit.reader.train import ReaderTrainConfig, training_sources

    d = mixing_run
    passages = read_passages(d / "corpus1.jsonl")
    # a KB of two facts, and a bootstrapped one holding them and three more, each object in its subject's passage
    facts = []
    for p in passages:
        words = [w for w in p.text.split() if w.isalpha() and w[0].isupper() and w not in p.title]
        if words:
            facts.append(f"{p.title}|mentions|{words[0]}")
        if len(facts) == 5:
            break
    assert len(facts) == 5
    (tmp_path / "kb.txt").write_text("\n".join(facts[:2]) + "\n")
    (tmp_path / "more.txt").write_text("\n".join(facts) + "\n")
    args = (d / "corpus1.jsonl", d / "questions1.jsonl", tmp_path / "kb.txt", OrderConfig(passages=2))
    config = ReaderTrainConfig(hops=False, compose=False)
    _, _, base, base_kb, _ = training_sources(*args, config)
    _, _, more, more_kb, _ = training_sources(*args, config, more_kb=tmp_path / "more.txt")
    assert more[:len(base)] == base  # the others, and their draws, as without
    added = more[len(base):]
    assert sorted(s.id for s in added) == ["more-3", "more-4", "more-5"]  # the facts --kb does not hold
    assert more_kb == base_kb + 3
    by_line = {t.line: t for t in read_kb(tmp_path / "more.txt")}
    for s in added:
        t = by_line[int(s.id.split("-")[1])]
        assert s.question == f"What is the mentions of {t.subject}?" and s.answers == (t.object,)
        assert s.gold[0].title == t.subject
    capped = training_sources(*args, ReaderTrainConfig(hops=False, compose=False, more_kb_questions=1),
                              more_kb=tmp_path / "more.txt")[2]
    assert len(capped) == len(base) + 1
