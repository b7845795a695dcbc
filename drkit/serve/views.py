"""What goes in and out of the API, below `drkit.serve.engine` which computes it: the keys a batch shares
(`Request`, `EntityLookup`, `InfoLookup`) and their checks; results made JSON-ready (a reasoning chain, a
reader's answer, an entity's passages); manifests with the server's paths cut (`redacted`)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from drkit.errors import ConfigError
from drkit.qa.results import Evidence

ANSWERS = "answers"  # a multi-hop model: answers and chain
PASSAGES = "passages"  # a hop-mixing model: also the ranked passages and pi
MAX_TOP_K = 100


class EngineUnavailable(RuntimeError):
    """The model cannot answer now (its process has exited or stopped answering); the server says 503."""


@dataclass(frozen=True)
class Request:
    """The settings a batch shares: requests are batched together only when these are equal."""

    top_k: int = 5
    hops: int | None = None
    chain: bool = True


@dataclass(frozen=True)
class EntityLookup:
    """The key of a batch of entity ids: each gets `entity_passages` (its first `limit` passages)."""

    limit: int = 10


@dataclass(frozen=True)
class InfoLookup:
    """The key of a batch of one item (ignored): what is served, `Engine.info`."""


def check_request(kind: str, max_hops: int, request: Request) -> None:
    """`ConfigError` naming the field when `request` cannot be run by a model of `kind` with `max_hops` hops."""
    if not 1 <= request.top_k <= MAX_TOP_K:
        raise ConfigError(f"top_k: must be between 1 and {MAX_TOP_K}, got {request.top_k}")
    if request.hops is not None:
        if kind == PASSAGES:
            raise ConfigError(f"hops: this hop-mixing model weighs 0..{max_hops} hops itself (pi); leave hops out")
        if not 1 <= request.hops <= max_hops:
            raise ConfigError(f"hops: this model has {max_hops} trained hops; got {request.hops}")


def evidence_dict(ev: Evidence) -> dict:
    return {"mention_id": ev.mention_id, "passage_id": ev.passage_id, "title": ev.title, "text": ev.text,
            "start": ev.start, "end": ev.end}


def chain_dicts(result) -> list[dict]:
    """The reasoning chain of a `drkit.qa.results.Result` as the API returns it."""
    return [{"hop": h.hop, "n_entities": h.n_entities, "entities": [
        {"entity": e.entity, "entity_id": e.entity_id, "score": e.prob,
         "via": e.evidence.via if e.evidence is not None else None,
         "evidence": evidence_dict(e.evidence) if e.evidence is not None else None} for e in h.top]}
        for h in result.chain]


def reading_dict(reading) -> dict:
    """The reader's answer of a result as the API returns it: ``answer``, ``type`` (span, yes, no), ``prob``, the
    span's ``passage_id``, ``in_title``, ``start``, ``end``; ``supporting`` sentences (``passage_id``, ``title``,
    ``sentence``, ``text``, ``prob``, ``start``, ``end`` in the passage text); ``evidence``: the passages read that
    hold the span or a supporting sentence (``id``, ``title``, ``text``); ``comparison`` when the comparison rules
    answered, ``steps`` (``inner``, ``bridge``, ``outer``) when a two-hop question was read in two steps."""
    out = dataclasses.asdict(reading)
    out["answer"] = out.pop("text")
    out["evidence"] = [{"id": p.id, "title": p.title, "text": p.text} for p in reading.evidence]
    return out


def sha256_of(path: Path) -> str | None:
    """The sha256 of the file at `path` (None when there is none)."""
    if not path.is_file():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_HIDDEN = ("command", "argv", "cwd", "hostname", "model_process")
_PATH_IN_TEXT = re.compile(r"(?<![\w:])(?:\.{0,2}/|~/)?(?:[^\s/'\"]+/)+([^\s/'\":]+)")


def redacted(manifest):
    """`manifest` without what tells a caller about the server's machine: command lines and process ids are
    dropped, and every value that is a file path (a string with a slash and no space, not a URL) is cut to its
    last part. For ``/v1/info`` unless the server was asked to show them."""
    if isinstance(manifest, dict):
        return {k: redacted(v) for k, v in manifest.items() if k not in _HIDDEN}
    if isinstance(manifest, list):
        return [redacted(v) for v in manifest]
    if isinstance(manifest, str) and "/" in manifest and "://" not in manifest:
        if not any(c.isspace() for c in manifest):
            return Path(manifest).name or manifest
        return _PATH_IN_TEXT.sub(lambda m: m.group(1), manifest)  # a path inside a sentence (a warning)
    return manifest


def entity_passages(index, entity_id: int, limit: int = 10) -> dict:
    """The passages of `index` (a `SparseIndex`) that mention entity `entity_id` (the first `limit`, in corpus
    order), each with the character offsets of its mentions, and its page (the articles titled by it) where it
    has one."""
    if not 0 <= entity_id < index.n_entities:
        raise ConfigError(f"entity_id: must be between 0 and {index.n_entities - 1}, got {entity_id}")
    indptr = index.entity_mention_indptr
    mention_ids = np.asarray(index.entity_mentions[indptr[entity_id]:indptr[entity_id + 1]])
    rows = np.asarray(index.mentions[mention_ids]) if len(mention_ids) else np.zeros((0, 6), dtype=np.int64)
    mentioning = np.unique(rows[:, 1])  # sorted: corpus order
    keep = np.isin(rows[:, 1], mentioning[:limit])
    passages: dict[int, list] = {}
    for m, row in zip(mention_ids[keep].tolist(), rows[keep].tolist()):
        passages.setdefault(row[1], []).append({"mention_id": m, "start": row[4], "end": row[5]})
    page_indptr, page_articles = index.entity_pages
    pages = [int(a) for a in page_articles[page_indptr[entity_id]:page_indptr[entity_id + 1]]]
    return {"entity": index.entities.names[entity_id], "entity_id": entity_id, "mentions": int(len(mention_ids)),
            "passages_mentioning": int(len(mentioning)),
            "passages": [{"passage_id": p, "title": index.article_titles[int(index.passage_article[p])],
                          "text": index.passage_text(p), "mentions": ms} for p, ms in sorted(passages.items())],
            "page": [{"id": index.article_keys[a], "title": index.article_titles[a]} for a in pages]}
