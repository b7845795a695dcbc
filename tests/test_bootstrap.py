"""Facts found by the patterns a KB teaches (drkit.dense.bootstrap, `drkit bootstrap-kb`)."""

import json
import re

import pytest

from drkit.data.kb import read_kb
from drkit.dense.bootstrap import BootstrapConfig, Pattern, bootstrap_kb, find_facts, learn_patterns
from drkit.errors import ConfigError

FILMS = {
    "Red Door": "Red Door is a 1990 film directed by Ann Lee. It stars Bob Ray.",
    "Blue Hill": "Blue Hill is a 1991 film directed by Cid Moe. It stars Dee Fox.",
    "Green Sea": "Green Sea is a 1992 film directed by Eve Kim. It stars Fay Lin.",
    "Grey Moon": "Grey Moon is a 1993 film directed by Gus Orr. It stars Hal Pip.",
    "Gold Sun": "Gold Sun is a 1994 film directed by Ivy Jo. It stars Jon Ku.",
    # the pattern fires where the page is not about a film: what it finds is what the text says
    "Ann Lee": "Ann Lee is an actress. She was directed by Cid Moe in Blue Hill.",
}
KB = ["Red Door|director|Ann Lee", "Blue Hill|director|Cid Moe", "Green Sea|director|Eve Kim",
      "Red Door|cast member|Bob Ray", "Blue Hill|cast member|Dee Fox"]


@pytest.fixture(scope="module")
def films(tmp_path_factory):
    from drkit.index.build import build_index

    d = tmp_path_factory.mktemp("films")
    rows = [{"id": str(i), "title": t, "text": x} for i, (t, x) in enumerate(FILMS.items())]
    (d / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "kb.txt").write_text("".join(line + "\n" for line in KB))
    index = build_index(d / "corpus.jsonl", d / "ix", entities=["titles", "found"], log=lambda *a: None)
    return d, index


def slow_patterns(index, kb_lines, context, min_support, min_precision):
    """The module docstring's rule written out plainly: every mention of every KB subject's page, every length of
    the words before it, scored against every relation the subject has in the KB."""
    ents = index.entities
    facts = {}
    for line in kb_lines:
        s, r, o = line.split("|")
        facts.setdefault((ents.lookup(s), r), set()).add(ents.lookup(o))
    counts = {}
    for p in range(index.n_passages):
        s = int(index.passage_entity[p])
        text = index.passage_text(p)
        for m in index.mentions:
            if int(m[1]) != p or int(m[0]) == s:
                continue
            words = [w.lower() for w in re.findall(r"\w+|[^\w\s]", text[:int(m[4])])]
            for n in range(1, min(context, len(words)) + 1):
                for (fs, r), objects in facts.items():
                    if fs != s:
                        continue
                    key = (r, tuple(words[-n:]), ents.kinds_or_none()[int(m[0])])
                    right, wrong = counts.get(key, (0, 0))
                    counts[key] = (right + 1, wrong) if int(m[0]) in objects else (right, wrong + 1)
    return {k: v for k, v in counts.items() if v[0] >= min_support and v[0] / sum(v) >= min_precision}


@pytest.mark.parametrize("context,min_support,min_precision", [(3, 3, 0.7), (2, 2, 0.5), (1, 1, 0.3)])
def test_patterns_equal_the_plain_rule(films, context, min_support, min_precision):
    _, index = films
    config = BootstrapConfig(context=context, min_support=min_support, min_precision=min_precision)
    got = {(q.relation, q.words, q.kind): (q.right, q.wrong)
           for q in learn_patterns(index, read_kb(films[0] / "kb.txt"), config)}
    assert got == slow_patterns(index, KB, context, min_support, min_precision)


def test_directed_by_is_learned_and_finds_the_other_films_directors(films):
    d, index = films
    patterns = learn_patterns(index, read_kb(d / "kb.txt"))
    assert {q.relation for q in patterns} == {"director"}  # two cast facts are under the support of 3
    assert any(q.words == ("directed", "by") and q.right == 3 and q.wrong == 0 for q in patterns)
    ents, names = index.entities, index.entities.names
    found = {(names[s], r, names[o]) for s, r, o in find_facts(index, patterns)}
    assert found == {("Red Door", "director", "Ann Lee"), ("Blue Hill", "director", "Cid Moe"),
                     ("Green Sea", "director", "Eve Kim"), ("Grey Moon", "director", "Gus Orr"),
                     ("Gold Sun", "director", "Ivy Jo"), ("Ann Lee", "director", "Cid Moe")}
    # skipped articles give no fact
    grey = index.article_titles.index("Grey Moon")
    assert ("Grey Moon", "director", "Gus Orr") not in {
        (names[s], r, names[o]) for s, r, o in find_facts(index, patterns, skip_articles=[grey])}
    assert ents.lookup("Hal Pip") is not None  # an entity, but no pattern reaches it
    assert find_facts(index, []) == []


def test_bootstrap_kb_writes_the_kb_then_the_new_facts_and_a_report(films, tmp_path):
    d, index = films
    report = bootstrap_kb(d / "ix", d / "kb.txt", tmp_path / "kb-more.txt", log=lambda *a: None)
    lines = (tmp_path / "kb-more.txt").read_text().splitlines()
    assert lines[:len(KB)] == KB
    assert sorted(lines[len(KB):]) == ["Ann Lee|director|Cid Moe", "Gold Sun|director|Ivy Jo", "Grey Moon|director|Gus Orr"]
    assert report["new_facts"] == 3 and report["new_by_relation"] == {"director": 3} and report["written"] == len(lines)
    assert json.loads((tmp_path / "kb-more.txt.json").read_text()) == report
    assert [t.subject for t in read_kb(tmp_path / "kb-more.txt")][-1] in FILMS  # a KB file pretraining reads


def test_bad_settings_and_an_empty_kb_are_refused(films, tmp_path):
    d, _ = films
    for bad in ({"context": 0}, {"min_support": 0}, {"min_precision": 0}, {"min_precision": 1.5}):
        with pytest.raises(ConfigError):
            BootstrapConfig(**bad)
    (tmp_path / "empty.txt").write_text("\n")
    with pytest.raises(ConfigError, match="no facts"):
        bootstrap_kb(d / "ix", tmp_path / "empty.txt", tmp_path / "out.txt", log=lambda *a: None)
    assert Pattern("r", ("a",), None, 3, 1).precision == 0.75


def test_the_command_skips_the_listed_articles_and_names_a_bad_id(films, tmp_path, capsys):
    from drkit.cli import main

    d, _ = films
    grey = str(list(FILMS).index("Grey Moon"))
    (tmp_path / "skip.txt").write_text(f"{grey}\n\n")
    assert main(["bootstrap-kb", "--index", str(d / "ix"), "--kb", str(d / "kb.txt"), "--out", str(tmp_path / "kb.txt"),
                 "--skip-articles", str(tmp_path / "skip.txt")]) == 0
    lines = (tmp_path / "kb.txt").read_text().splitlines()
    assert "Gold Sun|director|Ivy Jo" in lines and not any(line.startswith("Grey Moon") for line in lines)
    assert "found 2 new facts" in capsys.readouterr().err
    (tmp_path / "bad.txt").write_text(f"{grey}\nnot-an-id\n")
    assert main(["bootstrap-kb", "--index", str(d / "ix"), "--kb", str(d / "kb.txt"), "--out", str(tmp_path / "x.txt"),
                 "--skip-articles", str(tmp_path / "bad.txt")]) != 0
    err = capsys.readouterr().err
    assert "bad.txt:2:" in err and "not-an-id" in err and "Traceback" not in err
