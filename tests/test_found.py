"""Entities found in the text by rules (drkit.index.found, `drkit index --entities found`)."""

import json

from drkit.index.found import find_in_text, found_entities, word_case_counts

TEXTS = [
    "Corey Snide( born December 19, 1993) is an American actor. He studied at the Colonie Central High School.",
    "Lee Hall( born 20 September 1966) is an English playwright. He wrote the 2000 film Billy Elliot.",
    "The University of Copenhagen is in Denmark. In 1479 it was founded, and in May 1480 it opened.",
    "Elton John's song was played. When Guy died, Hugh ruled. He was the King of Italy. The price was 1234.56 crowns.",
    "the actor and the playwright met in the city; he and she wrote in the spring, and stayed in when it rained.",
]


def test_dates_and_names_by_hand():
    upper, lower = word_case_counts(TEXTS)
    assert find_in_text(TEXTS[0], upper, lower) == ["December 19, 1993", "Corey Snide", "American",
                                                    "Colonie Central High School"]
    assert find_in_text(TEXTS[1], upper, lower) == ["20 September 1966", "2000", "Lee Hall", "English", "Billy Elliot"]
    # a connector inside a name, a leading "The" dropped, a year alone and a month with its year; a sentence's
    # first word that the corpus writes in lower case ("In") is not a name
    assert find_in_text(TEXTS[2], upper, lower) == ["May 1480", "1479", "University of Copenhagen", "Denmark"]
    # a possessive ends a name; "When" (lower case elsewhere) does not start one; a decimal is not a year
    assert find_in_text(TEXTS[3], upper, lower) == ["Elton John", "Guy", "Hugh", "King of Italy"]
    assert find_in_text(TEXTS[4], upper, lower) == []


def test_found_entities_counts_forms_once_most_frequent_first():
    names = found_entities(TEXTS + ["Hugh met Hugh."])
    assert names[0] == "Hugh" and len(names) == len(set(names))
    assert found_entities(TEXTS + ["Hugh met Hugh."], min_count=2) == ["Hugh"]


def test_index_with_found_entities(tmp_path):
    from drkit.index.build import build_index

    rows = [{"id": str(i), "title": t, "text": x} for i, (t, x) in enumerate(zip(
        ["Corey Snide", "Lee Hall", "University of Copenhagen", "Elton John", "Spring"], TEXTS))]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    index = build_index(tmp_path / "c.jsonl", tmp_path / "ix", entities=["titles", "found"], log=lambda *a: None)
    for name in ("Corey Snide", "December 19, 1993", "Colonie Central High School", "King of Italy", "Spring"):
        assert index.entities.lookup(name) is not None, name
    assert json.loads((tmp_path / "ix" / "manifest.json").read_text())["inputs"]["entities"] == ["titles", "found"]
    # the found entities are linked in the text: a mention of the date in Corey Snide's passage
    date = index.entities.lookup("December 19, 1993")
    assert any(int(m[0]) == date for m in index.mentions)
