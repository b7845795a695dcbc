"""Answer text: HotpotQA's official normalisation and EM/F1, and finding an answer in a text (sentence splitting,
`split_sentences`, is `drkit.data.text`'s).

`normalize_answer`, `exact_match` and `f1` follow ``hotpot_evaluate_v1.py`` (lower case, punctuation and the
articles a/an/the removed, white space collapsed; F1 over the remaining words, and 0 when one side is yes/no/
noanswer and the other differs). A question with several gold answers (aliases) scores its best one.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPECIAL = ("yes", "no", "noanswer")


def normalize_answer(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    p, g = normalize_answer(prediction), normalize_answer(gold)
    if (p in _SPECIAL or g in _SPECIAL) and p != g:
        return 0.0
    p_words, g_words = p.split(), g.split()
    same = sum((Counter(p_words) & Counter(g_words)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p_words), same / len(g_words)
    return 2 * precision * recall / (precision + recall)


def best_scores(prediction: str, golds) -> tuple[float, float]:
    """(EM, F1) of `prediction` against its best gold answer (0, 0 without gold); a number is read as its text."""
    golds = [str(g) for g in golds if isinstance(g, (str, int, float)) and not isinstance(g, bool)]
    if not golds:
        return 0.0, 0.0
    return max(exact_match(prediction, g) for g in golds), max(f1(prediction, g) for g in golds)


def find_all(text: str, answer: str) -> list[tuple[int, int]]:
    """Character spans of every occurrence of `answer` in `text`, compared case-insensitively and not inside
    a longer word (a span's neighbours are not letters or digits where the answer's ends are)."""
    answer = answer.strip()
    if not answer:
        return []
    low, key = text.lower(), answer.lower()
    if len(low) != len(text):  # a lower-casing that changes lengths (rare): compare case-sensitively
        low, key = text, answer
    out, i = [], low.find(key)
    while i >= 0:
        j = i + len(key)
        left_ok = i == 0 or not (low[i - 1].isalnum() and key[0].isalnum())
        right_ok = j == len(low) or not (low[j].isalnum() and key[-1].isalnum())
        if left_ok and right_ok:
            out.append((i, j))
        i = low.find(key, i + 1)
    return out
