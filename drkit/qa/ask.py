"""Answering single questions with their reasoning chain (the ``drkit ask`` command).

For each hop the chain shows the most probable entities of Z_t and, for each, its supporting
mention: the retrieved mention with the highest logit among the entity's mentions, with its passage
(the mention marked ``[[...]]``) and the entity of Z_{t-1} whose TF-IDF passages reached it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from drkit.errors import ConfigError
from drkit.reason.model import MultiHopModel, model_dir_of
from drkit.reason.vkb import VirtualKB, check_model_index


@dataclass
class Support:
    entity: str
    prob: float
    mention: int
    passage: int
    article: str
    snippet: str  # passage text around the mention, the mention marked [[...]]
    via: str | None  # the Z_{t-1} entity whose top-mu passages include this passage


def load_for_questions(index_dir, model_dir, mentions_dir=None, searcher: str = "exact", **search_kwargs):
    """(model, virtual KB) ready to answer. `model_dir` is a model or a ``drkit train`` run holding one in
    ``model/``; the mention index defaults to the one the model was trained with."""
    model_dir = model_dir_of(model_dir)
    model = MultiHopModel.load(model_dir)
    mentions_dir = mentions_dir or model.manifest.get("mentions", {}).get("path")
    if not mentions_dir:
        raise ConfigError(f"{model_dir} does not name its mention index; pass --mentions")
    if not Path(mentions_dir).exists():
        raise ConfigError(f"the mention index {mentions_dir} the model was trained with does not exist; pass --mentions")
    vkb = VirtualKB.load(index_dir, mentions_dir, searcher, **search_kwargs)
    check_model_index(model.manifest, vkb)
    model.set_entities(vkb.entity_names)
    return model, vkb


def snippet(text: str, start: int, end: int, width: int = 110) -> str:
    lo, hi = max(0, start - width), min(len(text), end + width)
    return (("..." if lo else "") + text[lo:start] + "[[" + text[start:end] + "]]" + text[end:hi]
            + ("..." if hi < len(text) else "")).replace("\n", " ")


@torch.no_grad()
def ask(model: MultiHopModel, vkb: VirtualKB, question: str, hops: int | None = None, top: int = 5, chain_top: int = 3) -> dict:
    """Answers and reasoning chain of one question, as a JSON-ready dict. Raises `QuestionError`."""
    parsed = vkb.parse(question)
    outs = model([parsed.text], np.array([parsed.topic]), vkb, hops=hops, trace=True)
    index = vkb.index
    names = vkb.entity_names
    chain = []
    prev_ids, prev_probs = np.array([parsed.topic]), np.array([1.0])
    for t, out in enumerate(outs):
        ids, probs = out.z.row(0)
        tr = out.trace
        supports = []
        for e, p in zip(ids[:chain_top], probs[:chain_top]):
            slot = int(np.searchsorted(out.z.ids.numpy(), e))  # batch of one: slots are sorted entity ids
            cand = np.flatnonzero(tr.slot == slot)
            m = int(tr.mentions[cand[np.argmax(tr.logits[cand])]])
            _, passage, _, _, c0, c1 = (int(x) for x in index.mentions[m])
            via = _via(vkb, model, t, prev_ids, prev_probs, passage, e)
            supports.append(Support(names[e], float(p), m, passage, index.article_titles[int(index.passage_article[passage])],
                                    snippet(index.passage_text(passage), c0, c1), via).__dict__)
        chain.append({"hop": t + 1, "entities": int(len(ids)), "top": supports})
        prev_ids, prev_probs = ids, probs
    ids, probs = outs[-1].z.row(0)
    return {"question": question, "question_entity": parsed.topic_name, "found_by": parsed.how,
            "hops": len(outs), "answers": [{"entity": names[e], "prob": round(float(p), 5)} for e, p in zip(ids[:top], probs[:top])],
            "chain": chain}


def _via(vkb: VirtualKB, model: MultiHopModel, t: int, prev_ids, prev_probs, passage: int, entity: int) -> str | None:
    """The entity of Z_{t-1} that weighs most in ``(Z^T A)`` at `passage`: its probability times its
    A weight there (the mention's own entity excluded unless A has self-loops)."""
    graph = vkb.graph
    power = float(model.tfidf_power[t].clamp_min(0)) if model.config.learn_tfidf_power else model.follow_config.tfidf_power
    best, best_w = None, 0.0
    for pe, pp in zip(prev_ids, prev_probs):
        if pe == entity and not model.follow_config.self_loops:
            continue
        key = pe * graph.n_passages + passage
        pos = int(np.searchsorted(graph.ep_keys, key))
        if pos < len(graph.ep_keys) and graph.ep_keys[pos] == key:
            w = float(pp) * float(np.exp(power * float(graph.ep_log_rel[pos])))
            if w > best_w:
                best, best_w = pe, w
    return None if best is None else vkb.entity_names[best]


def format_answer(result: dict) -> list[str]:
    lines = [f"Q: {result['question']}",
             f"   question entity: {result['question_entity']} ({result['found_by']}); {result['hops']} hop(s)"]
    if not result["answers"]:
        lines.append("   no answer: no retrieved mention co-occurs with the question entity")
    for i, a in enumerate(result["answers"], 1):
        lines.append(f"  {i}. {a['entity']}  ({a['prob']:.3f})")
    lines.append("  reasoning chain:")
    for hop in result["chain"]:
        lines.append(f"   hop {hop['hop']} ({hop['entities']} entities):")
        for s in hop["top"]:
            via = f" via {s['via']}" if s["via"] else ""
            lines.append(f"     {s['entity']} ({s['prob']:.3f}){via}, in \"{s['article']}\":")
            lines.append(f"        {s['snippet']}")
    return lines
