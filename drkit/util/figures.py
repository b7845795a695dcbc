"""How a report prints a figure it stored: every share (R@k, AR@k, Hits@k, EM, F1, an interval's bound) is kept to 4
digits in the results' JSON and shown to 3 in their tables. Python's ``f"{x:.3f}"`` rounds the binary float, which
for 0.9285 is just below it and shows 0.928; `three` rounds the stored decimal half up, as written, so a table
agrees with the JSON beside it on every machine."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal


def three(x: float) -> str:
    """`x` (a figure stored to 4 digits, a Python float as JSON reads it) to 3, half up as written: 0.9285 is 0.929
    (``f"{0.9285:.3f}"`` gives 0.928). A float32 is not its decimal (``float(np.float32(0.6285))`` is 0.62849998...):
    round it to 4 digits as a Python float first, as the reports do before they store a figure."""
    shown = Decimal(repr(float(x))).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)
    return str(shown if shown else abs(shown))  # -0.0004 is 0.000, not -0.000


def interval(ci: list[float] | tuple[float, float]) -> str:
    """A 95% interval stored as [low, high], shown as ``[0.806, 0.850]``."""
    return f"[{three(ci[0])}, {three(ci[1])}]"
