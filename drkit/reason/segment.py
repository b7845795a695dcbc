"""Reductions over segments of a flat tensor: ``out[s] = reduce {values[i] : segments[i] = s}``.

The follow uses them to take mentions to their entity (the B_{M->E} of equation 5, by max or sum) and
to normalise each row's entities (the softmax). `segments` is (N,) int64 with values in [0, n); an
empty segment gives -inf. All three are differentiable in `values`.
"""

from __future__ import annotations

import torch


def segment_max(values: torch.Tensor, segments: torch.Tensor, n: int) -> torch.Tensor:
    """``out[s] = max_{i: segments[i] = s} values[i]``: (n,)."""
    out = torch.full((n,), float("-inf"), dtype=values.dtype)
    return out.scatter_reduce(0, segments, values, reduce="amax", include_self=False)


def segment_logsumexp(values: torch.Tensor, segments: torch.Tensor, n: int) -> torch.Tensor:
    """``out[s] = log sum_{i: segments[i] = s} exp(values[i])``: (n,).

    Computed as ``top[s] + log sum_i exp(values[i] - top[s])`` with top the segment's max (held
    constant for the gradient, which is unchanged by it), so no exponential overflows."""
    top = segment_max(values.detach(), segments, n)  # (n,)
    summed = torch.zeros(n, dtype=values.dtype).index_add(0, segments, torch.exp(values - top[segments]))
    return torch.log(summed) + top


def segment_log_softmax(values: torch.Tensor, segments: torch.Tensor, n: int) -> torch.Tensor:
    """``out[i] = values[i] - log sum_{j: segments[j] = segments[i]} exp(values[j])``: (N,)."""
    return values - segment_logsumexp(values, segments, n)[segments]
