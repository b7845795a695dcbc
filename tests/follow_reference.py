"""The slow, obviously correct textual follow the tests check `drkit.reason.follow.follow` against."""

from __future__ import annotations

import numpy as np
import torch

from drkit.reason.follow import FollowConfig


def dense_follow_reference(z: torch.Tensor, queries: torch.Tensor, A: torch.Tensor, F: torch.Tensor,
                           mention_entity: np.ndarray, config: FollowConfig, topic=None) -> torch.Tensor:
    """Equation 5 with dense tensors, loop by loop: Z (B, E), A (E, M), F (M, p) -> Z_t (B, E).

    The slow, obviously correct reference the tests check `follow` against. A is the A the follow
    uses (0/1, or the relative TF-IDF score to the power), self-loops included: they are removed here
    unless `config.self_loops`."""
    B, E = z.shape
    M = F.shape[0]
    A_full = A
    if not config.self_loops:
        A = A.clone()
        A[torch.as_tensor(mention_entity), torch.arange(M)] = 0  # no entity reaches its own mentions
    out = torch.zeros(B, E, dtype=queries.dtype)
    for b in range(B):
        scores = F.to(queries.dtype) @ queries[b]  # (M,)
        expansion = z[b] @ A.to(z.dtype)  # (M,)
        order = sorted(range(M), key=lambda m: (-float(scores[m]), m))
        if config.tfidf and config.retrieval == "restricted":  # top-K among the co-occurring mentions
            passage_weight = z[b] @ A_full.to(z.dtype)  # skip passages of negligible weight
            floor = config.min_weight * passage_weight.max()
            order = [m for m in order if expansion[m] > 0 and passage_weight[m] >= floor
                     and not (config.remove_topic != "never" and topic is not None and mention_entity[m] == topic[b])]
        order = order[: config.top_k]
        per_entity: dict[int, list] = {}
        for m in order:
            e = int(mention_entity[m])
            if config.remove_topic != "never" and topic is not None and e == topic[b]:
                continue
            logit = scores[m] / config.temperature
            if config.tfidf:
                if expansion[m] <= 0:
                    continue
                logit = logit + torch.log(expansion[m])
            per_entity.setdefault(e, []).append(logit)
        if not per_entity:
            continue
        ents = sorted(per_entity)
        agg = [torch.stack(per_entity[e]).max() if config.aggregate == "max" else torch.logsumexp(torch.stack(per_entity[e]), 0)
               for e in ents]
        probs = torch.softmax(torch.stack(agg), 0)
        for e, p in zip(ents, probs):
            out[b, e] = p
    return out
