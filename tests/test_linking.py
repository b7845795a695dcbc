"""Entity linking (EntityLinker) against a slow reference, and passage splitting (link_corpus)."""

from __future__ import annotations

import random
import unicodedata

import numpy as np
import pytest

from drkit.data.corpus import Article
from drkit.data.text import fold, is_token_boundary
from drkit.data.tokenizer import load_tokenizer
from drkit.errors import ConfigError
from drkit.index.linking import EntityLinker, LinkConfig, LinkedCorpus, link_corpus
from drkit.util.warnlog import WarningLog


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def linker_for(names, min_length=3):
    keys = [fold(n) for n in names]
    return EntityLinker(keys, min_length)


def found_strings(text, names, min_length=3):
    """The matched substrings of `text` with the names they were linked to."""
    return [(text[s:e], names[i]) for s, e, i in linker_for(names, min_length).find(text)]


# ---------------------------------------------------------------------------------------------
# Slow, obviously-correct reference


def ref_boundary(text: str, i: int) -> bool:
    if i == 0 or i == len(text):
        return True
    return not (text[i - 1].isalnum() and text[i].isalnum())


def ref_find(text: str, names: list[str], min_length: int) -> list[tuple[int, int, int]]:
    """At every start position on a boundary try every name; keep the longest that matches (case-insensitively)
    and ends on a boundary; jump past it. Valid for texts whose characters lower-case one to one."""
    out = []
    i = 0
    while i < len(text):
        best = None
        if ref_boundary(text, i):
            for entity_id, name in enumerate(names):
                n = len(name)
                if n < min_length or i + n > len(text):
                    continue
                if text[i : i + n].lower() == name.lower() and ref_boundary(text, i + n):
                    if best is None or n > best[1] - best[0]:
                        best = (i, i + n, entity_id)
        if best is not None:
            out.append(best)
            i = best[1]
        else:
            i += 1
    return out


# ---------------------------------------------------------------------------------------------
# fold and is_token_boundary


def test_fold_keeps_length_and_lowercases():
    for text in ["Kismet", "PLACE VENDÔME", "İstanbul", "Straße", "ΟΔΥΣΣΕΑΣ", "ÅÄÖ", "", "ǅ ǈ ǋ"]:
        folded = fold(text)
        assert len(folded) == len(text)
    assert fold("PLACE VENDÔME") == "place vendôme"
    assert fold("İSTANBUL") == "İstanbul"  # "İ".lower() is two characters: kept as is
    assert fold("Kismet İ") == "kismet İ"


def test_is_token_boundary():
    text = "Kismet's (W.C.) a1"
    expected = {0: True, 1: False, 5: False, 6: True, 7: True, 8: True, 9: True, 10: True, 11: True, 16: True,
                17: False, 18: True}
    for i, want in expected.items():
        assert is_token_boundary(text, i) is want, i
    assert is_token_boundary("", 0) and is_token_boundary("a", 1) and is_token_boundary("a", -1)


# ---------------------------------------------------------------------------------------------
# EntityLinker edge cases


def test_longest_name_wins_at_a_position():
    names = ["New York", "New York City", "York"]
    assert found_strings("He moved to new york city.", names) == [("new york city", "New York City")]
    assert found_strings("He moved to New York.", names) == [("New York", "New York")]
    assert found_strings("York, then New York", names) == [("York", "York"), ("New York", "New York")]


def test_leftmost_wins_across_positions():
    names = ["new york", "york city"]
    assert found_strings("new york city", names) == [("new york", "new york")]
    # even when the later overlapping name is longer
    names = ["red eye", "eye of the storm"]
    assert found_strings("Red Eye of the Storm", names) == [("Red Eye", "red eye")]
    # no overlap: both
    assert found_strings("red eye, eye of the storm", names) == [("red eye", "red eye"), ("eye of the storm", "eye of the storm")]


def test_adjacent_and_repeated_mentions():
    assert linker_for(["Kismet"]).find("Kismet Kismet,Kismet") == [(0, 6, 0), (7, 13, 0), (14, 20, 0)]


def test_case_insensitive():
    names = ["Marlene Dietrich"]
    for text in ["marlene dietrich", "MARLENE DIETRICH", "mArLeNe DiEtRiCh"]:
        assert linker_for(names).find(f"with {text} in") == [(5, 21, 0)]


@pytest.mark.parametrize("text,start", [
    ("(Kismet)", 1), ("Kismet's remake", 0), ("a film: Kismet.", 8), ("'Kismet'", 1), ('"Kismet"?', 1),
    ("-Kismet-", 1), ("Kismet\n", 0), ("\tKismet", 1), ("x,Kismet,y", 2), ("_Kismet_", 1),
])
def test_punctuation_around_names(text, start):
    assert linker_for(["Kismet"]).find(text) == [(start, start + 6, 0)]


@pytest.mark.parametrize("text", ["heart", "art2", "artist", "smart art1", "Art5", "Kismets", "2Kismet", "éKismet", "Kismetß"])
def test_no_match_inside_a_word(text):
    assert linker_for(["art", "Kismet"]).find(text) == []


def test_names_with_punctuation():
    names = ["Mark L. Lester", "W.C. Fields", "L. Lester", "Fields", "Mr. Smith Goes to Washington"]
    text = "Directed by Mark L. Lester, starring W.C. Fields. Mr. Smith Goes to Washington (1939)."
    assert found_strings(text, names) == [
        ("Mark L. Lester", "Mark L. Lester"),
        ("W.C. Fields", "W.C. Fields"),
        ("Mr. Smith Goes to Washington", "Mr. Smith Goes to Washington"),
    ]
    assert found_strings("w.c. fields's films", names) == [("w.c. fields", "W.C. Fields")]
    # a name ending in punctuation
    assert found_strings("see Jr.; or Jr.x", ["Jr."]) == [("Jr.", "Jr."), ("Jr.", "Jr.")]


def test_unicode_accented_names():
    names = ["Place Vendôme", "Amélie", "Zoë"]
    text = "At PLACE VENDÔME, AMÉLIE met zoë."
    assert found_strings(text, names) == [("PLACE VENDÔME", "Place Vendôme"), ("AMÉLIE", "Amélie"), ("zoë", "Zoë")]
    # accents are not folded: no match without them
    assert found_strings("At Place Vendome", names) == []


def test_length_changing_lowercase_does_not_shift_offsets():
    names = ["Kismet", "Marlene Dietrich"]
    text = "İİİ İstanbul: KISMET with MARLENE DIETRICH İ"
    assert len("İ".lower()) == 2  # the premise
    found = linker_for(names).find(text)
    assert [(text[s:e], i) for s, e, i in found] == [("KISMET", 0), ("MARLENE DIETRICH", 1)]
    assert found == ref_find(text.replace("İ", "I"), names, 3)


def test_names_with_dotted_capital_i():
    names = ["İstanbul"]
    assert found_strings("in İSTANBUL and İstanbul.", names) == [("İSTANBUL", "İstanbul"), ("İstanbul", "İstanbul")]


def test_names_shorter_than_min_length_are_not_linked():
    linker = EntityLinker(["ab", "abc", "a", "abcd"], min_length=3)
    assert linker.n_linkable == 2
    assert linker.find("ab a abc abcd") == [(5, 8, 1), (9, 13, 3)]
    linker = EntityLinker(["ab", "abc", "a"], min_length=1)
    assert linker.n_linkable == 3
    assert linker.find("ab a abc") == [(0, 2, 0), (3, 4, 2), (5, 8, 1)]


def test_linker_without_linkable_names():
    assert EntityLinker([], 3).find("anything") == []
    linker = EntityLinker(["ab"], 3)
    assert linker.n_linkable == 0 and linker.find("ab ab") == []


VOCAB = ["art", "heart", "york", "new", "yorker", "city", "the", "kismet", "red", "eye", "of", "a", "an",
         "mark", "l", "lester", "w", "c", "fields", "zoé", "éclair", "öl", "12", "1944", "x"]
SEPARATORS = [" ", " ", " ", ", ", ". ", " (", ") ", "'s ", "-", "\n", "", "."]


def random_case(rng: random.Random, word: str) -> str:
    mode = rng.random()
    if mode < 0.4:
        return word
    if mode < 0.6:
        return word.upper()
    if mode < 0.8:
        return word.capitalize()
    return "".join(c.upper() if rng.random() < 0.5 else c for c in word)


def random_name(rng: random.Random) -> str:
    words = [rng.choice(VOCAB) for _ in range(rng.randint(1, 3))]
    out = words[0]
    for w in words[1:]:
        out += rng.choice([" ", " ", "-", ". ", "."]) + w
    if rng.random() < 0.1:
        out += "."
    return out


@pytest.mark.parametrize("seed", range(6))
def test_find_matches_slow_reference_on_random_texts(seed):
    rng = random.Random(seed)
    checked = matched = 0
    for _ in range(60):
        names = sorted({random_name(rng) for _ in range(rng.randint(1, 25))})
        rng.shuffle(names)
        min_length = rng.choice([1, 2, 3, 5])
        linker = EntityLinker([fold(n) for n in names], min_length)
        for _ in range(5):
            parts = []
            for _ in range(rng.randint(0, 40)):
                parts.append(random_case(rng, rng.choice(VOCAB + names)))
                parts.append(rng.choice(SEPARATORS))
            text = "".join(parts)
            want = ref_find(text, names, min_length)
            assert linker.find(text) == want, (text, names, min_length)
            checked += 1
            matched += len(want)
    assert checked == 300 and matched > 500  # the texts do contain names


# ---------------------------------------------------------------------------------------------
# Bugs these tests found, now fixed


def test_fold_of_a_word_does_not_depend_on_unrelated_characters():
    assert fold("ΟΔΟΣ") == fold("οδος") == fold("οδοσ") == "οδοσ"
    assert fold("ΟΔΟΣ İstanbul")[:4] == fold("ΟΔΟΣ Istanbul")[:4]
    linker = linker_for(["ΟΔΟΣ"])
    assert linker.find("ΟΔΟΣ Istanbul") == [(0, 4, 0)]
    assert linker.find("ΟΔΟΣ İstanbul") == [(0, 4, 0)]


def test_name_ending_in_sigma_before_apostrophe_s():
    linker = linker_for(["ΟΔΟΣ", "Kismet"])
    assert linker.find("Kismet's") == [(0, 6, 1)]
    assert linker.find("ΟΔΟΣ's") == [(0, 4, 0)]


def test_no_match_inside_a_decomposed_word():
    text = unicodedata.normalize("NFD", "Cafés are nice")
    assert text.startswith("Cafe\u0301s")
    assert linker_for(["Cafe"]).find(text) == []


def test_passage_is_not_cut_inside_a_word_before_a_symbol(tok):
    article = Article("1", "T", "one two three four five six seven™ eight", 1)
    linked = link_corpus([article], EntityLinker([], 3), LinkConfig(max_passage_pieces=8))
    for p, text in enumerate(linked.passage_texts):
        stored = linked.pieces[linked.piece_offsets[p] : linked.piece_offsets[p + 1]].tolist()
        assert stored == tok(text, add_special_tokens=False)["input_ids"], text


# ---------------------------------------------------------------------------------------------
# link_corpus


def passage_pieces(linked: LinkedCorpus, p: int) -> list[int]:
    return linked.pieces[linked.piece_offsets[p] : linked.piece_offsets[p + 1]].tolist()


def check_linked(linked: LinkedCorpus, articles: list[Article], linker: EntityLinker, keys: list[str], tok,
                 max_pieces: int, expect_all_mentions: bool = True) -> None:
    """Every invariant of a LinkedCorpus, checked against the tokenizer and the linker directly."""
    P = linked.n_passages
    assert linked.article_keys == [a.key for a in articles]
    assert linked.article_titles == [a.title for a in articles]
    assert len(linked.passage_article) == len(linked.passage_char_start) == P
    assert linked.piece_offsets.shape == (P + 1,) and linked.piece_offsets[0] == 0
    assert linked.piece_offsets[-1] == len(linked.pieces)
    assert np.all(np.diff(linked.passage_article) >= 0)
    assert linked.mentions.shape[1] == 6 and linked.mentions.dtype == np.int32

    # passages: slices of their article (after the first, behind the carried title line), at most max_pieces
    # pieces, re-tokenizing gives the stored pieces, and the passages of an article together hold exactly the
    # article's pieces
    assert linked.passage_title_chars.shape == (P,)
    for a_id, article in enumerate(articles):
        content = article.content
        ps = np.flatnonzero(linked.passage_article == a_id)
        full = tok(content, add_special_tokens=False)["input_ids"]
        got = []
        prev_end = 0
        for i, p in enumerate(ps):
            text, c0 = linked.passage_texts[p], int(linked.passage_char_start[p])
            k = int(linked.passage_title_chars[p])  # the carried title line
            if i == 0:
                assert k == 0
            if k:
                assert text[:k] == article.title + "\n" and k == len(article.title) + 1
            body = text[k:]
            assert c0 >= prev_end
            assert content[c0 : c0 + len(body)] == body
            assert tok(content[prev_end:c0], add_special_tokens=False)["input_ids"] == []  # nothing lost between
            prev_end = c0 + len(body)
            pieces = passage_pieces(linked, p)
            assert 1 <= len(pieces) <= max_pieces
            assert pieces == tok(text, add_special_tokens=False)["input_ids"], text
            got += pieces[len(tok(text[:k], add_special_tokens=False)["input_ids"]):]
        assert tok(content[prev_end:], add_special_tokens=False)["input_ids"] == []
        assert got == full

    # mentions: sorted by passage, then by position; text and pieces agree with the entity name
    m = linked.mentions
    assert np.all(np.diff(m[:, 1]) >= 0)
    for p in range(P):
        rows = m[m[:, 1] == p]
        assert np.all(np.diff(rows[:, 4]) > 0)
        assert np.all(rows[1:, 2] > rows[:-1, 3])  # no overlap in pieces
    for entity, p, ps_, pe, cs, ce in m.tolist():
        text = linked.passage_texts[p]
        mention = text[cs:ce]
        assert fold(mention) == keys[entity]
        n = linked.piece_offsets[p + 1] - linked.piece_offsets[p]
        assert 0 <= ps_ <= pe < n
        stored = passage_pieces(linked, p)[ps_ : pe + 1]
        alone = tok(mention, add_special_tokens=False)["input_ids"]
        assert stored == alone, (mention, tok.convert_ids_to_tokens(stored))
        assert tok.decode(stored) == tok.decode(alone)
        # the pieces cover exactly the mention's characters
        offsets = tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        assert offsets[ps_][0] == cs and offsets[pe][1] == ce

    # a carried title line holds exactly the title mentions of the article's first passage
    first_passage = {}
    for p in range(P):
        first_passage.setdefault(int(linked.passage_article[p]), p)
    carried = np.array([r[4] < linked.passage_title_chars[r[1]] for r in m.tolist()], dtype=bool).reshape(-1)
    for p in np.flatnonzero(linked.passage_title_chars):
        k = int(linked.passage_title_chars[p])
        first = first_passage[int(linked.passage_article[p])]
        want_rows = [[e, p, *rest] for e, q, *rest in m.tolist() if q == first and rest[3] <= k - 1]
        assert [r for r, c in zip(m.tolist(), carried) if c and r[1] == p] == want_rows

    if expect_all_mentions:  # every mention the linker finds in an article is stored once (and its title's are carried)
        want = set()
        for a_id, article in enumerate(articles):
            for s, e, entity in linker.find(article.content):
                want.add((a_id, s, e, entity))
        shift = linked.passage_char_start - linked.passage_title_chars
        got_set = {(int(linked.passage_article[p]), int(shift[p]) + cs, int(shift[p]) + ce, entity)
                   for entity, p, _, _, cs, ce in m[~carried].tolist()}
        assert len(got_set) == int((~carried).sum())
        assert got_set == want


def test_link_config_validation():
    with pytest.raises(ConfigError):
        LinkConfig(max_passage_pieces=7)
    with pytest.raises(ConfigError):
        LinkConfig(min_name_length=0)
    LinkConfig(max_passage_pieces=8, min_name_length=1)


def test_link_corpus_small_articles(tok):
    names = ["Kismet", "William Dieterle", "Marlene Dietrich", "W.C. Fields", "Place Vendôme", "1944", "film"]
    keys = [fold(n) for n in names]
    linker = EntityLinker(keys, 3)
    articles = [
        Article("1", "Kismet", "Kismet is a 1944 film directed by William Dieterle. It stars MARLENE DIETRICH.", 1),
        Article("5", "Nothing here", "", 5),
        Article("7", "W.C. Fields", "W.C. Fields's films (1944) were shot near Place Vendôme; kismet's film.", 7),
    ]
    log = WarningLog()
    linked = link_corpus(articles, linker, LinkConfig(max_passage_pieces=256), log)
    check_linked(linked, articles, linker, keys, tok, 256)
    assert linked.n_passages == 3
    assert len(log) == 0
    first = [(names[e], linked.passage_texts[p][cs:ce]) for e, p, _, _, cs, ce in linked.mentions.tolist() if p == 0]
    assert first == [("Kismet", "Kismet"), ("Kismet", "Kismet"), ("1944", "1944"), ("film", "film"),
                     ("William Dieterle", "William Dieterle"), ("Marlene Dietrich", "MARLENE DIETRICH")]
    # mentions of the title line are in the passage too: content = title + "\n" + text
    assert linked.passage_texts[0].startswith("Kismet\nKismet is")


def test_link_corpus_mention_piece_positions(tok):
    names = ["Kismet", "Vendôme"]
    keys = [fold(n) for n in names]
    linker = EntityLinker(keys, 3)
    article = Article("1", "T", "see KISMET's sets at the Vendôme", 1)
    linked = link_corpus([article], linker, LinkConfig())
    pieces = tok.convert_ids_to_tokens(passage_pieces(linked, 0))
    assert pieces == ["t", "see", "ki", "##sm", "##et", "'", "s", "sets", "at", "the", "ve", "##ndo", "##me"]
    assert linked.mentions.tolist() == [[0, 0, 2, 4, 6, 12], [1, 0, 10, 12, 27, 34]]
    check_linked(linked, [article], linker, keys, tok, 256)


WORDS = ("apple banana cherry grape lemon mango olive peach pear plum river mountain forest castle garden window "
         "pencil rocket dragon wizard knight silver golden marble copper velvet thunder winter summer autumn spring "
         "island valley desert canyon harbor bridge tower temple palace village market").split()


def single_piece_text(tok, n_words: int, offset: int = 0) -> list[str]:
    words = [WORDS[(offset + i) % len(WORDS)] for i in range(n_words)]
    for w in set(words):
        assert len(tok(w, add_special_tokens=False)["input_ids"]) == 1, w
    return words


@pytest.mark.parametrize("max_pieces", [8, 16, 32])
def test_long_article_is_split_without_cutting_mentions(tok, max_pieces):
    rng = random.Random(max_pieces)
    names = ["Kismet", "William Dieterle", "Marlene Dietrich", "Place Vendôme", "river castle", "W.C. Fields",
             "golden dragon wizard", "apple"]
    keys = [fold(n) for n in names]
    linker = EntityLinker(keys, 3)
    articles = []
    for a in range(4):
        parts = []
        for _ in range(rng.randint(40, 120)):
            parts.append(rng.choice(WORDS + names + names))
            parts.append(rng.choice([" ", " ", " ", ", ", ". ", "; ", "\n", " (", ") ", "'s "]))
        articles.append(Article(str(a), f"Title {a}", "".join(parts).strip(), a))
    log = WarningLog()
    linked = link_corpus(articles, linker, LinkConfig(max_passage_pieces=max_pieces), log, batch_size=3)
    check_linked(linked, articles, linker, keys, tok, max_pieces)
    assert len(log) == 0
    per_article = np.bincount(linked.passage_article, minlength=4)
    assert np.all(per_article >= 3)  # really split
    assert len(linked.mentions) > 40


@pytest.mark.parametrize("name_start,name_len", [(s, n) for s in range(11, 18) for n in (1, 2, 3, 4)])
def test_name_at_the_passage_boundary_stays_whole(tok, name_start, name_len):
    """Pieces 0..15 would be the first passage (no sentence end, no newline past the title); a name covering
    pieces name_start .. name_start+name_len-1 must not be cut and must be stored once, whole."""
    max_pieces = 16
    words = single_piece_text(tok, 40)
    article = Article("1", "T", " ".join(words), 1)  # piece 0 is 't', piece i is words[i - 1]
    plain = link_corpus([article], EntityLinker([], 3), LinkConfig(max_passage_pieces=max_pieces))
    assert passage_pieces(plain, 0) == tok(" ".join(["T"] + words[:15]), add_special_tokens=False)["input_ids"]

    name = " ".join(words[name_start - 1 : name_start - 1 + name_len])
    keys = [fold(name)]
    linker = EntityLinker(keys, 3)
    log = WarningLog()
    linked = link_corpus([article], linker, LinkConfig(max_passage_pieces=max_pieces), log)
    check_linked(linked, [article], linker, keys, tok, max_pieces)
    assert len(log) == 0
    assert len(linked.mentions) == 1
    entity, p, ps, pe, cs, ce = linked.mentions[0].tolist()
    assert linked.passage_texts[p][cs:ce] == name
    assert pe - ps + 1 == name_len
    straddles = name_start < max_pieces <= name_start + name_len - 1
    if straddles:  # the cut moved to just before the name
        assert p == 1 and ps == 1  # right after the carried title 't'
        assert linked.passage_texts[1].startswith("T\n" + name)
        assert len(passage_pieces(linked, 0)) == name_start
    else:
        assert passage_pieces(linked, 0) == passage_pieces(plain, 0)


def test_cut_prefers_sentence_end_in_second_half(tok):
    words = single_piece_text(tok, 30)
    text = " ".join(words[:10]) + ". " + " ".join(words[10:])  # sentence end after piece 10
    article = Article("1", "T", text, 1)
    linked = link_corpus([article], EntityLinker([], 3), LinkConfig(max_passage_pieces=16))
    assert linked.passage_texts[0] == "T\n" + " ".join(words[:10]) + "."
    check_linked(linked, [article], EntityLinker([], 3), [], tok, 16)


def test_mention_longer_than_a_passage_is_a_counted_warning(tok):
    words = single_piece_text(tok, 30)
    long_name = " ".join(words[2:14])  # 12 pieces
    short_name = words[20]
    keys = [fold(long_name), fold(short_name)]
    linker = EntityLinker(keys, 3)
    article = Article("1", "T", " ".join(words), 1)
    log = WarningLog()
    linked = link_corpus([article], linker, LinkConfig(max_passage_pieces=8), log)
    assert log.count("mention_cut_by_passage") == 1
    assert [e for e in linked.mentions[:, 0].tolist()] == [1]
    check_linked(linked, [article], linker, keys, tok, 8, expect_all_mentions=False)


def test_article_without_pieces_is_a_counted_warning(tok):
    articles = [Article("a", "\u200b", "", 1), Article("b", "Kismet", "Kismet again", 2)]
    keys = ["kismet"]
    linker = EntityLinker(keys, 3)
    log = WarningLog()
    linked = link_corpus(articles, linker, LinkConfig(), log)
    assert log.count("article_without_pieces") == 1
    assert linked.article_keys == ["a", "b"]
    assert linked.passage_article.tolist() == [1]
    assert linked.mentions[:, 0].tolist() == [0, 0]
    check_linked(linked, articles, linker, keys, tok, 256)


def test_empty_corpus():
    linked = link_corpus([], EntityLinker(["kismet"], 3))
    assert linked.n_passages == 0
    assert linked.mentions.shape == (0, 6)
    assert linked.piece_offsets.tolist() == [0]
    assert len(linked.pieces) == 0


def test_batch_size_does_not_change_the_result(tok):
    rng = random.Random(7)
    names = ["Kismet", "river castle", "golden dragon"]
    keys = [fold(n) for n in names]
    linker = EntityLinker(keys, 3)
    articles = [Article(str(i), f"A{i}", " ".join(rng.choice(WORDS + names) for _ in range(rng.randint(1, 50))), i)
                for i in range(9)]
    a = link_corpus(articles, linker, LinkConfig(max_passage_pieces=16), batch_size=256)
    b = link_corpus(articles, linker, LinkConfig(max_passage_pieces=16), batch_size=2)
    assert a.passage_texts == b.passage_texts
    for field in ("passage_article", "passage_char_start", "piece_offsets", "pieces", "mentions"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    check_linked(a, articles, linker, keys, tok, 16)


# ---------------------------------------------------------------------------------------------
# The title in every passage of a long article


def test_every_passage_of_a_long_article_carries_its_title(tok):
    """Cut into passages, each passage of an article starts with its title line, and where the title is a
    linked mention in the first passage, it is the same mention (same pieces, same characters) in every one."""
    max_pieces = 16
    words = single_piece_text(tok, 60)
    names = ["Kismet", words[20], f"{words[30]} {words[31]}"]
    keys = [fold(n) for n in names]
    linker = EntityLinker(keys, 3)
    body = ". ".join(" ".join(words[i : i + 6]) for i in range(0, 60, 6)) + "."
    articles = [Article("1", "Kismet", body, 1), Article("2", "Zorro Rides", body, 9)]
    log = WarningLog()
    linked = link_corpus(articles, linker, LinkConfig(max_passage_pieces=max_pieces), log)
    assert len(log) == 0
    check_linked(linked, articles, linker, keys, tok, max_pieces)
    title_pieces = {a.key: tok(a.title, add_special_tokens=False)["input_ids"] for a in articles}
    for a_id, article in enumerate(articles):
        ps = np.flatnonzero(linked.passage_article == a_id).tolist()
        assert len(ps) >= 4  # really cut
        for p in ps:
            text = linked.passage_texts[p]
            assert text.startswith(article.title + "\n"), text
            assert passage_pieces(linked, p)[: len(title_pieces[article.key])] == title_pieces[article.key]
            assert len(passage_pieces(linked, p)) <= max_pieces
            rows = linked.mentions[linked.mentions[:, 1] == p].tolist()
            title_rows = [r for r in rows if r[4] < len(article.title)]
            if article.title == "Kismet":  # a linked title: its mention is in every passage, whole
                assert title_rows == [[0, p, 0, 2, 0, 6]]
            else:
                assert title_rows == []
    # the body mentions are all there, once each, at their characters
    body_mentions = [(int(linked.passage_article[p]), names[e], linked.passage_texts[p][cs:ce])
                     for e, p, _, _, cs, ce in linked.mentions.tolist() if cs >= len(linked.article_titles[linked.passage_article[p]]) + 1]
    for a_id in (0, 1):
        assert [(n, t) for a, n, t in body_mentions if a == a_id] == [(names[1], names[1]), (names[2], names[2])]


def test_a_title_too_long_to_carry_is_a_counted_warning(tok):
    words = single_piece_text(tok, 60)
    title = " ".join(words[:9])  # 9 pieces: more than half of a 16-piece passage
    article = Article("1", title, " ".join(words[10:60]), 1)
    log = WarningLog()
    linked = link_corpus([article], EntityLinker([fold(title)], 3), LinkConfig(max_passage_pieces=16), log)
    assert log.count("title_not_carried") == 1
    assert linked.passage_title_chars.tolist() == [0] * linked.n_passages
    assert not linked.passage_texts[1].startswith(title)
    check_linked(linked, [article], EntityLinker([fold(title)], 3), [fold(title)], tok, 16)


def test_decomposed_text_finds_composed_names_with_offsets_of_the_text_given():
    names = ["Zoë Müller", "Zürich", "Léa"]
    text = unicodedata.normalize("NFD", "Zoë Müller was born in ZÜRICH; Léa too.")
    found = linker_for(names).find(text)
    assert [(unicodedata.normalize("NFC", text[s:e]), names[i]) for s, e, i in found] == [
        ("Zoë Müller", "Zoë Müller"), ("ZÜRICH", "Zürich"), ("Léa", "Léa")]
    assert all(s == 0 or not unicodedata.combining(text[s]) for s, _, _ in found)  # never inside a character
    assert all(e == len(text) or not unicodedata.combining(text[e]) for _, e, _ in found)


@pytest.mark.parametrize("seed", range(5))
def test_nfc_spans_is_the_normal_form_with_a_map_back(seed):
    from drkit.data.text import nfc_spans

    rng = random.Random(seed)
    alphabet = ["a", "e", "o", " ", "Z", "\u0301", "\u0308", "\u0327", "\u1100", "\u1161", "\u11a8", "\uac00",
                "\u0995", "\u09c7", "\u09be", "\u09d7", "\u0b47", "\u0b3e", "\u212b", "\u0344", "x"]
    for _ in range(300):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 12)))
        normal, starts = nfc_spans(text)
        assert normal == unicodedata.normalize("NFC", text)
        if starts is None:
            assert normal == text
            continue
        assert len(starts) == len(normal) + 1 and starts[0] == 0 and starts[-1] == len(text)
        assert starts == sorted(starts)
        # each run of characters with one start is the normal form of the text between its start and the next
        cuts = sorted(set(starts))
        assert "".join(unicodedata.normalize("NFC", text[a:b]) for a, b in zip(cuts, cuts[1:])) == normal


def test_text_whose_base_characters_compose_is_matched_in_its_normal_form():
    # Bengali ka + e-sign + aa-sign: the two signs (base characters both) compose into one o-sign
    text = "Tagore wrote \u0995\u09c7\u09be, Tagore"
    assert not unicodedata.is_normalized("NFC", text)
    name = unicodedata.normalize("NFC", "\u0995\u09c7\u09be")
    found = linker_for(["Tagore", name], min_length=1).find(text)
    assert [(unicodedata.normalize("NFC", text[s:e]), i) for s, e, i in found] == [("Tagore", 0), (name, 1), ("Tagore", 0)]


@pytest.mark.parametrize("seed", range(20))
def test_find_in_decomposed_text_equals_find_in_composed_text(seed):
    """Random texts of accented words: whatever form the text is typed in, the same names are found, at the
    offsets of the text as given (a mention maps back to the same composed string)."""
    rng = random.Random(seed)
    words = ["Zoë", "Müller", "café", "Señor", "Ångström", "naïve", "Łódź", "Crème", "brûlée", "plain", "x"]
    names = [" ".join(rng.sample(words, rng.randint(1, 2))) for _ in range(6)]
    for _ in range(20):
        nfc_text = " ".join(rng.choice(words + names) for _ in range(rng.randint(1, 12)))
        nfd_text = unicodedata.normalize("NFD", nfc_text)
        linker = linker_for(names, min_length=1)
        in_nfc = [(nfc_text[s:e], i) for s, e, i in linker.find(nfc_text)]
        in_nfd = [(unicodedata.normalize("NFC", nfd_text[s:e]), i) for s, e, i in linker.find(nfd_text)]
        assert in_nfd == in_nfc
