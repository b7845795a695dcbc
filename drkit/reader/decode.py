"""The reader's logits for one example read back as a `drkit.reader.reading.Reading` (`drkit.reader.model`'s
module docstring): the answer type, the best span (start + end over pairs in one title or sentence, at most
`max_answer_pieces` long) mapped back to its characters, and the sentences whose supporting probability is
above the threshold."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import torch

from drkit.data.asked import DATE, asked_kinds
from drkit.index.found import CONNECTORS
from drkit.reader.clues import bare, held_title, title_key
from drkit.reader.compare import question_options
from drkit.reader.dates import is_date
from drkit.reader.examples import ANSWER_TYPES, SPAN, ReaderExample
from drkit.reader.reading import TITLE, Reading, Span, Supporting
from drkit.reader.text import normalize_answer

if TYPE_CHECKING:
    from drkit.reader.features import Features


# the span checks' rules: 1 brackets and dates (2026-11-29); 2 names too; 3 a relative "who" ("the director who
# ...") asks for no person (drkit.data.asked); 4 where no span is among the names given, the best that fits (not the
# best); 5 a which-of-two question's answer is one of its two options where a span among the best holds one
# (drkit.reader.compare.question_options); a reader row records it
SPAN_CHECKS = 5
# spans looked at, best first, for one that is not a bridge's name (`skip_bridges`) nor one of `not_answers`, is
# one of `answer_among` when given, and `fits` the question (`span_checks`)
CANDIDATES = 64


def decode(example: ReaderExample, f: Features, logits: dict, support_threshold: float,
           max_answer_pieces: int, skip_bridges: bool = False, span_checks: bool = False) -> Reading:
    """The `Reading` of `example` from its features `f` and its row of the reader's `logits` (type (3,); start,
    end and support (L,)). `skip_bridges`: the span is the best one that is not the title of a passage read
    which the question does not name (`bridge_names`), where one of the best `CANDIDATES` is not; likewise never
    one of ``example.not_answers`` (a hop's own start, `drkit.reader.decompose`); with ``example.answer_among``, the
    best of them that holds one of those names or is held by one (`drkit.reader.clues.held_title`), where one does;
    with `span_checks`, the best of those (of all allowed, where none is among the names) that `fits` the
    question, where one does, and for a which-of-two question (`drkit.reader.compare.question_options`, both options
    titles of passages read) the options are those names, the answer the one option the span holds or is held by."""
    type_probs = torch.softmax(logits["type"], 0)
    kind = ANSWER_TYPES[int(type_probs.argmax())]
    n = len(f.ids)
    seg = torch.from_numpy(f.segment)
    scores = span_scores(logits["start"][:n], logits["end"][:n], seg, max_answer_pieces)
    span = among = fitting = allowed = best = None
    skipped = bridge_names(example) if skip_bridges else set()
    skipped |= {key for name in example.not_answers for key in (normalize_answer(name), bare(name))}
    asked = asked_kinds(example.question) if span_checks else None
    options = question_options(example.question, [p.title for p in example.passages]) \
        if span_checks and not example.answer_among else None
    names = example.answer_among or options or ()
    for flat in scores.flatten().argsort(descending=True, stable=True)[:CANDIDATES].tolist():
        d, i = divmod(flat, n)
        score = float(scores[d, i])
        if score == float("-inf"):
            break
        p, s = f.segments[int(f.segment[i])]
        passage = example.passages[p]
        c0, c1 = int(f.chars[i, 0]), int(f.chars[i + d, 1])
        text = passage.title[c0:c1] if s == TITLE else passage.text[c0:c1]
        candidate = Span(text, p, s, c0, c1, score)
        best = best or candidate  # should each candidate be a bridge's name
        if normalize_answer(text) in skipped:
            continue
        allowed = allowed or candidate  # should none be among `answer_among`, nor fit
        ok = not span_checks or fits(text, asked)
        fitting = fitting or (candidate if ok else None)  # should none be among `answer_among`
        if names and held_title(text, names) is None:
            continue
        among = among or candidate  # should none among them fit (`span_checks`)
        if ok:
            span = candidate
            break
    span = span or among or fitting or allowed or best
    if kind == SPAN:
        answer = span.text if span is not None else ""
        named = [o for o in options or () if span is not None and held_title(span.text, (o,))]
        if len(named) == 1:  # "Tony Williams, who" answers "..., Tony Williams or Zoë Müller?" with the option as asked
            answer = named[0]
    else:
        answer = kind
    probs = torch.sigmoid(logits["support"][f.markers]).tolist() if f.markers else []
    support = tuple(Supporting(p, s, example.passages[p].id, _sentence(example, f, p, s), prob)
                    for (p, s), prob in zip(f.marker_of, probs) if prob > support_threshold)
    return Reading(answer, kind, float(type_probs.max()), span, support,
                   {t: float(x) for t, x in zip(ANSWER_TYPES, type_probs)})


def fits(text: str, asked: frozenset | None) -> bool:
    """Whether a span `text` may answer a question that asks for `asked` (`drkit.data.asked.asked_kinds`): its
    brackets balanced ("Mladá Boleslav) is a Czech" is not an answer), a date (`drkit.reader.dates.is_date`)
    where a date is asked for, and where another kind is ("where", "who", a nationality) not a date but a name
    (`is_name`: "Rockland, California, and died in Los Angeles" is not one)."""
    depth = 0
    for ch in text:
        depth += (ch in "([") - (ch in ")]")
        if depth < 0:
            return False
    if depth or asked is None:
        return depth == 0
    return is_date(text) if asked == DATE else not is_date(text) and is_name(text)


# lower-case words a name may hold: the connectors of names the recogniser's rules join on (`drkit.index.found`:
# "Otto von Habsburg", "Duke of Connaught"), other languages' particles ("d'Este", "Frankfurt am Main"), English
# articles, prepositions and conjunctions, as the titles of works have them ("Gone with the Wind", "Return to Cabin
# by the Lake", "University of North Carolina at Chapel Hill"), and the "s" of "Bishop's Stortford", the "ll" of
# "It'll Be Me"
NAME_PARTICLES = CONNECTORS | frozenset(
    "a an the in on at to by for from with without into onto upon over under as and or nor but vs "
    "am im ob bei sur sous en aux au degli dei delle des lo los las el les vom ten te het zur und i e bint ben ap af av "
    "d l o s t ll re ve m".split())
_WORD = re.compile(r"[^\W_][^\s\-–—'’]*")  # a word from its first letter or digit; spaces, dashes, apostrophes part words


def is_name(text: str) -> bool:
    """Whether `text` reads as a name: each of its words begins with a capital, a letter without case or a digit
    ("1st Earl of Kent"), or is one of `NAME_PARTICLES`. "Silvia Pinal and singer Enrique Guzmán", "Halton Region,
    just northwest of Toronto" and "Australian-American professional racing driver" are not names."""
    return all(not w[0].islower() or w.rstrip(".,;:!?)]\"") in NAME_PARTICLES for w in _WORD.findall(text))


def span_scores(start: torch.Tensor, end: torch.Tensor, seg: torch.Tensor, max_answer_pieces: int) -> torch.Tensor:
    """(D, n) start + end logit of the span of pieces i..i+d (row d, column i), -inf where it would leave one
    title or sentence (`seg`: each piece's segment, -1 outside them) or the input."""
    n = len(seg)
    if n == 0:
        return torch.full((1, 0), float("-inf"))
    last = torch.arange(n)[None, :] + torch.arange(min(max_answer_pieces, n))[:, None]  # (D, n): the span's last piece
    inside = last < n
    last = last.clamp_max(n - 1)
    ok = inside & (seg >= 0)[None, :] & (seg[last] == seg[None, :])
    return (start[None, :] + end[last]).masked_fill(~ok, float("-inf"))


def bridge_names(example: ReaderExample) -> set[str]:
    """The titles of the passages read (normalised, with and without a "(...)" suffix) that the question does not
    name: in a multi-hop question, the entities its hops pass through ("the director of film X": the director's
    page), which are not its answer."""
    forms = [f" {normalize_answer(q)} " for q in (example.question, re.sub(r"'s\b", "", example.question))]  # "X's"
    names = {key for p in example.passages for key in (title_key(p.title), bare(p.title))}
    return {key for key in names if key and not any(f" {key} " in q for q in forms)}


def _sentence(example: ReaderExample, f: Features, p: int, s: int) -> str:
    a, b = f.sentence_spans[p][s]
    return example.passages[p].text[a:b]
