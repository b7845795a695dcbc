"""Text normalisation shared by linking and TF-IDF.

`fold` lower-cases a string without changing its length, so that character offsets found in the
folded text are offsets in the original text too (``"İ".lower()`` is two characters; such a
character is kept as it is).
"""

from __future__ import annotations


def fold(text: str) -> str:
    """Case-fold `text` character by character, keeping its length."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def is_token_boundary(text: str, i: int) -> bool:
    """True when position `i` (between ``text[i-1]`` and ``text[i]``) separates two word pieces.

    A BERT tokenizer splits on whitespace and on every punctuation character, so the only place a
    name cannot start or end is between two alphanumeric characters.
    """
    if i <= 0 or i >= len(text):
        return True
    return not (text[i - 1].isalnum() and text[i].isalnum())
