"""The sparse part of the virtual KB: A_{E->M} (entity -> co-occurring mentions) and B_{M->E}.

For entity e with surface-form vector G(e) and passage vectors F(d) (see `drkit.index.tfidf`), the
passages d with the `mu` highest scores S(e, d) > epsilon are kept, and every mention m in them gets
``A[e, m] = S(e, d_m)``. S is the TF-IDF score G(e).F(d), except that for an entity the linker found
in some passage, a passage where it was not found scores ``unlinked_weight`` times G(e).F(d): a
TF-IDF search for a name also returns passages that share only some of its words ("God Is Brazilian"
for "God's Not Dead"), and the linked ones, which hold the whole name, come first. With
``unlinked_weight = 1`` S is the paper's G(e).F(d). The follow uses A as the paper's indicator
``1{S > epsilon}`` or weighted by ``S / max_d S(e, d)`` (see `drkit.reason.follow`). ``B[m] = e_m`` is each
mention's entity.

The index stores EP (each entity's top-mu passages and their scores), not A: A is EP with every
passage replaced by its mentions, derived when asked (`drkit.index.csr`, which also holds
`ragged_expand`, ``Z^T A`` for a batch of sparse entity sets by slicing only their rows).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np
import scipy.sparse as sp

from drkit.data.kb import EntityTable
from drkit.errors import ArtifactError, ConfigError
from drkit.index.csr import DerivedA, a_matrix, mention_incidence, passage_mention_indptr, ragged_expand
from drkit.index.linking import LinkedCorpus, MentionColumns
from drkit.index.live import CURRENT, SEGMENTS, apply_live_view, read_state
from drkit.index.tfidf import NgramHasher, document_frequency, idf_weights, keep_columns, tfidf
from drkit.util.artifact import load_array, read_jsonl, read_manifest
from drkit.util.progress import progress

FORMAT = "drkit.sparse_index"
FORMAT_VERSION = 2  # 2: A_{E->M} no longer stored (derived from EP); version 1 indexes are read too


@dataclass(frozen=True)
class SparseConfig:
    """Settings of the TF-IDF entity -> mention expansion A_{E->M}."""

    mu: int = field(default=50, metadata={"help": "passages kept per entity (top mu by TF-IDF score)"})
    epsilon: float = field(default=0.0, metadata={"help": "keep a passage only if its score S(e, d) > epsilon"})
    hash_buckets: int = field(default=1 << 24, metadata={"help": "hash space of the unigram+bigram TF-IDF"})
    ngram: int = field(default=2, metadata={"help": "longest n-gram in TF-IDF vectors"})
    unlinked_weight: float = field(default=0.5, metadata={"help": "for an entity the linker found somewhere, the "
                                   "TF-IDF score of a passage where it was not found is multiplied by this (1: the "
                                   "paper's plain TF-IDF)"})

    def __post_init__(self):
        if self.mu < 1:
            raise ConfigError(f"mu must be at least 1, got {self.mu}")
        if self.epsilon < 0:
            raise ConfigError(f"epsilon must be at least 0 (passages sharing no n-gram score 0), got {self.epsilon}")
        if self.hash_buckets < 2 or self.ngram < 1:
            raise ConfigError("hash_buckets must be at least 2 and ngram at least 1")
        if not 0 <= self.unlinked_weight <= 1:
            raise ConfigError(f"unlinked_weight must be between 0 and 1, got {self.unlinked_weight}")


@dataclass
class SparseMatrices(DerivedA):
    """What `build_sparse_matrices` computes. Row-compressed arrays, as scipy CSR uses them.

    A_{E->M} itself is not kept: it is EP with each passage replaced by its mentions, so it is derived
    from EP when asked for (`A_indptr`, `A_indices`, `A_data`; tens of millions of entries on MetaQA,
    which the follow never reads)."""

    entity_passage_indptr: np.ndarray  # (E+1,) int64
    entity_passage: np.ndarray  # (nnz_EP,) int32, passage ids in increasing order within a row
    entity_passage_score: np.ndarray  # (nnz_EP,) float32, S(e, d): G(e).F(d), scaled where e is linked elsewhere
    mention_indptr: np.ndarray  # (P+1,) int64, passage p holds mentions [indptr[p], indptr[p+1])
    df_buckets: np.ndarray  # (n_buckets_used,) int64, hash buckets seen in the passages
    df_counts: np.ndarray  # (n_buckets_used,) int32, their document frequencies
    n_entities_without_terms: int = 0

    @property
    def passage_mention_indptr(self) -> np.ndarray:
        return self.mention_indptr


def top_passages(G: sp.csr_matrix, F: sp.csr_matrix, mu: int, epsilon: float, block: int = 1024,
                 linked: sp.csr_matrix | None = None, unlinked_weight: float = 1.0, budget: int = 1 << 24,
                 row_linked: np.ndarray | None = None):
    """For each row of G, the top-`mu` columns of S = G F^T with value > epsilon.

    `linked` (rows of G x passages, non-zero where the entity was linked in the passage): in a row
    with a linked passage, S of every other passage is multiplied by `unlinked_weight`. `row_linked` (rows of G,
    bool): which rows count as linked somewhere, when that is more than `linked` shows (the passages of a
    segment added to an index whose other passages link the entity; `drkit.index.segments`).
    Ties are broken by the lower passage id. Returns CSR arrays (indptr, passage ids sorted within
    each row, scores). A negative `epsilon` is refused: a zero score is never stored, so it cannot be kept.

    Rows are scored in blocks of at most `block` rows whose product holds at most about `budget` entries
    (bounded by the sum of the document frequencies of each row's terms; a row over the budget alone):
    memory stays O(budget + passages) however common the names' words are. A row's scores do not
    depend on its block.
    """
    if epsilon < 0:
        raise ConfigError(f"epsilon must be at least 0 (passages sharing no n-gram score 0), got {epsilon}")
    FT = sp.csr_matrix(F.T)
    G = sp.csr_matrix(G)
    df = np.diff(FT.indptr).astype(np.int64)  # passages holding each term
    bound = np.add.reduceat(np.append(df[G.indices], 0), G.indptr[:-1]) if G.nnz else np.zeros(G.shape[0], np.int64)
    bound = np.where(np.diff(G.indptr) > 0, bound, 0)  # (E,) at least the entries of the row's S
    starts = _blocks(bound, block, budget)
    indptr = [np.zeros(1, dtype=np.int64)]
    cols, vals = [], []
    running = 0
    for lo, hi in progress(list(zip(starts[:-1], starts[1:])), desc="tf-idf top-mu", unit="block"):
        S = (G[lo:hi] @ FT).tocsr()  # (block, P)
        S.sum_duplicates()
        if linked is not None and unlinked_weight != 1:
            L = linked[lo:hi].astype(bool).astype(np.float32)
            row_is_linked = L.getnnz(axis=1) > 0 if row_linked is None else np.asarray(row_linked[lo:hi], dtype=bool)
            row_weight = np.where(row_is_linked, unlinked_weight, 1.0)
            on_links = sp.csr_matrix(S.multiply(L))
            S = (on_links + sp.diags(row_weight.astype(np.float32)) @ (S - on_links)).tocsr()  # linked scores unchanged
            S.sum_duplicates()
        counts = np.zeros(hi - lo, dtype=np.int64)
        block_cols, block_vals = [], []  # concatenated per block: no two arrays per row kept over millions of rows
        for r in range(hi - lo):  # per row: cheaper than one sort of the whole block (most rows are short)
            a, b = S.indptr[r], S.indptr[r + 1]
            p, v = S.indices[a:b], S.data[a:b]
            keep = v > epsilon
            p, v = p[keep], v[keep]
            if len(p) > mu:
                order = np.lexsort((p, -v))[:mu]  # best score first, then the lower passage id
                p, v = p[order], v[order]
            order = np.argsort(p, kind="stable")
            block_cols.append(p[order].astype(np.int32))
            block_vals.append(v[order].astype(np.float32))
            counts[r] = len(p)
        cols.append(np.concatenate(block_cols))
        vals.append(np.concatenate(block_vals))
        indptr.append(running + np.cumsum(counts))
        running += int(counts.sum())
    cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)  # noqa: E731
    return cat(indptr, np.int64), cat(cols, np.int32), cat(vals, np.float32)


def _blocks(bound: np.ndarray, rows: int, budget: int) -> np.ndarray:
    """Block boundaries over the rows: consecutive rows, at most `rows` of them, whose `bound`s sum to at most
    `budget` (a row over it alone). Returns (n_blocks + 1,) starts, from 0 to len(bound)."""
    starts = [0]
    n = len(bound)
    csum = np.concatenate(([0], np.cumsum(bound)))
    while starts[-1] < n:
        lo = starts[-1]
        hi = int(np.searchsorted(csum, csum[lo] + budget, side="right")) - 1  # the most rows within the budget
        starts.append(min(n, lo + rows, max(hi, lo + 1)))
    return np.array(starts, dtype=np.int64)


def build_sparse_matrices(linked: LinkedCorpus, entities: EntityTable, config: SparseConfig = SparseConfig()
                          ) -> SparseMatrices:
    """TF-IDF vectors of passages and entity names, then A_{E->M}, of a corpus linked in memory; see the
    module docstring (`drkit.index.build` counts a corpus run by run and calls `sparse_from_counts`)."""
    hasher = NgramHasher(config.hash_buckets, config.ngram)
    counts = hasher.count_matrix(progress(linked.passage_texts, desc="tf-idf passages", unit="passage"))
    return sparse_from_counts([counts], document_frequency(counts), linked.n_passages, linked.mentions, entities,
                              config)


def sparse_from_counts(count_runs: Iterable[sp.csr_matrix], df: np.ndarray, n_passages: int,
                       mentions: np.ndarray, entities: EntityTable, config: SparseConfig,
                       idf: np.ndarray | None = None, row_linked: np.ndarray | None = None) -> SparseMatrices:
    """`build_sparse_matrices` from the passages' n-gram counts given run by run (`count_runs`: the counts of
    consecutive runs of passages, in order, read once; `df`: their document frequencies) and the (M, 6)
    mentions.

    Only the terms of some entity name can score (S = G F^T), so F keeps only those columns: the same
    products, bit for bit (F's rows are not normalised, so a dropped column changes nothing that is kept),
    and memory that follows the names' terms rather than every n-gram of the corpus.

    `idf`: weights to use instead of those of `df` (a segment added to an index is scored with the base's,
    `drkit.index.segments`); `row_linked`: see `top_passages`."""
    idf = idf_weights(df, n_passages) if idf is None else idf
    G = tfidf(NgramHasher(config.hash_buckets, config.ngram).count_matrix(entities.keys), idf, normalize=True)  # (E, H)
    n_without_terms = int(np.sum(np.diff(G.indptr) == 0))
    name_terms = np.zeros(config.hash_buckets, dtype=bool)
    name_terms[G.indices] = True
    F = sp.vstack([tfidf(keep_columns(c, name_terms), idf) for c in count_runs], format="csr")  # (P, H)
    mention_entity, mention_passage = mentions[:, 0], mentions[:, 1]
    entity_passage_links = mention_incidence(mention_entity, mention_passage, len(entities), n_passages)
    entity_passage_indptr, entity_passage, entity_passage_score = top_passages(
        G, F, config.mu, config.epsilon, linked=entity_passage_links, unlinked_weight=config.unlinked_weight,
        row_linked=row_linked)
    del F, G, entity_passage_links
    mention_indptr = passage_mention_indptr(mention_passage, n_passages)  # (P+1,)
    used = np.flatnonzero(df)
    return SparseMatrices(entity_passage_indptr, entity_passage, entity_passage_score, mention_indptr,
                          used.astype(np.int64), df[used].astype(np.int32), n_without_terms)


class SparseIndex(DerivedA, MentionColumns):
    """A built sparse index, loaded read-only (arrays memory-mapped). See `drkit.index.build.build_index`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.manifest = read_manifest(self.path, FORMAT, FORMAT_VERSION)
        # an index built before unlinked_weight existed ranked passages by plain TF-IDF
        self.config = SparseConfig(**{"unlinked_weight": 1.0, **self.manifest["config"]["sparse"]})
        self.entities = EntityTable.from_records(read_jsonl(self.path, "entities.jsonl"))
        self.mentions = load_array(self.path, "mentions")  # (M, 6), columns LinkedCorpus.MENTION_COLUMNS
        self.entity_passage_indptr = load_array(self.path, "entity_passage_indptr")
        self.entity_passage = load_array(self.path, "entity_passage")
        self.entity_passage_score = load_array(self.path, "entity_passage_score")
        self.passage_article = load_array(self.path, "passage_article")
        self.piece_offsets = load_array(self.path, "piece_offsets")
        self.pieces = load_array(self.path, "pieces")
        self._text_offsets = load_array(self.path, "passage_text_offsets")
        self._text = np.memmap(self.path / "passage_text.bin", dtype=np.uint8, mode="r") \
            if self._text_offsets[-1] > 0 else np.zeros(0, np.uint8)
        self.live = None  # what the live view of a grown index was made from (`drkit.index.live.LiveInfo`)
        if (self.path / CURRENT).exists() or (self.path / SEGMENTS).is_dir():
            state = read_state(self.path)  # a lost CURRENT beside segments is an error, not the base alone
            if state["segments"] or state["removed"]:
                apply_live_view(self, state)  # base + segments - removed articles, in memory

    @classmethod
    def load(cls, path: str | Path) -> "SparseIndex":
        return cls(path)

    @property
    def n_entities(self) -> int:
        return len(self.entity_passage_indptr) - 1

    @functools.cached_property
    def article_global(self) -> np.ndarray:
        """(A,) each article's id among every article ever indexed (removed ones included; `drkit.index.segments`)."""
        return np.arange(len(self._articles), dtype=np.int64)

    @property
    def n_mentions(self) -> int:
        return len(self.mentions)

    @property
    def n_passages(self) -> int:
        return len(self.passage_article)

    @functools.cached_property
    def passage_mention_indptr(self) -> np.ndarray:
        """(P+1,): passage p holds mentions ``[indptr[p], indptr[p+1])`` (computed on first use)."""
        return passage_mention_indptr(self.mention_passage, self.n_passages)

    @functools.cached_property
    def mention_incidence(self) -> sp.csr_matrix:
        """(E, P) 0/1: which passages mention which entities, see `mention_incidence` (computed on first use)."""
        return mention_incidence(self.mention_entity, self.mention_passage, self.n_entities, self.n_passages)

    @functools.cached_property
    def article_titles(self) -> list[str]:
        """Title of each article id (read on first use)."""
        return [a["title"] for a in self._articles]

    @functools.cached_property
    def article_keys(self) -> list[str]:
        """The corpus id of each article id (read on first use)."""
        return [str(a["key"]) for a in self._articles]

    @functools.cached_property
    def _articles(self) -> list[dict]:
        return read_jsonl(self.path, "articles.jsonl")

    # -- title entities (a corpus whose passages are each about their title entity; the paper, 3.3) ----------
    @functools.cached_property
    def article_entity(self) -> np.ndarray:
        """(A,) the entity each article's title names, -1 when the title is not an entity."""
        from drkit.index.link_graph import title_entities

        return title_entities(self.article_titles, self.entities.lookup)

    @functools.cached_property
    def passage_entity(self) -> np.ndarray:
        """(P,) the title entity of each passage's article, -1 when none."""
        return self.article_entity[np.asarray(self.passage_article, dtype=np.int64)]

    @functools.cached_property
    def entity_pages(self) -> tuple[np.ndarray, np.ndarray]:
        """Each entity's page: CSR ``(indptr (E+1,), article ids)``, articles in corpus order."""
        from drkit.index.link_graph import pages

        return pages(self.article_entity, self.n_entities)

    @functools.cached_property
    def _entity_link(self) -> tuple[np.ndarray, np.ndarray]:
        from drkit.index.link_graph import link_graph

        return link_graph(self.mention_entity, self.mention_passage, self.passage_entity, self.n_entities)

    @property
    def entity_link_indptr(self) -> np.ndarray:
        """(E+1,) the link graph L of `drkit.index.link_graph` as CSR (computed on first use)."""
        return self._entity_link[0]

    @property
    def entity_link(self) -> np.ndarray:
        """(nnz,) L's column indices, sorted within each row."""
        return self._entity_link[1]

    @functools.cached_property
    def _entity_mentions(self) -> tuple[np.ndarray, np.ndarray]:
        me = np.asarray(self.mention_entity, dtype=np.int64)
        indptr = np.zeros(self.n_entities + 1, dtype=np.int64)
        np.cumsum(np.bincount(me, minlength=self.n_entities), out=indptr[1:])
        return indptr, np.argsort(me, kind="stable").astype(np.int64)

    @property
    def entity_mention_indptr(self) -> np.ndarray:
        """(E+1,) entity e has mentions ``entity_mentions[indptr[e]:indptr[e+1]]``."""
        return self._entity_mentions[0]

    @property
    def entity_mentions(self) -> np.ndarray:
        """(M,) mention ids grouped by entity, ascending within an entity."""
        return self._entity_mentions[1]

    @functools.cached_property
    def article_passages(self) -> tuple[np.ndarray, np.ndarray]:
        """Each article's passages: CSR ``(indptr (A+1,), passage ids)``, in passage order (read on first use)."""
        passage_article = np.asarray(self.passage_article, dtype=np.int64)
        order = np.argsort(passage_article, kind="stable")
        return np.searchsorted(passage_article[order], np.arange(len(self.article_keys) + 1)), order

    @functools.cached_property
    def _passage_slices(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(passage_char_start, passage_title_chars) where the index has them (None for an older index)."""
        try:
            return load_array(self.path, "passage_char_start"), load_array(self.path, "passage_title_chars")
        except (OSError, ArtifactError):
            return None

    def article_text(self, article: int) -> str:
        """The text of an article (a corpus line's ``text``, without its title line): its passages' slices
        placed at their offsets in the line. The index keeps passages, not the line, so what lay between two
        slices (whitespace the cut dropped) reads as as many spaces; an older index without the offsets joins
        the slices with one space."""
        indptr, passages = self.article_passages
        ps = passages[indptr[article]:indptr[article + 1]]
        head = len(self.article_titles[article]) + 1  # content = title + "\n" + text
        slices = self._passage_slices if self.live is None else None
        if slices is None:
            title_line = self.article_titles[article] + "\n"
            texts = [self.passage_text(int(p)) for p in ps]
            return " ".join(t[len(title_line):] if t.startswith(title_line) else t for t in texts)
        starts, carried = slices
        out, end = [], head
        for p in ps.tolist():
            piece = self.passage_text(p)[int(carried[p]):]
            start = int(starts[p])
            if start >= end:
                out.append(" " * (start - end))
            out.append(piece[max(0, end - start):])
            end = max(end, start + len(piece))
        return "".join(out)

    def passage_text(self, passage_id: int) -> str:
        a, b = self._text_offsets[passage_id], self._text_offsets[passage_id + 1]
        return bytes(self._text[a:b]).decode("utf-8")

    def passage_pieces(self, passage_id: int) -> np.ndarray:
        return np.asarray(self.pieces[self.piece_offsets[passage_id] : self.piece_offsets[passage_id + 1]])

    # -- A_{E->M}: not stored (EP with each passage replaced by its mentions); `DerivedA` makes it when asked
    def A_row(self, entity: int) -> tuple[np.ndarray, np.ndarray]:
        """Row `entity` of A: (mention ids, int32, increasing; their passages' scores), from EP alone."""
        _, indices, data = a_matrix(self.entity_passage_indptr, self.entity_passage, self.entity_passage_score,
                                    self.passage_mention_indptr, np.array([entity]))
        return indices, data

    def A(self) -> sp.csr_matrix:
        """A_{E->M} as a scipy CSR matrix with its scores (for analysis; the follow slices EP's rows)."""
        return sp.csr_matrix((self.A_data, self.A_indices, self.A_indptr), shape=(self.n_entities, self.n_mentions))

    def expand(self, entity_ids, weights, binary: bool = True):
        """Z^T A for one sparse entity set: ``(mention_ids, weights)``; see `ragged_expand`."""
        entity_ids = np.asarray(entity_ids, dtype=np.int64)
        _, mentions, values = self.expand_batch(np.zeros(len(entity_ids), np.int64), entity_ids, weights, binary)
        return mentions, values

    def expand_batch(self, rows, entity_ids, weights, binary: bool = True):
        """Z^T A for a batch given as coordinates ``Z[rows[i], entity_ids[i]] = weights[i]``."""
        entity_ids = np.asarray(entity_ids, dtype=np.int64)
        if len(entity_ids) and (entity_ids.min() < 0 or entity_ids.max() >= self.n_entities):
            raise IndexError(f"entity ids must be in [0, {self.n_entities})")
        needed = np.unique(entity_ids)  # only these rows of A are made, from EP
        indptr, indices, data = a_matrix(self.entity_passage_indptr, self.entity_passage, self.entity_passage_score,
                                         self.passage_mention_indptr, needed)
        return ragged_expand(indptr, indices, None if binary else data, rows, np.searchsorted(needed, entity_ids),
                             np.asarray(weights, dtype=np.float32))
