"""Span scoring for pretraining (paper, 2.3): every span of a passage is a candidate answer.

For query q and passage d, position i gets a start logit ``f_st(i) . g_st(q)`` and an end logit
``f_en(i) . g_en(q)``. Start and end are normalised separately (Seo et al. 2016), each softmax
also covering a "no answer" option whose logit is a learned constant, the same for every passage:
so a span beats "no answer" by its raw score, and raw scores stay comparable across passages, as
MIPS over the whole corpus needs. ``log P(span i..j) = log P_st(i) + log P_en(j)``.

A positive pair (the passage mentions the query's subject and an answer) is trained to put its
probability on the answer mentions (marginalised over all of them, separately for start and end);
a negative pair on "no answer".
"""

from __future__ import annotations

import torch


def span_logits(fs: torch.Tensor, fe: torch.Tensor, qs: torch.Tensor, qe: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Start and end logits of every query against every position of every passage.

    fs, fe: (P, L, h) passage start/end vectors; qs, qe: (Q, h) start/end queries -> two (Q, P, L)."""
    return torch.einsum("qh,plh->qpl", qs, fs), torch.einsum("qh,plh->qpl", qe, fe)


def log_probs_with_null(logits: torch.Tensor, valid: torch.Tensor, null: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the valid positions and "no answer": (Q, P, L) -> (Q, P, L + 1), null last.

    `valid` (P, L) marks the positions that can start or end a span (word pieces, not [CLS], [SEP]
    or padding); invalid positions get log-probability -inf."""
    masked = logits.float().masked_fill(~valid.unsqueeze(0), float("-inf"))
    null_col = null.float().expand(*masked.shape[:2], 1)
    return torch.log_softmax(torch.cat([masked, null_col], dim=-1), dim=-1)


def span_nll(start_logp: torch.Tensor, end_logp: torch.Tensor, gold_start: torch.Tensor, gold_end: torch.Tensor,
             positive: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of each (query, passage) pair: (Q, P).

    start_logp, end_logp: (Q, P, L + 1) from `log_probs_with_null`; gold_start, gold_end: (Q, P, L)
    bool, the answer mentions' first and last word pieces (used where `positive`); positive: (Q, P)
    bool. A positive pair without any gold position is an error."""
    if bool((positive & ~gold_start.any(-1)).any()) or bool((positive & ~gold_end.any(-1)).any()):
        raise ValueError("a positive pair has no gold start or end position")
    neg_inf = torch.tensor(float("-inf"))
    pos_start = torch.logsumexp(torch.where(gold_start, start_logp[..., :-1], neg_inf), dim=-1)
    pos_end = torch.logsumexp(torch.where(gold_end, end_logp[..., :-1], neg_inf), dim=-1)
    pos = -(pos_start + pos_end)
    neg = -(start_logp[..., -1] + end_logp[..., -1])
    return torch.where(positive, pos, neg)


def span_scores(start_logp: torch.Tensor, end_logp: torch.Tensor, max_length: int) -> torch.Tensor:
    """``log P(span i..j)`` for one query and passage: (L + 1,) x 2 -> (L, L), -inf unless i <= j < i + max_length."""
    L = start_logp.shape[0] - 1
    scores = start_logp[:L, None] + end_logp[None, :L]
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return scores.masked_fill((j < i) | (j >= i + max_length), float("-inf"))


def best_span(start_logp: torch.Tensor, end_logp: torch.Tensor, max_length: int) -> tuple[int, int, float] | None:
    """The most probable span ``(i, j, log P)``, or None when "no answer" is more probable than any span
    (``log P_st(null) + log P_en(null)`` against the best span)."""
    scores = span_scores(start_logp, end_logp, max_length)
    flat = int(scores.argmax())
    i, j = divmod(flat, scores.shape[1])
    best = float(scores[i, j])
    if best < float(start_logp[-1] + end_logp[-1]):
        return None
    return i, j, best
