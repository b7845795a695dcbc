"""The parts of `DrKITRetriever.retrieve` written for speed (the chain's evidence, each passage's hop) against the
plain loops they replace, on a trained hop-mixing model's real output."""

import numpy as np
import pytest
import torch
from test_retrieve import mixing_run, title_corpus, write_jsonl  # noqa: F401  (mixing_run: a fixture)

from drkit.qa.drkit_retriever import DrKITRetriever, _by_row
from drkit.reason.train_mixing import linked_entity_set


def _evidence_reference(retriever, z, trace, chain_ids):
    """Row by row, entity by entity, reading the index one mention at a time; the best mention of a slot by a
    sort (highest logit, then the earliest)."""
    index = retriever.vkb.index
    slot, logits, mentions = trace.slot, trace.logits, trace.mentions
    best = np.full(len(z), -1, dtype=np.int64)
    if len(slot):
        order = np.lexsort((-logits, slot))
        first = np.ones(len(order), dtype=bool)
        first[1:] = slot[order][1:] != slot[order][:-1]
        best[slot[order][first]] = mentions[order][first]
    out = []
    for b in range(z.batch_size):
        ids = z.ids.numpy()[z.rows.numpy() == b].tolist()
        offset = int(np.sum(z.rows.numpy() < b))
        row = []
        for e in chain_ids[b].tolist():
            m = int(best[offset + ids.index(e)]) if e >= 0 and e in ids else -1
            if m < 0:
                row.append(None)
                continue
            _, passage, _, _, c0, c1 = (int(x) for x in index.mentions[m])
            article = int(index.passage_article[passage])
            row.append({"passage": retriever.pages.keys[article], "title": retriever.pages.titles[article],
                        "mention": index.passage_text(passage)[c0:c1], "mention_id": m})
        out.append(row)
    return out


def _hops_reference(sets, pi_row, b, entities):
    best = {}
    for t, z in enumerate(sets):
        e_ids, e_probs = z.row(b)
        for e, p in zip(e_ids.tolist(), e_probs.tolist()):
            if e in entities and (e not in best or pi_row[t] * p > best[e][0]):
                best[e] = (pi_row[t] * p, t)
    return {e: t for e, (_, t) in best.items()}


def test_evidence_and_hops_are_the_plain_loops(mixing_run):  # noqa: F811
    import json

    d = mixing_run
    r = DrKITRetriever.load(d / "index1", d / "run")
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()]
    linked = r.linker.link(questions)
    with torch.no_grad():
        out = r.model(questions, linked_entity_set(linked), r.vkb, precision=r.precision, trace=True,
                      named=linked.named(), answers=False)
    checked = 0
    for z, trace in zip(out.z, out.traces):
        if trace is None:
            continue
        for k in (1, 3, 8):
            chain_ids, _ = z.top(k)
            got = r._evidence(z, trace, chain_ids)
            assert got == _evidence_reference(r, z, trace, chain_ids)
            checked += sum(x is not None for row in got for x in row)
    assert checked > 0
    pi = out.pi.detach().double().numpy()
    hop_rows = [_by_row(z) for z in out.z]
    for b in range(len(questions)):
        everything = set(out.z_star.ids.numpy()[out.z_star.rows.numpy() == b].tolist())
        for entities in (everything, set(list(everything)[::2]), set()):
            assert r._hops(hop_rows, pi[b], b, entities) == _hops_reference(out.z, pi[b], b, entities)


def test_the_answer_pass_reuses_the_questions_layers_to_the_bit(mixing_run, monkeypatch):  # noqa: F811
    """The entity answer's pass given the passages pass's encoded questions (`MixOutput.encoded`: the shared layers
    and each hop's Z-free part, `EncodedQuestions.hop_bases`) gives what it gives computing them itself."""
    import json

    from drkit.reason.train_mixing import named_entity_set

    d = mixing_run
    r = DrKITRetriever.load(d / "index1", d / "run")
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()]
    linked = r.linker.link(questions)
    with torch.no_grad():
        out = r.model(questions, linked_entity_set(linked), r.vkb, precision="fp32", named=linked.named())
        assert set(out.encoded[0].hop_bases) == set(range(r.model.config.hops))
        alone = r.model.answer(questions, named_entity_set(linked), r.vkb, precision="fp32", named=linked.named())
        calls = []  # what the answer pass computes itself when given the encoding: no shared layer, no hop it had
        base = r.model.base
        for owner, name in ((base, "encode"), (base.encoder, "hop_base")):
            inner = getattr(owner, name)
            monkeypatch.setattr(owner, name, lambda *a, _inner=inner, _name=name: calls.append(_name) or _inner(*a))
        reused = r.model.answer(questions, named_entity_set(linked), r.vkb, precision="fp32", named=linked.named(),
                                encoded=out.encoded)
        head = r.model.config.answer_head  # the answer head's hop (T) is not one of the passages pass's
        assert calls == ["hop_base"] * (len(out.encoded[0].hs) if head else 0)
        with pytest.raises(ValueError, match="encoded holds"):
            r.model.answer(questions[:-1], named_entity_set(linked), r.vkb, named=linked.named(), encoded=out.encoded)
        with pytest.raises(ValueError, match="computed in fp32, not the bf16"):  # another precision: not reused
            r.model.answer(questions, named_entity_set(linked), r.vkb, precision="bf16", named=linked.named(),
                           encoded=out.encoded)
    assert len(alone.ids) > 0
    for a, b in ((alone.rows, reused.rows), (alone.ids, reused.ids), (alone.probs, reused.probs)):
        assert torch.equal(a, b)


def test_a_hops_query_from_its_kept_part_is_the_query_computed_whole(mixing_run):  # noqa: F811
    import json

    d = mixing_run
    r = DrKITRetriever.load(d / "index1", d / "run")
    base = r.model.base
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()]
    z = linked_entity_set(r.linker.link(questions))
    with torch.no_grad():
        enc = base.encode(questions, "fp32")
        z_emb = base.entity_embedding(z)
        for t in range(base.config.hops):
            whole = torch.cat([base.encoder.hop_query(h, m, t, z_emb[g]) for h, m, g in
                               zip(enc.hs, enc.masks, enc.groups)])[enc.inverse].float()
            for _ in range(2):  # computed, then read from enc.hop_bases
                assert torch.equal(base.hop_queries(enc, t, z), whole)
        assert set(enc.hop_bases) == set(range(base.config.hops))
