"""The comparisons that settle which-of-two date questions and same-country questions (drkit.reader.compare,
drkit.reader.same): their parts by hand, and the whole on generated passages against the dates and
countries they were written from."""

import json
import random

import pytest

from drkit.reader.compare import compare, parse_question
from drkit.reader.dates import find_dates, life_dates
from drkit.reader.examples import ReaderExample, ReaderPassage
from drkit.reader.reading import ReadConfig

MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
               "November", "December"]


def test_dates_in_their_common_forms():
    got = [(d.year, d.month, d.day, d.text) for d in find_dates(
        "Born 12 January 1968, moved on March 23, 1886 or in Sept. 1990, then 1918; 125 films, 3.1975 no")]
    assert got == [(1968, 1, 12, "12 January 1968"), (1886, 3, 23, "March 23, 1886"), (1990, 9, None, "Sept. 1990"),
                   (1918, None, None, "1918")]
    assert [d.year for d in find_dates("died 875")] == [] and [d.year for d in find_dates("died 875", True)] == [875]
    # numeric forms: ISO's year, month and day; "4/12/1943" only its year (day first or month first, who knows)
    got = [(d.year, d.month, d.day, d.text) for d in find_dates(
        "born 1975-04-09, died 4/12/2043; 12.05.1990, 1849-1916, 1975-13-09, 1975-04-09-1 and 2/3/19444")]
    assert got == [(1975, 4, 9, "1975-04-09"), (2043, None, None, "4/12/2043"), (1990, None, None, "12.05.1990"),
                   (1849, None, None, "1849"), (1916, None, None, "1916"), (1975, None, None, "1975"),
                   (1975, None, None, "1975")]  # no month 13; a fourth number: the year alone; 19444 is no year


@pytest.mark.parametrize("text, birth, death", [
    ("Teutberga( died 11 November 875) was a queen", None, "11 November 875"),
    ("Astrid North( Astrid Karina North Radmann; 24 August 1973, Berlin – 25 June 2019, Berlin) was", "24 August 1973",
     "25 June 2019"),
    ("Henry Walter Moore( 1849 – 20 August 1916) was", "1849", "20 August 1916"),
    ("Lothair II (835 –) was the king", "835", None),
    ("Nicki Minaj (born December 8, 1982), known", "December 8, 1982", None),
    ("Edith Carlmar (Edith Mary Johanne Mathiesen) (15 November 1911 – 17 May 2003) was", "15 November 1911",
     "17 May 2003"),
    ("Kiliwehi Kaʻauwai (– November 4, 1873) was", None, "November 4, 1873"),
    ("Charles Barton( May 25, 1902 December 5, 1981) was", "May 25, 1902", "December 5, 1981"),
    ("John Farrow (10 February 190427 January 1963) was", "10 February 1904", "27 January 1963"),
    ("Cornel Wilde( born Kornél Lajos Weisz; October 13, 1912 – October 16, 1989) was", "October 13, 1912",
     "October 16, 1989"),
    ("Dunlap was born in Chicago, Illinois in 1892 and died in 1970.", "1892", "1970"),
])
def test_a_life_from_its_parenthesis_or_its_words(text, birth, death):
    b, d = life_dates(text)
    assert (b and b.text, d and d.text) == (birth, death)


def test_questions_parsed_by_hand():
    q = parse_question("Which film has the director who died later, Love, Honor And Oh-Baby! or I Cover The Underworld?")
    assert (q.options, q.attribute, q.later, q.relation) == (("Love, Honor And Oh-Baby!", "I Cover The Underworld"),
                                                             "death", True, "director")
    q = parse_question("Was Shahanuddin Choudhury or Domenico Distilo born first?")
    assert (q.options, q.attribute, q.later, q.relation) == (("Shahanuddin Choudhury", "Domenico Distilo"), "birth",
                                                             False, None)
    q = parse_question("Who was born first out of C. Maurice Patterson and Maj-Briht Bergström-Walan?")
    assert q.options == ("C. Maurice Patterson", "Maj-Briht Bergström-Walan") and q.attribute == "birth"
    q = parse_question("Which film whose director is younger, Dangerously They Live or Salad By The Roots?")
    assert (q.attribute, q.later, q.relation) == ("birth", True, "director")
    q = parse_question("Who lived longer, Ludwig Elsbett or Pamela Ann Rymer?")
    assert (q.attribute, q.later) == ("life", True)
    q = parse_question("Which museum was established first, Museum Of Croatian Archaeology or Bayernhof Music Museum?")
    assert (q.attribute, q.later, q.relation) == ("date", False, None) and "established" in q.cue
    for not_one in ("Are Marufabad and Nasamkhrali both located in the same country?", "Who directed Kismet?",
                    "Which is longer, the Nile or the Amazon?", "Who was born first or last, A or B?"):
        assert parse_question(not_one) is None, not_one
    # an " or " inside a title: the split whose options are both titles read
    q = parse_question("Which film came out first, Now or Never or Kismet?", ["Kismet", "Now or Never"])
    assert q.options == ("Now or Never", "Kismet")


def _date_text(y, m, d, form):
    return {"dmy": f"{d} {MONTH_NAMES[m - 1]} {y}", "mdy": f"{MONTH_NAMES[m - 1]} {d}, {y}", "y": str(y)}[form]


def _person(name, birth, death, rng):
    form = rng.choice(["dmy", "mdy", "y"])
    b, d = _date_text(*birth, form), _date_text(*death, form)
    life = rng.choice([f"({b} – {d})", f"( {b} - {d})", f"(born {b}; died {d})"])
    return ReaderPassage(name, name, f"{name} {life} was a film director. He made many films in {birth[0] + 30}."), form


def _truth(a, b, later):
    """Which of two (y, m, d) dates the question asks for, at the precision both are written in (None: a tie)."""
    if a == b:
        return None
    return (a > b) == later


@pytest.mark.parametrize("seed", range(5))
def test_generated_questions_get_the_answer_their_dates_give(seed):
    """Passages written from random dates in random forms; each question's expected answer comes from comparing
    the dates it was written from, directly."""
    rng = random.Random(seed)
    checked = 0
    for i in range(60):
        dates = []
        for _ in range(2):
            y = rng.randint(1850, 1990)
            dates.append(((y, rng.randint(1, 12), rng.randint(1, 28)), (y + rng.randint(20, 90), rng.randint(1, 12),
                                                                     rng.randint(1, 28))))
        if rng.random() < 0.2:  # some ties on the year
            dates[1] = ((dates[0][0][0],) + dates[1][0][1:], dates[1][1])
        people = [f"Person{i}a Smith", f"Person{i}b Jones"]
        films = [f"Film{i} Alpha", f"Film{i} Beta"]
        passages, forms = zip(*[_person(p, *d, rng) for p, d in zip(people, dates)])
        passages = list(passages)
        kind = rng.choice(["birth", "death", "bridge-birth", "bridge-death", "film"])
        later = rng.random() < 0.5
        word = ("later" if later else "earlier")
        if kind == "film":
            years = [rng.randint(1920, 2020) for _ in range(2)]
            passages = [ReaderPassage(f, f, f"{f} is a {y} American drama film directed by {p}.")
                        for f, y, p in zip(films, years, people)]
            question, options, values = f"Which film came out {word}, {films[0]} or {films[1]}?", films, [
                (y, 0, 0) for y in years]
        elif kind.startswith("bridge"):
            what = "was born" if kind.endswith("birth") else "died"
            passages += [ReaderPassage(f, f, f"{f} is a 1950 film starring Ann Lee and directed by {p}.")
                         for f, p in zip(films, people)]
            rng.shuffle(passages)
            question = f"Which film has the director who {what} {word}, {films[0]} or {films[1]}?"
            options, values = films, [d[0] if what == "was born" else d[1] for d in dates]
        else:
            what = "was born" if kind == "birth" else "died"
            question = f"Who {what} {word}, {people[0]} or {people[1]}?"
            options, values = people, [d[0] if what == "was born" else d[1] for d in dates]
        texts = [p.text for p in passages]
        if "y" in forms and kind != "film":  # a life written in years only: compared on the years
            values = [(v[0], 0, 0) for v in values]
        truth = _truth(values[0], values[1], later)
        got = compare(question, [p.title for p in passages], texts)
        if truth is None:
            assert got is None, question
        else:
            assert got is not None and got.answer == options[0 if truth else 1], (question, texts, got)
            checked += 1
    assert checked > 30


def test_an_option_or_a_date_not_found_settles_nothing():
    p = [ReaderPassage("1", "Ann Lee", "Ann Lee (born 3 May 1950) is a singer."),
         ReaderPassage("2", "Bob Ray", "Bob Ray is a singer from Ohio.")]
    assert compare("Who was born first, Ann Lee or Bob Ray?", [x.title for x in p], [x.text for x in p]) is None
    assert compare("Who was born first, Ann Lee or Cy Twombly?", [x.title for x in p], [x.text for x in p]) is None
    p[1] = ReaderPassage("2", "Bob Ray", "Bob Ray (born 1950) is a singer.")
    assert compare("Who was born first, Ann Lee or Bob Ray?", [x.title for x in p], [x.text for x in p]) is None  # 1950 = 1950
    p[1] = ReaderPassage("2", "Bob Ray (singer)", "Bob Ray (born 1949) is a singer.")
    got = compare("Who was born first, Ann Lee or Bob Ray?", [x.title for x in p], [x.text for x in p])
    assert got.answer == "Bob Ray" and got.to_dict(p)["values"][1] == {
        "option": "Bob Ray", "passage": 1, "passage_id": "2", "via": None, "dates": ["1949"],
        "sentence": "Bob Ray (born 1949) is a singer."}


def test_the_reader_settles_a_comparison_only_when_asked(tiny_reader):
    from drkit.qa.answer import reading_row
    from drkit.qa.results import reader_answer

    passages = (ReaderPassage("a", "Ann Lee", "Ann Lee (3 May 1950 – 1 June 2001) was a singer."),
                ReaderPassage("b", "Bob Ray", "Bob Ray (born 9 July 1948) is a singer. He sang."),
                ReaderPassage("c", "Kismet", "Kismet is a 1944 film."))
    e = ReaderExample("q", "Who was born later, Ann Lee or Bob Ray?", passages)
    runs = []
    hook = tiny_reader.transformer.embeddings.register_forward_hook(  # every path through it
        lambda module, args, out: runs.append(args))
    try:
        settled = tiny_reader.read([e])[0]
        assert runs == []  # settled by the dates: the transformer did not run
        alone = tiny_reader.read([e], config=ReadConfig(compare=False))[0]
        assert len(runs) == 1
    finally:
        hook.remove()
    assert alone.comparison is None and settled.comparison is not None
    assert settled.answer == "Ann Lee" and settled.answer_type == "span" and settled.span is None
    assert settled.type_prob is None and settled.type_probs == {}
    # the evidence is the two sentences the dates were read from, with no probability
    assert [(s.passage_id, s.sentence, s.text, s.prob) for s in settled.supporting] == [
        ("a", 0, "Ann Lee (3 May 1950 – 1 June 2001) was a singer.", None),
        ("b", 0, "Bob Ray (born 9 July 1948) is a singer.", None)]
    row = reading_row(settled, passages)
    assert row["answer"] == "Ann Lee" and [v["passage_id"] for v in row["comparison"]["values"]] == ["a", "b"]
    assert row["type_prob"] is None and [s["prob"] for s in row["supporting"]] == [None, None]
    json.dumps(row)  # a line of predictions.jsonl
    a = reader_answer(settled, passages)
    assert a.comparison == row["comparison"] and {p.id for p in a.evidence} >= {"a", "b"} and a.passage_id is None
    assert a.prob is None and [(s.passage_id, s.start, s.end) for s in a.supporting] == [("a", 0, 48), ("b", 0, 39)]
    other = ReaderExample("q2", "Who directed Kismet?", passages)
    assert tiny_reader.read([other])[0] == tiny_reader.read([other], config=ReadConfig(compare=False))[0]
    # in a batch, the settled questions are skipped and the others read as alone, in their order
    mixed = tiny_reader.read([e, other, e, other], batch_size=8)
    read = tiny_reader.read([other])[0]
    assert mixed[0] == mixed[2] == settled
    for got in (mixed[1], mixed[3]):  # read in a batch of two: the same up to the float sums' order
        assert (got.answer, got.answer_type, got.span.text, got.comparison) == (read.answer, read.answer_type,
                                                                                read.span.text, None)
        assert got.type_prob == pytest.approx(read.type_prob, abs=1e-5)


def test_the_timed_sample_counts_what_the_rules_settle_and_times_the_rest_alone(tiny_reader, tmp_path):
    from drkit.qa.answer import AnswerConfig, read_and_score

    passages = [ReaderPassage("a", "Ann Lee", "Ann Lee (3 May 1950 – 1 June 2001) was a singer."),
                ReaderPassage("b", "Bob Ray", "Bob Ray (born 9 July 1948) is a singer. He sang.")]
    records = [{"id": "1", "question": "Who was born later, Ann Lee or Bob Ray?", "answers": ["Ann Lee"]},
               {"id": "2", "question": "What did Bob Ray do?", "answers": ["sang"]},
               {"id": "3", "question": "Who was born first, Ann Lee or Bob Ray?", "answers": ["Bob Ray"]}]
    metrics = read_and_score(tiny_reader, records, [passages] * 3, tmp_path, AnswerConfig(qps_sample=3, precision="fp32"),
                             log=lambda *a: None)
    assert metrics["compared"] == 2  # questions 1 and 3, settled by the dates
    assert metrics["reader_batch1_sample"] == 3 and metrics["reader_batch1_sample_settled"] == 2
    assert metrics["reader_ms_per_read_batch1"] > 0 and metrics["reader_ms_per_question_batch1"] > 0
    off = read_and_score(tiny_reader, records, [passages] * 3, tmp_path / "off",
                         AnswerConfig(qps_sample=3, precision="fp32", compare=False), log=lambda *a: None)
    assert off["compared"] == 0 and off["reader_batch1_sample_settled"] == 0
    assert off["reader_ms_per_read_batch1"] == off["reader_ms_per_question_batch1"]


def test_countries_by_name_and_demonym_with_their_exceptions():
    from drkit.reader.countries import countries_in

    text = ("a Greek American player, a French-American director, a Hungarian-born Austrian, Gulîstan( French "
            "title: x) near Fort Nelson, British Columbia, Canada; English and Scottish; the US and us")
    assert [c for c, _ in countries_in(text)] == ["United States", "United States", "Austria", "Canada",
                                                  "United Kingdom", "United Kingdom", "United States"]


def test_same_country_questions_by_hand():
    from drkit.reader.same import country_of, options_named, same_country

    titles = ["Kismet (1944 film)", "Kismet", "Walter Lang", "State Fair (1945 film)", "Lang"]
    q = "Do both films Kismet (1944 Film) and State Fair (1945 Film) have the directors from the same country?"
    assert options_named(q, titles) == [3, 0]  # the longest names first; "Kismet" and "Lang" inside them do not count
    assert country_of("X is a 1944 American film. It is set in Iran.") == ("United States", 12)
    assert country_of("X (French title: Y) is a village in Fars Province, Iran.")[0] == "Iran"
    for text, country in [("Tom Holland is an English actor.", "United Kingdom"), ("Ella is a town in New Mexico.", None),
                          ("Michael Jordan is an American executive.", "United States"),
                          ("Lebanon is a city in Lebanon County, Pennsylvania, United States.", "United States"),
                          ("Bo is a town in New South Wales, Australia.", "Australia"),
                          ("Al is an American football player.", None)]:
        assert (country_of(text) or (None,))[0] == country, text
    texts = ["Kismet is a 1944 film directed by William Dieterle and starring Walter Lang.", "", "Walter Lang (1896 - "
             "1972) was an American film director.", "State Fair is a 1945 film directed by Walter Lang.", ""]
    assert same_country(q, titles, texts) is None  # Dieterle's passage was not read: nothing settled
    titles[1], texts[1] = "William Dieterle", "William Dieterle (1893 - 1972) was a German-born American film director."
    answer, values, relation = same_country(q, titles, texts)
    assert (answer, relation) == ("yes", "director") and [v[1:3] for v in values] == [(2, "United States"),
                                                                                     (1, "United States")]
    texts[1] = "William Dieterle (1893 - 1972) was a German film director."
    assert same_country(q, titles, texts)[0] == "no"
    assert same_country("Are Kismet (1944 Film) and State Fair (1945 Film) from the same country?", titles,
                        texts) is None  # no country named in either film's passage
    assert same_country("Who directed Kismet (1944 film) and State Fair (1945 film)?", titles, texts) is None
    assert same_country(q.replace("have the", "not have the"), titles, texts) is None  # a negation: left to the reader
    # a bare name two titles share names neither
    assert options_named("Are Kismet and Fury from the same country?", ["Kismet (1944 film)", "Kismet (1955 film)",
                                                                        "Fury"]) == [2]


@pytest.mark.parametrize("seed", range(3))
def test_generated_same_country_questions_get_the_answer_their_countries_give(seed):
    from drkit.reader.countries import COUNTRY

    rng = random.Random(seed)
    demonyms = [n for n in COUNTRY if n[0].isupper() and n.endswith(("an", "ish", "ese", "ch", "ic"))]
    for i in range(50):
        picks = [rng.choice(demonyms) for _ in range(2)]
        if rng.random() < 0.4:
            picks[1] = picks[0]
        a, b = f"Place{i} Alpha", f"Place{i} Beta"
        passages = [ReaderPassage(str(k), t, f"{t} is a {d} company founded in 1950. It is large.")
                    for k, (t, d) in enumerate(zip((a, b), picks))]
        question = rng.choice([f"Are {a} and {b} located in the same country?", f"Are both {a} and {b} from the "
                               f"same country?", f"Do {a} and {b} share the same nationality?"])
        reading = tiny_reader_stub(question, passages)
        expected = "yes" if COUNTRY[picks[0]] == COUNTRY[picks[1]] else "no"
        assert reading.answer == reading.answer_type == expected, (question, picks)
        assert [v.country for v in reading.comparison.values] == [COUNTRY[p] for p in picks]


def tiny_reader_stub(question, passages):
    """What the rules answer (`settled`), or a reading that answers "no idea" where they settle nothing."""
    from drkit.reader.compare import settled, settled_reading
    from drkit.reader.reading import Reading

    e = ReaderExample("q", question, tuple(passages))
    found = settled(e)
    return settled_reading(e, found) if found is not None else Reading("no idea", "span", 0.5, None, (), {})


@pytest.mark.parametrize("question, texts, answer", [
    # "died younger" is a shorter life, not a later birth
    ("Who died younger, Ann Lee or Bob Ray?", ["Ann Lee (1900 - 1990) was a singer.", "Bob Ray (1890 - 1930) was a poet."],
     "Bob Ray"),
    ("Who lived longer, Ann Lee or Bob Ray?", ["Ann Lee (1900 - 1990) was a singer.", "Bob Ray (1890 - 1930) was a poet."],
     "Ann Lee"),
    # a thing's age is its own date, not a member's birth
    ("Which band is older, Ann Lee or Bob Ray?", ["Ann Lee is a band formed in 1990 by John Smith (born 1950).",
                                                  "Bob Ray is a band formed in 1985."], "Bob Ray"),
    ("Was Ann Lee or Bob Ray born first?", ["Ann Lee (born 3 May 1950) is a singer.",
                                            "Bob Ray (born 9 July 1948) is a singer."], "Bob Ray"),
    ("Who was born first out of Ann Lee and Bob Ray?", ["Ann Lee (born 1950) is a singer.",
                                                        "Bob Ray (born 1948) is a singer."], "Bob Ray"),
    # BC years run backwards
    ("Who was born first, Ann Lee or Bob Ray?", ["Ann Lee (384 BC - 322 BC) was a philosopher.",
                                                 "Bob Ray (100 BC - 44 BC) was a general."], "Ann Lee"),
    # "(1849-1916)": the second year after a plain hyphen
    ("Who died first, Ann Lee or Bob Ray?", ["Ann Lee (1849-1916) was a poet. His son died in 1950.",
                                             "Bob Ray (1850 - 1920) was a poet."], "Ann Lee"),
    # settled by nothing: lives within what whole years can hide; a film's release year is not a birth; someone
    # else's birth; a relation the rules do not read
    ("Who lived longer, Ann Lee or Bob Ray?", ["Ann Lee (31 December 1900 - 1 January 1980) was a poet.",
                                               "Bob Ray (1901 - 1980) was a poet."], None),
    ("Who was born first, Ann Lee or Bob Ray?", ["Ann Lee is a director known for Kismet (1944).",
                                                 "Bob Ray (born 1948) is a singer."], None),
    ("Who was born first, Ann Lee or Bob Ray?", ["Ann Lee was a singer. Her daughter was born in 1960.",
                                                 "Bob Ray (born 1948) is a singer."], None),
    ("Which film's director was born first, Ann Lee or Bob Ray?", ["Ann Lee is a 1944 film.",
                                                                   "Bob Ray is a 1950 film."], None),
])
def test_questions_the_review_found(question, texts, answer):
    got = compare(question, ["Ann Lee", "Bob Ray"], texts)
    assert (got and got.answer) == answer


def test_a_bridge_is_the_person_named_by_the_relations_word():
    titles = ["Kismet", "Fury", "Walter Lang", "Ed Wood", "Fritz Lang"]
    texts = ["Kismet is a 1944 film directed by Ed Wood and starring Walter Lang.",
             "Fury is a 1936 film directed by Fritz Lang.", "Walter Lang (1896 - 1972) was a director.",
             "Ed Wood was a director.", "Fritz Lang (1890 - 1976) was a director."]
    q = "Which film has the director who was born first, Kismet or Fury?"
    assert compare(q, titles, texts) is None  # Ed Wood's passage has no date; Walter Lang is not the director
    texts[3] = "Ed Wood (1924 - 1978) was a director."
    got = compare(q, titles, texts)
    assert got.answer == "Fury" and [v.via for v in got.values] == ["Ed Wood", "Fritz Lang"]
    texts[0] = "Kismet is a 1944 film starring Walter Lang, Ann Lee and others, and was directed later by Ed Wood."
    assert compare(q, titles, texts).values[0].via == "Ed Wood"  # "directed later by Ed Wood": words between
    titles[0:2] = ["Kismet (1944 film)", "Kismet (1955 film)"]
    assert compare("Which film came out first, Kismet or Fury?", titles, texts) is None  # which Kismet?


def test_a_settled_reading_names_each_option_s_bridge_sentence_then_its_date():
    from drkit.reader.compare import settled, settled_reading

    texts = ["Kismet is a 1944 film. It was directed by Ed Wood.", "Fury is a 1936 film directed by Fritz Lang.",
             "Ed Wood (1924 - 1978) was a director. He lived in Poughkeepsie.", "Fritz Lang (1890 - 1976) was a director."]
    passages = tuple(ReaderPassage(str(i), t, x) for i, (t, x) in enumerate(zip(["Kismet", "Fury", "Ed Wood", "Fritz Lang"],
                                                                                  texts)))
    e = ReaderExample("q", "Which film has the director who was born first, Kismet or Fury?", passages)
    reading = settled_reading(e, settled(e))
    assert reading.answer == "Fury" and reading.comparison.asked.relation == "director"
    assert [(s.passage_id, s.sentence, s.text) for s in reading.supporting] == [
        ("0", 1, "It was directed by Ed Wood."), ("2", 0, "Ed Wood (1924 - 1978) was a director."),
        ("1", 0, "Fury is a 1936 film directed by Fritz Lang."), ("3", 0, "Fritz Lang (1890 - 1976) was a director.")]


def test_long_questions_are_left_to_the_reader():
    q = "Was a or born " * 200 + "first?"  # the option forms' lazy matches would take minutes on this
    assert compare(q, ["a"], ["a (born 1900) x."]) is None and parse_question(q) is None


def test_hotpotqa_style_wordings():
    """Two comparison questions worded as HotpotQA's (its paper's examples), passages written as Wikipedia's."""
    from drkit.reader.same import same_country

    titles = ["Arthur's Magazine", "First for Women"]
    texts = ["Arthur's Magazine (1844–1846) was an American literary periodical published in Philadelphia.",
             "First for Women is a woman's magazine published by Bauer Media Group in the USA. The magazine was "
             "started in 1989."]
    got = compare("Which magazine was started first, Arthur's Magazine or First for Women?", titles, texts)
    assert got.answer == "Arthur's Magazine" and [d.text for v in got.values for d in v.dates] == ["1844", "1989"]
    titles = ["Scott Derrickson", "Ed Wood"]
    texts = ["Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer.",
             "Edward Davis Wood Jr. (October 10, 1924 – December 10, 1978) was an American filmmaker."]
    assert same_country("Were Scott Derrickson and Ed Wood of the same nationality?", titles, texts)[0] == "yes"
    assert compare("Who was born first, Scott Derrickson or Ed Wood?", titles, texts).answer == "Ed Wood"


def test_the_options_of_a_which_of_two_question_are_titles_read():
    from drkit.reader.compare import question_options

    titles = ["France", "England", "Paris", "Lyon", "Kismet (1944 film)", "Kismet (1955 film)", "Moon Over Miami"]
    for question, want in (("Which city is larger between Paris and Lyon?", ("Paris", "Lyon")),
                           ("Who was born first out of England and France?", ("England", "France")),
                           ("Which film came out first, Kismet (1944 film) or Kismet (1955 film)?",
                            ("Kismet (1944 film)", "Kismet (1955 film)")),
                           ("Is Paris or Lyon older?", ("Paris", "Lyon")),
                           ("What war was fought between England and France?", None),  # no choice
                           ("What is the distance between Paris and Lyon?", None),
                           ("Which film came out first, Moon Over Miami or Casablanca?", None),  # not a title read
                           ("Who directed Moon Over Miami?", None)):
        assert question_options(question, titles) == want, question
