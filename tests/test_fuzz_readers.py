"""Every reader of drkit's input files, fuzzed with hypothesis against a small reference reader: the KB,
the entity list, the corpus (WikiMovies and JSONL), slot-filling queries and question files (MetaQA
format, as `drkit index --questions` reads them and as `drkit train` / `evaluate` load them).

Each generated file is a mix of good lines, near misses (wrong field counts, empty fields, wrong JSON
types), random bytes, invalid UTF-8, byte-order marks, CRLF, blank and huge lines. The reader must
agree with the reference exactly: the same typed error (`DrkitError`, with the same file, line and
field), or the same result (and the same counted warnings). Nothing else: no other exception, no line
skipped that the reference keeps. The references split the raw bytes themselves, so the line
numbering, the line endings and the decoding are checked independently of `drkit.data.lines`.

What the readers legitimately skip, and the references too: lines of only whitespace (``str.isspace``)
everywhere (in ``wiki.txt`` they end an article), and a JSONL corpus article with neither title nor text
(a counted ``empty_article`` warning). `load_questions` raises on nothing in a file: a line it cannot
read or parse is an item with its problem, checked line by line against the reference.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drkit.data.corpus import Article, read_jsonl_corpus, read_wikimovies
from drkit.data.kb import EntityTable, Triple, read_entity_list, read_kb
from drkit.data.questions import Question, load_questions, read_questions
from drkit.dense.slot_filling import read_slot_queries
from drkit.errors import DrkitError, InputFormatError, QuestionError
from drkit.util.warnlog import WarningLog

FUZZ = settings(max_examples=120, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


class Refused(Exception):
    """What a reference reader says where the real one must raise: the line and the field at fault."""

    def __init__(self, line: int, field: str | None = None):
        self.line, self.field = line, field


def ref_raw_lines(data: bytes):
    """``(line number, bytes without the line's ending)``: lines end at b"\\n", one "\\r" before it goes too."""
    pieces = data.split(b"\n")
    ended = [True] * (len(pieces) - 1) + [False]
    if pieces[-1] == b"":
        pieces, ended = pieces[:-1], ended[:-1]
    for n, (raw, e) in enumerate(zip(pieces, ended), 1):
        yield n, raw[:-1] if e and raw.endswith(b"\r") else raw


def ref_decode(n: int, raw: bytes) -> str:
    """The text of line `n`; a BOM opens line 1 only; not UTF-8 is refused."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(n) from None
    return text[1:] if n == 1 and text.startswith("\ufeff") else text


def ref_lines(data: bytes):
    """``(line number, text)`` of each line, refusing the first that is not UTF-8 where it is reached."""
    for n, raw in ref_raw_lines(data):
        yield n, ref_decode(n, raw)


def blank(text: str) -> bool:
    return text.strip() == ""


def outcome(read, path: Path):
    """``("ok", result)`` or ``("refused", line, field)``; any exception that is not a DrkitError fails the test."""
    try:
        return ("ok", read())
    except InputFormatError as exc:
        assert exc.path == str(path)
        where = f"{path}:{exc.line}" + ("" if exc.field is None else f" (field {exc.field!r})")
        assert str(exc).startswith(where + ": "), str(exc)
        return ("refused", exc.line, exc.field)
    except DrkitError as exc:  # pragma: no cover - a typed error without a line
        raise AssertionError(f"{type(exc).__name__} without file and line: {exc}") from exc


def reference(read):
    try:
        return ("ok", read())
    except Refused as r:
        return ("refused", r.line, r.field)


# ---------------------------------------------------------------------------------------------
# Generated files


NASTY_TEXT = st.text(alphabet=st.sampled_from(list("aZé ¡|\t[]{}\":,\\0123456789") +
                                              ["\u00a0", "\u2028", "\x85", "\x0b", "\x1c", "\ufeff", "\r", "𝔘", "ǅ", "\x00"]),
                     max_size=12)
BAD_BYTES = st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe9t\xe9",
                             b"\xff\xfe1\x00 \x00", b"\xef\xbb\xbf"])
HUGE = st.sampled_from([b"x" * 70_000, b"1 " + b"a " * 40_000, ("é" * 30_000).encode()])
BLANK = st.sampled_from([b"", b"   ", b"\t", "\u00a0\u2028".encode(), b"\r", b"\x0b\x0c"])


def mostly(good: st.SearchStrategy, *bad: st.SearchStrategy, odds: int = 10) -> st.SearchStrategy:
    """`good`, but one time in `odds` one of `bad`."""
    return st.integers(1, odds).flatmap(lambda i: good if i > 1 else st.one_of(*bad))


WORD = st.text(alphabet=st.sampled_from(list("aZé¡0") + ["𝔘", "ǅ", "\u00a0"]), min_size=1, max_size=6).filter(
    lambda t: not t.isspace())
TROUBLE = st.one_of(BLANK, BAD_BYTES, st.binary(max_size=16), NASTY_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")),
                    HUGE)
NO_TROUBLE = st.just(())


def files(line: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Bytes of a file: lines from `line` with up to two generic troublemakers among them, joined by LF or
    CRLF, maybe with a BOM and without a final newline."""
    def join(lines, trouble, seps, bom, final):
        for at, bad in trouble:
            lines.insert(at % (len(lines) + 1), bad)
        data = b"".join(ln + seps[i % len(seps)] for i, ln in enumerate(lines))
        if not final and data:
            data = data[: -len(seps[(len(lines) - 1) % len(seps)])]
        return (b"\xef\xbb\xbf" if bom else b"") + data

    trouble = mostly(NO_TROUBLE, st.lists(st.tuples(st.integers(0, 8), TROUBLE), min_size=1, max_size=2), odds=3)
    return st.builds(join, st.lists(line, max_size=7), trouble.map(list),
                     st.lists(st.sampled_from([b"\n", b"\r\n"]), min_size=1, max_size=3), st.booleans(), st.booleans())


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def put(fuzz_dir: Path, name: str, data: bytes) -> Path:
    path = fuzz_dir / name
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------------------------------------
# KB: subject|relation|object


def ref_kb(data: bytes) -> list[Triple]:
    out = []
    for n, line in ref_lines(data):
        if blank(line):
            continue
        fields = line.split("|")
        if len(fields) != 3:
            raise Refused(n)
        for name, value in zip(("subject", "relation", "object"), fields):
            if blank(value):
                raise Refused(n, name)
        out.append(Triple(*(f.strip() for f in fields), n))
    return out




KB_FIELD = mostly(WORD.map(lambda w: f" {w} "), NASTY_TEXT)
KB_LINE = mostly(
    st.tuples(KB_FIELD, KB_FIELD, KB_FIELD).map(lambda p: "|".join(p).encode("utf-8", "surrogatepass")),
    st.lists(NASTY_TEXT, min_size=1, max_size=5).map(lambda p: "|".join(p).encode("utf-8", "surrogatepass")))


@FUZZ
@given(data=files(KB_LINE))
def test_fuzz_kb(fuzz_dir, data):
    path = put(fuzz_dir, "kb.txt", data)
    assert outcome(lambda: list(read_kb(path)), path) == reference(lambda: ref_kb(data))


# ---------------------------------------------------------------------------------------------
# Entity list: one name per line


def ref_entities(data: bytes) -> list[str]:
    return [line.strip() for _, line in ref_lines(data) if not blank(line)]


@FUZZ
@given(data=files(mostly(WORD, NASTY_TEXT).map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_fuzz_entity_list(fuzz_dir, data):
    path = put(fuzz_dir, "entities.txt", data)
    got = outcome(lambda: list(read_entity_list(path)), path)
    assert got == reference(lambda: ref_entities(data))
    if got[0] == "ok":  # and the names make an entity table
        table = EntityTable.from_names(got[1])
        assert all(table.lookup(name) is not None for name in got[1])


# ---------------------------------------------------------------------------------------------
# WikiMovies wiki.txt


def ref_wikimovies(data: bytes) -> tuple[list[Article], dict]:
    """Articles and warning counts. A line is ``<ASCII digits>`` alone or followed by spaces/tabs and text;
    number 1 (or any number after a blank line) opens an article whose text is its title."""
    articles, counts = [], {}
    title, body, start, last = None, [], 0, 0

    def warn(kind):
        counts[kind] = counts.get(kind, 0) + 1

    def finish():
        if title is not None:
            if not body:
                warn("article_without_text")
            articles.append(Article(str(start), title, "\n".join(body), start))

    for n, line in ref_lines(data):
        if blank(line):
            finish()
            title, body = None, []
            continue
        digits = len(line) - len(line.lstrip("0123456789"))
        rest = line[digits:]
        if digits == 0 or (rest and rest[0] not in " \t"):
            raise Refused(n)
        number, content = int(line[:digits]), rest.strip()
        if number == 1 or title is None:
            finish()
            if number != 1:
                warn("article_not_numbered_from_1")
            if not content:
                raise Refused(n, "title")
            title, body, start, last = content, [], n, number
            continue
        if number != last + 1:
            warn("line_number_gap")
        last = number
        if content:
            body.append(content)
        else:
            warn("empty_line_text")
    finish()
    return articles, counts


WIKI_LINE = st.builds(lambda number, sep, text: (number + sep + text).encode("utf-8", "surrogatepass"),
                      mostly(st.sampled_from(["1", "2", "3", "4"]),
                             st.sampled_from(["01", "0", "", "x", "٣", "-1", "99999999999999999999"])),
                      mostly(st.sampled_from([" ", "\t"]), st.sampled_from(["", "  ", ":", "\u00a0"])),
                      mostly(WORD, NASTY_TEXT))


def read_wiki(path):
    log = WarningLog()
    articles = list(read_wikimovies(path, log))
    return articles, {kind: w["count"] for kind, w in log.to_dict().items()}


@FUZZ
@given(data=files(WIKI_LINE))
def test_fuzz_wikimovies(fuzz_dir, data):
    path = put(fuzz_dir, "wiki.txt", data)
    assert outcome(lambda: read_wiki(path), path) == reference(lambda: ref_wikimovies(data))


# ---------------------------------------------------------------------------------------------
# JSONL: the corpus and the slot-filling queries


def ref_json_object(n: int, line: str):
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        raise Refused(n) from None
    if not isinstance(obj, dict):
        raise Refused(n)
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # an unpaired surrogate escape
        raise Refused(n) from None
    return obj


def ref_jsonl_corpus(data: bytes) -> tuple[list[Article], dict]:
    articles, counts, seen = [], {}, set()
    for n, line in ref_lines(data):
        if blank(line):
            continue
        obj = ref_json_object(n, line)
        for field in ("id", "title", "text"):
            if field not in obj:
                raise Refused(n, field)
        if type(obj["id"]) not in (str, int):
            raise Refused(n, "id")
        for field in ("title", "text"):
            if type(obj[field]) is not str:
                raise Refused(n, field)
        key = str(obj["id"])
        if blank(key) or key in seen:
            raise Refused(n, "id")
        seen.add(key)
        title, text = obj["title"].strip(), obj["text"].strip()
        if not title and not text:
            counts["empty_article"] = counts.get("empty_article", 0) + 1
            continue
        if not text:
            counts["article_without_text"] = counts.get("article_without_text", 0) + 1
        articles.append(Article(key, title, text, n))
    return articles, counts


JSON_VALUE = st.one_of(NASTY_TEXT, st.integers(-5, 5), st.booleans(), st.none(), st.floats(allow_nan=True),
                       st.lists(st.integers(0, 3), max_size=2), st.dictionaries(st.sampled_from("ab"), st.integers(), max_size=1))
JSON_TWISTS = st.sampled_from(['{"id": "a", "title": "A", "text": "\\ud800"}', '{"id": 1' + "0" * 5000 + ', "title": "", "text": "x"}',
                               "[" * 5000 + "]" * 5000, '{"id": "a", "title": "A", "text": "x"', '{"id": "a"} x',
                               '{"id": "\\ud83d\\ude00", "title": "\\ud83d\\ude00", "text": "ok"}', "NaN", '"text"',
                               '{"id": "a", "title": "A", "text": "x", "id": 2}', '{"\\ud800": 1, "id": "k", "title": "t", "text": "x"}'])


def json_object_lines(fields: dict[str, st.SearchStrategy]) -> st.SearchStrategy[bytes]:
    """JSON objects whose fields follow their strategies but for at most one, absent or of another type
    (one line in six); sometimes one of the twists."""
    def dump(draws, twist):
        field, value = twist
        draws = {**draws, field: value} if field in draws else draws
        return json.dumps({k: v for k, v in draws.items() if v is not _ABSENT}, ensure_ascii=len(draws) % 2 == 0)
    twists = st.tuples(st.sampled_from(sorted(fields)), st.one_of(JSON_VALUE, st.just(_ABSENT)))
    drawn = st.builds(dump, st.fixed_dictionaries(fields),
                      st.integers(0, 5).flatmap(lambda i: twists if i == 0 else st.just(("", None))))
    return mostly(drawn, JSON_TWISTS).map(lambda t: t.encode("utf-8", "surrogatepass"))


_ABSENT = object()
KEY = st.one_of(st.text(alphabet="abcdefghij", min_size=3, max_size=8), st.integers(0, 10**6))
CORPUS_LINE = json_object_lines({"id": mostly(KEY, st.sampled_from(["", " ", "a", 1]), odds=20),
                                 "title": mostly(WORD, NASTY_TEXT), "text": mostly(WORD, NASTY_TEXT)})


def read_jsonl(path):
    log = WarningLog()
    articles = list(read_jsonl_corpus(path, log))
    return articles, {kind: w["count"] for kind, w in log.to_dict().items()}


@FUZZ
@given(data=files(CORPUS_LINE))
def test_fuzz_jsonl_corpus(fuzz_dir, data):
    path = put(fuzz_dir, "corpus.jsonl", data)
    got = outcome(lambda: read_jsonl(path), path)
    assert got == reference(lambda: ref_jsonl_corpus(data))
    if got[0] == "ok":  # what is read can be written as UTF-8 (the index stores passages so)
        for a in got[1][0]:
            (a.key + a.title + a.text).encode("utf-8")


ENTITIES = EntityTable.from_names(["Kismet", "William Dieterle", "Amélie", "Zoë"])
SLOT_INDEX = SimpleNamespace(entities=ENTITIES, path="slot-index")
ENTITY_NAMES = mostly(st.sampled_from(["Kismet", "kismet", " Kismet ", "AMÉLIE", "Zoë"]), st.sampled_from(["Nobody", "", " "]),
                      odds=30)


def ref_slot_queries(data: bytes) -> list[dict]:
    """Each line: "text" a string, "subject" an entity's name, "answers" a non-empty list of entity names;
    "relation" a string and "inverse" a boolean where given; other keys are kept as they are."""
    out = []
    for n, line in ref_lines(data):
        if blank(line):
            continue
        rec = ref_json_object(n, line)
        if type(rec.get("text")) is not str or blank(rec["text"]):
            raise Refused(n, "text")
        if type(rec.get("subject")) is not str or ENTITIES.lookup(rec["subject"]) is None:
            raise Refused(n, "subject")
        answers = rec.get("answers")
        if type(answers) is not list or not answers or any(type(a) is not str or ENTITIES.lookup(a) is None for a in answers):
            raise Refused(n, "answers")
        if "relation" in rec and (type(rec["relation"]) is not str or blank(rec["relation"])):
            raise Refused(n, "relation")
        if "inverse" in rec and type(rec["inverse"]) is not bool:
            raise Refused(n, "inverse")
        out.append({**rec, "line": n, "subject_id": ENTITIES.lookup(rec["subject"]),
                    "answer_ids": sorted({ENTITIES.lookup(a) for a in answers})})
    return out


SLOT_LINE = json_object_lines({"text": mostly(WORD, NASTY_TEXT), "subject": ENTITY_NAMES,
                               "answers": mostly(st.lists(ENTITY_NAMES, min_size=1, max_size=3),
                                                 st.lists(st.one_of(ENTITY_NAMES, st.integers()), max_size=3)),
                               "relation": mostly(st.just("directed_by"), st.just("")), "inverse": st.booleans()})


@FUZZ
@given(data=files(SLOT_LINE))
def test_fuzz_slot_queries(fuzz_dir, data):
    path = put(fuzz_dir, "heldout.jsonl", data)
    assert outcome(lambda: read_slot_queries(path, SLOT_INDEX), path) == reference(lambda: ref_slot_queries(data))


# ---------------------------------------------------------------------------------------------
# What the generators and references are meant to say, on hand-written cases


def test_reference_lines_split_like_grep():
    assert list(ref_lines(b"\xef\xbb\xbfa\r\nb\rc\n\n\xef\xbb\xbf")) == [(1, "a"), (2, "b\rc"), (3, ""), (4, "\ufeff")]
    assert list(ref_lines(b"a\r")) == [(1, "a\r")]
    with pytest.raises(Refused) as r:
        list(ref_lines(b"ok\n\xff\n"))
    assert r.value.line == 2


@pytest.mark.parametrize("line,field", [
    ('{"id": 1' + "0" * 5000 + ', "title": "", "text": "x"}', None),  # an integer too long for Python's int()
    ("[" * 5000 + "]" * 5000, None),  # nested too deeply
    ('{"id": "a", "title": "A", "text": "\\ud800"}', None),  # not a character
    ('{"id": " ", "title": "A", "text": "x"}', "id"),
    ('{"id": "a", "title": "A", "text": "x", "id": 2.0}', "id"),
])
def test_jsonl_corpus_twists(tmp_path, line, field):
    path = put(tmp_path, "c.jsonl", (line + "\n").encode())
    assert outcome(lambda: read_jsonl(path), path) == ("refused", 1, field)


# ---------------------------------------------------------------------------------------------
# Question files (MetaQA format): read_questions (index --questions) and load_questions (train, evaluate)


def ref_brackets(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each ``[name]`` with no bracket inside, left to right, not overlapping."""
    pairs, i = [], 0
    while i < len(text):
        if text[i] == "[":
            j = i + 1
            while j < len(text) and text[j] not in "[]":
                j += 1
            if j < len(text) and text[j] == "]":
                pairs.append((i, j + 1))
                i = j + 1
                continue
            i = j
            continue
        i += 1
    return pairs


def ref_question(n: int, line: str) -> Question:
    """A question line: exactly one tab; at most one non-blank [name]; a non-blank question; an answer."""
    if line.count("\t") != 1:
        raise Refused(n)
    question, answers_field = line.split("\t")
    pairs = ref_brackets(question)
    if len(pairs) > 1 or (pairs and blank(question[pairs[0][0] + 1 : pairs[0][1] - 1])):
        raise Refused(n, "question")
    topic = None
    if pairs:
        (a, b), = pairs
        topic = question[a + 1 : b - 1].strip()
        question = question[:a] + question[a + 1 : b - 1] + question[b:]
    if blank(question):
        raise Refused(n, "question")
    answers = tuple(x.strip() for x in answers_field.split("|") if not blank(x))
    if not answers:
        raise Refused(n, "answers")
    return Question(question.strip(), topic, answers, n)


def ref_read_questions(data: bytes) -> list[Question]:
    return [ref_question(n, line) for n, line in ref_lines(data) if not blank(line)]


def ref_load_questions(data: bytes, link) -> list[tuple]:
    """``(line, text, topic name, topic id, how, answer ids, problem kind)`` of every line that is not blank;
    a line that cannot be read or parsed is a malformed item, not an exception."""
    items = []
    for n, raw in ref_raw_lines(data):
        try:
            line = ref_decode(n, raw)
        except Refused:
            items.append((n, None, "", -1, "", [], "malformed_line"))
            continue
        if blank(line):
            continue
        try:
            q = ref_question(n, line)
        except Refused:
            items.append((n, None, "", -1, "", [], "malformed_line"))
            continue
        answer_ids = sorted({ENTITIES.lookup(a) for a in q.answers} - {None})
        if q.topic is not None:
            topic = ENTITIES.lookup(q.topic)
            items.append((n, q.text, q.topic, -1 if topic is None else topic, "bracketed", answer_ids,
                          "unknown_question_entity" if topic is None else None))
            continue
        try:
            topic, name, how = link(q.text)
        except QuestionError:
            items.append((n, q.text, "", -1, "", answer_ids, "unlinked_question_entity"))
            continue
        items.append((n, q.text, name, topic, how, answer_ids, None))
    return items


def link_first_name(text: str) -> tuple[int, str, str]:
    """A deterministic stand-in for `VirtualKB.parse` on a plain question."""
    for name in ENTITIES.names:
        if name.lower() in text.lower():
            return ENTITIES.lookup(name), name, "linked"
    raise QuestionError(f"no entity named in {text!r}")


QUESTION_LINE = st.builds(
    lambda words, mark, tabs, answers: (" ".join(words[:1] + [mark] + words[1:]) + tabs + "|".join(answers)).encode(
        "utf-8", "surrogatepass"),
    st.lists(mostly(WORD, NASTY_TEXT), max_size=3),
    mostly(st.one_of(st.just(""), ENTITY_NAMES.map(lambda n: f"[{n}]"), ENTITY_NAMES, WORD.map(lambda w: f"[{w}]")),
           st.sampled_from(["[]", "[ ]", "[Kismet] [Zoë]", "[Kismet", "Kismet]", "[[Kismet]]", "[\t]"])),
    mostly(st.just("\t"), st.sampled_from(["", "\t\t", " "])),
    st.lists(mostly(ENTITY_NAMES, NASTY_TEXT), min_size=1, max_size=3))


@FUZZ
@given(data=files(QUESTION_LINE))
def test_fuzz_read_questions(fuzz_dir, data):
    path = put(fuzz_dir, "qa.txt", data)
    assert outcome(lambda: list(read_questions(path)), path) == reference(lambda: ref_read_questions(data))


@FUZZ
@given(data=files(QUESTION_LINE))
def test_fuzz_load_questions(fuzz_dir, data):
    path = put(fuzz_dir, "qa.txt", data)

    def parse(text):
        topic, name, how = link_first_name(text)
        return SimpleNamespace(text=text, topic=topic, topic_name=name, how=how)

    items = load_questions(path, ENTITIES, parse)  # never raises on the contents of the file
    got = [(it.line, None if it.problem_kind == "malformed_line" else it.text, it.topic_name, it.topic, it.how,
            it.answer_ids.tolist(), it.problem_kind) for it in items]
    assert got == ref_load_questions(data, link_first_name)
    for it in items:
        assert (it.problem is None) == (it.problem_kind is None)
        assert it.problem is None or it.problem.startswith(f"{path}:{it.line}")
