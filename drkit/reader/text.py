"""Answer text: HotpotQA's official normalisation and EM/F1, sentence splitting, and finding an answer in a text.

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


_SENTENCE_END = re.compile(r"(?<=[.!?])([\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREVIATION = re.compile(r"\b(?:[A-Z]|e\.g|i\.e|c|ca|vs|St|Dr|Mr|Mrs|Ms|Jr|Sr|No|Vol|pp|Mt|Gen|Col|Lt|Capt|Rev|Prof|"
                           r"Inc|Ltd|Co|Corp|U\.S|U\.K)\.$")
_INITIAL = re.compile(r"\b[A-Z]\.$")
# after a single capital and a full stop, these words start a sentence ("World War I. The war ..."); an initial
# is followed by a name ("J. Smith")
_SENTENCE_STARTERS = frozenset("A An The He She It They We I His Her Its Their This That These Those There In On At "
                               "After Before During From Following However In Later Since When While".split())


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of `text`, in order, covering its non-blank text: a break after
    ., ! or ? followed by white space and a capital or digit, unless the word before the full stop is an
    initial or a common abbreviation ("J.", "Dr.", "St.", "U.S."); a single capital before the full stop ends a
    sentence when a common sentence-starting word follows ("World War I. The ...", `_SENTENCE_STARTERS`)."""
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        before = text[start : m.start()]
        if _ABBREVIATION.search(before):
            following = re.match(r"[\"'(\[]?(\w+)", text[m.end():])
            if not (_INITIAL.search(before) and following and following.group(1) in _SENTENCE_STARTERS):
                continue
        spans.append((start, m.end(1)))
        start = m.end()
    spans.append((start, len(text)))
    out = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            out.append((a, b))
    return out


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
