"""Two-hop questions read as two one-hop questions (drkit.reader.decompose): the phrase found by hand in questions
of each form, the ones read whole, the titles, and the two-step reading against the plain readings it is made of."""

import dataclasses
import json

import pytest

from drkit.reader.decompose import Decomposer, Steps, about, named_in, read_in_two_steps, snap
from drkit.reader.examples import ReaderExample, ReaderPassage
from drkit.reader.reading import ReadConfig, Reading, Span, Supporting

PASSAGES = (ReaderPassage("f", "Blood Street", "Blood Street is a 1988 film. It was directed by Leo Fong."),
            ReaderPassage("k", "Kismet (1944 film)", "Kismet is a 1944 film directed by William Dieterle."),
            ReaderPassage("l", "Leo Fong", "Leo Fong was born in Canton. He directed films."))


@pytest.fixture(scope="module")
def decomposer():
    found = Decomposer.shared()
    if found is None:
        pytest.skip("spaCy's English pipeline is not installed")
    return found


@pytest.mark.parametrize("question, titles, inner, outer", [
    ("Where was the director of film Blood Street born?", ["Leo Fong", "Blood Street"],
     "What is the director of film Blood Street?", "Where was B born?"),
    ("What is the place of birth of the director of film Palo Alto (2013 Film)?", ["Palo Alto (2013 film)"],
     "What is the director of film Palo Alto (2013 Film)?", "What is the place of birth of B?"),
    ("Which country the composer of film Thunder On The Hill is from?", ["Thunder on the Hill"],
     "What is the composer of film Thunder On The Hill?", "Which country B is from?"),
    ("Why did John Middleton Murry's wife die?", ["John Middleton Murry"],
     "What is the wife of John Middleton Murry?", "Why did B die?"),
    ("When is Prince Raphael Rainer Of Thurn And Taxis's mother's birthday?", ["Prince Raphael Rainer of Thurn and Taxis"],
     "What is the mother of Prince Raphael Rainer Of Thurn And Taxis?", "When is B's birthday?"),
    # whatever the parser hangs on the named entity ("... Eye study"), the phrase ends with it
    ("Where did the director of film The Eagle'S Eye study?", ["The Eagle's Eye"],
     "What is the director of film The Eagle'S Eye?", "Where did B study?"),
    ("Where was Ann Lee's paternal grandmother born?", ["Ann Lee"],
     "What is the paternal grandmother of Ann Lee?", "Where was B born?"),
    ('Who is the paternal grandfather of "Ann Lee"?', ["Ann Lee"], "What is the father of Ann Lee?", "Who is the father of B?"),
    # the verb taken for a noun ("father study"), and a clause after the noun, are not the relation's
    ("Where did Ann Lee's father study?", ["Ann Lee"], "What is the father of Ann Lee?", "Where did B study?"),
    ("Where was Ann Lee's film director born?", ["Ann Lee"], "What is the film director of Ann Lee?", "Where was B born?"),
    # a kinship that is two relations, asked alone: each relation is a hop
    ("Who is the paternal grandfather of Ann Lee?", ["Ann Lee"], "What is the father of Ann Lee?", "Who is the father of B?"),
    ("Who is Ann Lee's maternal grandmother?", ["Ann Lee"], "What is the mother of Ann Lee?", "Who is the mother of B?"),
    ("Who is Ann Lee's mother-in-law?", ["Ann Lee"], "What is the spouse of Ann Lee?", "Who is the mother of B?"),
    ("Who is the father-in-law of Louise Of Mecklenburg-Güstrow?", ["Louise of Mecklenburg-Güstrow"],
     "What is the spouse of Louise Of Mecklenburg-Güstrow?", "Who is the father of B?"),
    # a name that is the parser's placeholder word, and one in quotes: each put back where it was
    ("Where was the director of Smith film Blood Street born?", ["Blood Street"],
     "What is the director of Smith film Blood Street?", "Where was B born?"),
    ('Where was the director of film "Blood Street" born?', ["Blood Street"],
     'What is the director of film "Blood Street"?', "Where was B born?"),
])
def test_two_hop_questions_by_hand(decomposer, question, titles, inner, outer):
    found = decomposer(question, titles)
    assert found is not None and found.inner == inner and found.outer("B") == outer


@pytest.mark.parametrize("question, titles", [
    ("Who is the father of Ann Lee?", ["Ann Lee"]),  # nothing is asked of the father: one hop
    ("Who is the father of Ann Lee", ["Ann Lee"]),
    ("What is the name of the father of Ann Lee?", ["Ann Lee"]),
    ("Who is Ann Lee's grandfather?", ["Ann Lee"]),  # the father's father or the mother's: which is not said
    ("Who is Ann Lee's brother-in-law?", ["Ann Lee"]),
    ("What is the place of birth of Ann Lee?", ["Ann Lee"]),
    ("Which film came out first, Blood Street or Kismet?", ["Blood Street", "Kismet (1944 film)"]),
    ("Do both films Blood Street and Kismet have the directors from the same country?", ["Blood Street", "Kismet"]),
    ("Where was the director of film Blood Street born?", ["Kismet (1944 film)", "Leo Fong"]),  # no title read named
    ("Who directed Kismet?", ["Kismet (1944 film)"]),
    # a noun before the name without its "of": the relation is elsewhere
    ("What year did the company Novair International Airways is part of dissolve?", ["Novair International Airways"]),
    ("What is the debt load carried by the country Dai Jitao is from?", ["Dai Jitao"]),
])
def test_questions_read_whole(decomposer, question, titles):
    assert decomposer(question, titles) is None


def test_titles_named_matched_and_snapped():
    titles = [p.title for p in PASSAGES]
    q = "Who directed Kismet, and is Blood Street older than Kismets?"
    assert q[slice(*named_in(q, titles))] == "Blood Street"  # the longest; "Kismet" without its suffix is shorter
    assert named_in("Who directed Kismets?", titles) is None  # whole words only
    assert named_in("Who directed KISMET?", titles) == (13, 19)
    assert about(PASSAGES, "leo fong") == (2,) and about(PASSAGES, "Kismet") == (1,)
    assert about(PASSAGES, "Walter Lang") == (0, 1, 2)  # no page of its own was read: all of them
    assert snap("Leo Fong, who directed it", PASSAGES, "Blood Street") == "Leo Fong"
    assert snap("Fong", PASSAGES, "Blood Street") == "Leo Fong"  # a part of a title
    assert snap("Blood Street", PASSAGES, "Blood Street") == "Blood Street"  # never the named entity's own title
    assert snap("William Dieterle", PASSAGES, "Blood Street") == "William Dieterle"
    assert snap("Mecklenburg", [ReaderPassage("m", "Mecklenburg-Schwerin", "")], "X") == "Mecklenburg"  # a hyphen joins


def test_an_inner_reading_without_a_span_leaves_the_question_to_be_read_whole(decomposer):
    e = ReaderExample("q", "Where was the director of film Blood Street born?", PASSAGES)
    plan = decomposer(e.question, [p.title for p in PASSAGES])
    whole = reading("Canton", 2)
    asked = []

    def read(examples):
        asked.append([x.question for x in examples])
        return [dataclasses.replace(reading("yes", 0), answer="yes", answer_type="yes", span=None) for _ in examples]

    def read_whole(examples):
        asked.append([x.question for x in examples])
        return [whole for _ in examples]

    assert read_in_two_steps(read, [e], [plan], read_whole) == [whole]
    assert asked == [["What is the director of film Blood Street?"], [e.question]]


def reading(text: str, passage: int, sentence: int = 0) -> Reading:
    return Reading(text, "span", 0.9, Span(text, passage, sentence, 0, len(text), 1.0),
                   (Supporting(passage, sentence, "?", "a sentence", 0.8),), {"span": 0.9, "yes": 0.05, "no": 0.05})


def test_two_steps_read_the_named_page_then_the_bridges_page(decomposer):
    e = ReaderExample("q", "Where was the director of film Blood Street born?", PASSAGES)
    plan = decomposer(e.question, [p.title for p in PASSAGES])
    asked = []

    def read(examples):
        asked.append([(x.question, [p.id for p in x.passages], x.not_answers, x.answer_among) for x in examples])
        first = len(asked) == 1
        return [reading("Leo Fong, who directed it" if first else "Canton", 0) for _ in examples]

    [got] = read_in_two_steps(read, [e], [plan])
    # each hop's answer is not where it starts from; the inner one's is best the name of another passage read
    assert asked == [[("What is the director of film Blood Street?", ["f"], ("Blood Street",),
                       ("Kismet (1944 film)", "Leo Fong"))],
                     [("Where was Leo Fong born?", ["l"], ("Leo Fong",), ())]]
    assert got.answer == "Canton" and got.span.passage == 2  # numbered as in the example
    assert [(s.passage, s.sentence) for s in got.supporting] == [(0, 0), (2, 0)]  # both readings' evidence
    assert got.steps == Steps("What is the director of film Blood Street?", "Leo Fong", "Where was Leo Fong born?")


def test_the_reader_reads_in_two_steps_as_two_plain_readings(decomposer, tiny_reader):
    from drkit.qa.answer import reading_row

    e = ReaderExample("q", "Where was the director of film Blood Street born?", PASSAGES)
    other = ReaderExample("o", "Who directed Kismet?", PASSAGES)
    whole = ReadConfig(decompose=False)
    got = tiny_reader.read([e])[0]
    # by hand: the inner question on Blood Street's page, its span snapped to a title, then the outer question
    inner = tiny_reader.read([ReaderExample("q", got.steps.inner, PASSAGES[:1], not_answers=("Blood Street",),
                                            answer_among=("Kismet (1944 film)", "Leo Fong"))], config=whole)[0]
    bridge = snap(inner.span.text, PASSAGES, "Blood Street")
    keep = about(PASSAGES, bridge)
    outer = tiny_reader.read([ReaderExample("q", f"Where was {bridge} born?", tuple(PASSAGES[i] for i in keep),
                                            not_answers=(bridge,))], config=whole)[0]
    assert got.steps == Steps("What is the director of film Blood Street?", bridge, f"Where was {bridge} born?")
    assert (got.answer, got.answer_type, got.type_prob) == (outer.answer, outer.answer_type, outer.type_prob)
    assert got.span.text == outer.span.text and got.span.passage == keep[outer.span.passage]
    assert tiny_reader.read([e], config=whole)[0].steps is None
    assert tiny_reader.read([other])[0] == tiny_reader.read([other], config=whole)[0]  # one hop: read whole
    # in a batch, each question as read alone (up to the float sums' order), in its order
    mixed = tiny_reader.read([other, e, other], batch_size=8)
    assert [x.steps is not None for x in mixed] == [False, True, False] and mixed[1].answer == got.answer
    row = reading_row(got, PASSAGES)
    assert row["steps"] == {"inner": got.steps.inner, "bridge": bridge, "outer": got.steps.outer}
    json.dumps(row)


def test_a_span_is_never_one_of_the_names_the_answer_is_not(tiny_reader):
    e = ReaderExample("q", "Who was born in Canton?", PASSAGES)
    first = tiny_reader.read([e], config=ReadConfig(decompose=False))[0].span.text
    again = tiny_reader.read([ReaderExample("q", e.question, PASSAGES, not_answers=(first,))])[0].span.text
    assert again != first and again.strip()


def test_a_span_is_best_one_among_the_names_given(tiny_reader):
    from drkit.reader.clues import held_title

    e = ReaderExample("q", "Who was born in Canton?", PASSAGES)
    whole = ReadConfig(decompose=False)
    first = tiny_reader.read([e], config=whole)[0].span
    # a name the best span is not (nor holds, nor is held by): one of two in different passages
    name = next(n for n in ("William Dieterle", "Leo Fong") if held_title(first.text, [n]) is None)
    among = tiny_reader.read([dataclasses.replace(e, answer_among=(name,))], config=whole)[0].span
    assert held_title(among.text, [name]) == name and among.score <= first.score and among != first
    # no span among the best names one: the best span, as without the names
    none = tiny_reader.read([dataclasses.replace(e, answer_among=("Zzyzx Quorp",))], config=whole)[0].span
    assert none == first


def test_others_are_the_titles_not_about_the_named_entity():
    from drkit.reader.decompose import others

    titles = [ReaderPassage(str(i), t, "") for i, t in enumerate(["Kismet (1944 film)", "Kismet", "KISMET!", "Leo Fong", ""])]
    own = about(titles, "Kismet")
    assert own == (0, 1, 2)
    assert others(titles, "Kismet") == tuple(p.title for i, p in enumerate(titles) if i not in own)


def test_hop_sources_are_the_two_readings_of_a_training_question(decomposer):
    from drkit.reader.decompose import hop_sources
    from drkit.reader.examples import OrderConfig, Source, epoch_examples

    film, kismet, leo = PASSAGES
    asked = Source("q1", "Where was the director of film Blood Street born?", ("Canton",), (film, leo), (kismet,),
                   ("Canton",), "compositional")
    inner, outer = hop_sources([asked], decomposer)
    # the inner hop: the named entity's passage, answered by the bridge it names; the outer: the bridge's passage
    assert (inner.question, inner.answers, inner.gold, inner.qtype) == (
        "What is the director of film Blood Street?", ("Leo Fong",), (film,), "hop-inner")
    assert (outer.question, outer.answers, outer.gold, outer.qtype) == ("Where was Leo Fong born?", ("Canton",), (leo,),
                                                                         "hop-outer")
    assert inner.alone and outer.alone and not asked.alone
    # read on their gold passages alone, where the question itself draws its distractor too
    got = epoch_examples([asked, inner, outer], OrderConfig(passages=5), seed=0, epoch=0)
    assert [sorted(p.id for p in e.passages) for e in got] == [["f", "k", "l"], ["f"], ["l"]]
    # none where a part is not found: the answer not in the bridge's page, no bridge named, a yes/no answer,
    # a KB question, a question the parser does not split
    nowhere = Source("q2", asked.question, ("Paris",), (film, leo), (), (), "compositional")
    unnamed = Source("q3", asked.question, ("Canton",), (film, ReaderPassage("m", "Mo Li", "Mo Li was born in Canton.")),
                     (), (), "compositional")
    yes = Source("q4", "Was the director of film Blood Street born in Canton?", ("yes",), (film, leo), (), (), "x")
    kb = Source("kb-1", asked.question, ("Canton",), (film, leo), (), (), "kb")
    whole = Source("q5", "Who directed Blood Street and Kismet?", ("Leo Fong",), (film, kismet), (), (), "x")
    assert hop_sources([nowhere, unnamed, yes, kb, whole], decomposer) == []
