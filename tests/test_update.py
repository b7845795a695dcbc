"""Growing an index without a rebuild (`drkit add`, `drkit remove`, `drkit compact`): the compacted index
equals a build of the same articles array for array (vectors bit for bit, answers and scores exactly), the
live view before compaction is within the stated tolerance, removed passages are never cited, a SIGKILL
during `add` leaves the previous version, and bad input is refused with nothing changed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from drkit.cli import main
from drkit.dense.mentions import EmbedConfig, MentionIndex, build_mention_index
from drkit.dense.update import add_documents, compact, remove_documents
from drkit.errors import ArtifactError, ConfigError
from drkit.index.build import build_index
from drkit.index.live import read_state
from drkit.index.segments import update_lock
from drkit.index.sparse import SparseIndex

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
quiet = lambda *a: None  # noqa: E731
ARRAYS = ("mentions", "entity_passage_indptr", "entity_passage", "entity_passage_score", "passage_article", "pieces",
          "piece_offsets", "_text_offsets", "_text")


def assert_same_index(a: SparseIndex, b: SparseIndex, keys: bool = True) -> None:
    """Array for array. `keys=False`: article ids aside (a WikiMovies file's ids are its line numbers, so an added
    file's articles get ids "SEGMENT:LINE" where a build of one file gives other line numbers)."""
    for name in ARRAYS:
        assert np.array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name))), name
    assert a.entities.to_records() == b.entities.to_records()
    assert a.article_titles == b.article_titles
    assert a.article_keys == b.article_keys or not keys


def split_sample(d: Path, cut: int = 320) -> None:
    """The sample's 354 WikiMovies articles as A (the first `cut`), B (the rest) and A+B."""
    articles = [a for a in (SAMPLE / "wiki.txt").read_text(encoding="utf-8").split("\n\n") if a.strip()]
    (d / "A.txt").write_text("\n\n".join(articles[:cut]) + "\n", encoding="utf-8")
    (d / "B.txt").write_text("\n\n".join(articles[cut:]) + "\n", encoding="utf-8")
    (d / "AB.txt").write_text("\n\n".join(articles) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def grown(tmp_path_factory, tiny_base):
    """A 2-hop model trained on an index of A; then B added to that index (its live view), A+B built at once,
    and the grown index compacted; each with its mention index."""
    from drkit.dense.encoder import EncoderConfig
    from drkit.dense.pretrain import PretrainConfig, pretrain
    from drkit.reason.follow import FollowConfig
    from drkit.reason.model import ModelConfig
    from drkit.reason.train import TrainConfig, train

    d = tmp_path_factory.mktemp("grown")
    split_sample(d)
    kb = SAMPLE / "kb.txt"
    build_index(d / "A.txt", d / "index", kb=kb, log=quiet)
    pretrain(d / "index", kb, d / "enc", PretrainConfig(steps=0, precision="fp32"), EncoderConfig(base=str(tiny_base), dim=32),
             log=quiet)
    build_mention_index(d / "index", d / "enc", d / "mentions", EmbedConfig(precision="fp32"), log=quiet)
    dev = d / "dev.txt"
    dev.write_text("".join((SAMPLE / "2-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines(True)[:16]),
                   encoding="utf-8")
    train(d / "index", d / "mentions", SAMPLE / "2-hop" / "qa_train.txt", dev, d / "run",
          model_config=ModelConfig(hops=2, shared_layers=1, hop_layers=1), follow_config=FollowConfig(top_k=100),
          config=TrainConfig(steps=4, batch_size=4, precision="fp32", eval_every=4), log=quiet)
    build_index(d / "AB.txt", d / "full", kb=kb, log=quiet)
    build_mention_index(d / "full", d / "enc", d / "full-mentions", EmbedConfig(precision="fp32"), log=quiet)
    report = add_documents(d / "index", d / "B.txt", [d / "mentions"], log=quiet)
    compact(d / "index", d / "compact", [d / "mentions"], [d / "compact-mentions"], log=quiet)
    return d, report


def questions(n: int = 40) -> list[str]:
    lines = (SAMPLE / "2-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("\t")[0] for line in lines[:n]]


def answers(index: Path, run: Path, mentions: Path, qs: list[str]):
    from drkit.qa.pipeline import DrKIT

    kit = DrKIT.load(index, run, mentions)
    return kit.answer_batch(qs, top=5, chain_top=3)


def test_compact_of_add_equals_a_build_of_all_articles(grown):
    d, report = grown
    assert report["articles"] == 34 and report["version"] == 1
    compacted = SparseIndex.load(d / "compact")
    assert_same_index(compacted, SparseIndex.load(d / "full"), keys=False)
    assert compacted.article_keys[320] == "000001:1"
    # its corpus files as they were given (their own skip lists), not the article total of the build
    sources = compacted.manifest["sources"]
    assert len(sources) == 2 and all("articles" not in s for s in sources)
    assert SparseIndex.load(d / "full").manifest["sources"][0]["articles"] == compacted.manifest["counts"]["articles"]
    compacted, full = MentionIndex.load(d / "compact-mentions"), MentionIndex.load(d / "full-mentions")
    assert np.array_equal(compacted.vectors, full.vectors)  # reused vectors are bit for bit what embed computes
    assert compacted.manifest["embedding"]["reused"] == SparseIndex.load(d / "full").n_mentions


def test_answers_after_compaction_equal_those_of_a_build(grown):
    d, _ = grown
    qs = questions()
    a = answers(d / "compact", d / "run", d / "compact-mentions", qs)
    b = answers(d / "full", d / "run", d / "full-mentions", qs)
    for x, y in zip(a, b):
        assert [(t.entity, t.prob) for t in x.answers] == [(t.entity, t.prob) for t in y.answers]
        assert [[(e.entity, e.evidence.passage_id) for e in h.top] for h in x.chain] == \
            [[(e.entity, e.evidence.passage_id) for e in h.top] for h in y.chain]


def test_live_view_before_compaction_is_within_the_stated_tolerance(grown):
    """Before compaction (IDF frozen at the build of A), the live view has the arrays of a build of A+B but
    the TF-IDF scores of EP: the same mentions, passages and vectors; every entity keeps at least 90% of its
    top-mu passages; the top answer is the same for at least 90% of the questions, its probability within 0.05."""
    d, _ = grown
    live, full = SparseIndex.load(d / "index"), SparseIndex.load(d / "full")
    assert live.live is not None and live.live.version == 1
    for name in ("mentions", "passage_article", "pieces", "piece_offsets", "_text"):
        assert np.array_equal(np.asarray(getattr(live, name)), np.asarray(getattr(full, name))), name
    assert np.array_equal(MentionIndex.load(d / "mentions").for_index(live).vectors,
                          MentionIndex.load(d / "full-mentions").vectors)
    overlap = []
    for e in range(full.n_entities):
        x = set(live.entity_passage[live.entity_passage_indptr[e]:live.entity_passage_indptr[e + 1]].tolist())
        y = set(full.entity_passage[full.entity_passage_indptr[e]:full.entity_passage_indptr[e + 1]].tolist())
        overlap.append(len(x & y) / len(y) if y else float(not x))
    assert min(overlap) >= 0.9
    qs = questions()
    a = answers(d / "index", d / "run", d / "mentions", qs)
    b = answers(d / "full", d / "run", d / "full-mentions", qs)
    same = [x.answers[0].entity == y.answers[0].entity for x, y in zip(a, b)]
    assert np.mean(same) >= 0.9
    assert max(abs(x.answers[0].prob - y.answers[0].prob) for x, y, s in zip(a, b, same) if s) <= 0.05


def test_a_model_trained_before_the_update_answers_over_the_added_articles(grown):
    """The model was trained on A; a question about a film only B has is answered from B's passages."""
    d, _ = grown
    a_titles = set(SparseIndex.load(d / "full").article_titles[:320])
    live = SparseIndex.load(d / "index")
    film = next(t for t in live.article_titles[320:] if t not in a_titles and live.entities.lookup(t) is not None)
    result = answers(d / "index", d / "run", d / "mentions", [f"who directed [{film}]"])[0]
    assert result.question_entity.lower() == film.lower()
    cited = {live.article_titles[int(live.passage_article[e.evidence.passage_id])] for e in result.chain[0].top}
    assert film in cited  # the first hop reads the added article about the film


def test_removed_articles_are_never_cited(grown, tmp_path):
    import shutil

    d, _ = grown
    index = tmp_path / "index"
    shutil.copytree(d / "index", index)
    live = SparseIndex.load(index)
    gone = live.article_keys[::7]  # base and segment articles
    (tmp_path / "ids.txt").write_text("\n".join(gone) + "\n", encoding="utf-8")
    assert remove_documents(index, tmp_path / "ids.txt", log=quiet) == {"version": 2, "removed": len(gone)}
    after = SparseIndex.load(index)
    assert after.n_passages == live.n_passages - len(gone)
    assert not set(after.article_keys) & set(gone)
    texts = {live.passage_text(p) for p in range(live.n_passages) if live.article_keys[live.passage_article[p]] in gone}
    for result in answers(index, d / "run", d / "mentions", questions(60)):
        for hop in result.chain:
            for e in hop.top:
                assert e.evidence.text not in texts
                assert after.article_keys[int(after.passage_article[e.evidence.passage_id])] not in gone
    assert len(MentionIndex.load(d / "mentions").for_index(after).vectors) == after.n_mentions


def test_bad_updates_are_refused_and_change_nothing(grown, tmp_path, capsys):
    import shutil

    d, _ = grown
    index = tmp_path / "index"
    shutil.copytree(d / "index", index)
    before = (index / "CURRENT").read_text()
    (tmp_path / "ids.txt").write_text("1\nno-such-article\n", encoding="utf-8")
    assert main(["remove", "--index", str(index), "--ids", str(tmp_path / "ids.txt")]) == 2
    assert "no-such-article" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="nothing was removed"):
        remove_documents(index, ["no-such-article"], log=quiet)
    with update_lock(index):  # a second update while one runs is refused at once
        with pytest.raises(ArtifactError, match="being updated"):
            add_documents(index, d / "B.txt", [d / "mentions"], log=quiet)
    with pytest.raises(ConfigError, match="give one --mentions-out"):
        compact(index, tmp_path / "c", [d / "mentions"], [], log=quiet)
    with pytest.raises(ConfigError, match="compact"):
        build_mention_index(index, d / "enc", tmp_path / "m", log=quiet)
    assert (index / "CURRENT").read_text() == before


def test_a_compacted_index_grows_again_without_reusing_ids(grown, tmp_path):
    """WikiMovies ids are line numbers, prefixed by the segment: a compacted index numbers its segments after
    those it was compacted from, so adding the same file again gives new ids, not a clash."""
    import shutil

    d, _ = grown
    shutil.copytree(d / "compact", tmp_path / "c")
    report = add_documents(tmp_path / "c", d / "B.txt", [d / "compact-mentions"], log=quiet)
    assert report["segment"] == "000002" and report["replaced_articles"] == 0
    keys = SparseIndex.load(tmp_path / "c").article_keys
    assert len(keys) == len(set(keys)) == 354 + 34 and keys[-1].startswith("000002:")
    with pytest.raises(ConfigError, match="input of the compaction"):
        compact(tmp_path / "c", tmp_path / "c", log=quiet)


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


PAGES = [
    {"id": "a1", "title": "Ada Lovelace", "text": "Ada Lovelace worked with Charles Babbage on the Analytical Engine."},
    {"id": "a2", "title": "Charles Babbage", "text": "Charles Babbage designed the Analytical Engine in London."},
    {"id": "a3", "title": "Analytical Engine", "text": "The Analytical Engine was a design by Charles Babbage."},
    {"id": "a4", "title": "London", "text": "London is the capital where Charles Babbage lived."},
]
ADDED = [
    {"id": "b1", "title": "Alan Turing", "text": "Alan Turing read the notes of Ada Lovelace in London."},
    {"id": "b2", "title": "Bletchley Park", "text": "Alan Turing worked at Bletchley Park near London."},
]


def test_titles_corpus_grows_with_new_entities_and_compacts_to_a_build(tmp_path, tiny_base):
    """A title-entity JSONL corpus (the HotpotQA setting): the added titles become entities, the added passages
    link them and the old ones; compaction links the old passages to them too and equals a build of all."""
    from drkit.dense.encoder import EncoderConfig
    from drkit.dense.pretrain import PretrainConfig, pretrain

    _jsonl(tmp_path / "a.jsonl", PAGES)
    _jsonl(tmp_path / "b.jsonl", ADDED)
    _jsonl(tmp_path / "ab.jsonl", PAGES + ADDED)
    build_index(tmp_path / "a.jsonl", tmp_path / "index", entities="titles", log=quiet)
    pretrain(tmp_path / "index", None, tmp_path / "enc", PretrainConfig(steps=0, precision="fp32"),
             EncoderConfig(base=str(tiny_base), dim=32), log=quiet)
    build_mention_index(tmp_path / "index", tmp_path / "enc", tmp_path / "m", EmbedConfig(precision="fp32"), log=quiet)
    assert main(["add", "--index", str(tmp_path / "index"), "--corpus", str(tmp_path / "b.jsonl"),
                 "--mentions", str(tmp_path / "m")]) == 0
    live = SparseIndex.load(tmp_path / "index")
    assert live.entities.names[-2:] == ["Alan Turing", "Bletchley Park"]
    turing = live.entities.lookup("Alan Turing")
    assert {int(p) for p in live.mentions[live.mentions[:, 0] == turing, 1]} == {4, 5}  # linked in b1 and b2 only
    with pytest.raises(ConfigError, match="in the index already"):  # JSONL ids are the user's: no silent duplicate
        add_documents(tmp_path / "index", tmp_path / "b.jsonl", [tmp_path / "m"], log=quiet)
    assert main(["compact", "--index", str(tmp_path / "index"), "--out", str(tmp_path / "c"),
                 "--mentions", str(tmp_path / "m"), "--mentions-out", str(tmp_path / "cm")]) == 0
    build_index(tmp_path / "ab.jsonl", tmp_path / "full", entities="titles", log=quiet)
    build_mention_index(tmp_path / "full", tmp_path / "enc", tmp_path / "fm", EmbedConfig(precision="fp32"), log=quiet)
    assert_same_index(SparseIndex.load(tmp_path / "c"), SparseIndex.load(tmp_path / "full"))
    assert np.array_equal(MentionIndex.load(tmp_path / "cm").vectors, MentionIndex.load(tmp_path / "fm").vectors)
    # the compacted index keeps its corpus files: it compacts again after more updates, without the originals
    assert main(["remove", "--index", str(tmp_path / "c"), "--ids", str(_ids(tmp_path, ["a4"]))]) == 0
    # fm (of the build of a+b, which equals c array for array) is a mention index of c too: it gets vectors too
    assert main(["add", "--index", str(tmp_path / "c"), "--corpus", str(tmp_path / "b.jsonl"), "--replace",
                 "--mentions", str(tmp_path / "cm"), "--mentions", str(tmp_path / "fm")]) == 0
    (tmp_path / "a.jsonl").unlink()
    compact(tmp_path / "c", tmp_path / "c2", [tmp_path / "cm"], [tmp_path / "cm2"], log=quiet)
    _jsonl(tmp_path / "final.jsonl", PAGES[:3] + ADDED)
    build_index(tmp_path / "final.jsonl", tmp_path / "final", entities="titles", log=quiet)
    assert_same_index(SparseIndex.load(tmp_path / "c2"), SparseIndex.load(tmp_path / "final"))


def _ids(folder: Path, ids: list[str]) -> Path:
    path = folder / "ids.txt"
    path.write_text("\n".join(ids) + "\n", encoding="utf-8")
    return path


KILLER = """
import os, signal, sys
import drkit.dense.update as update
point = sys.argv[1]
if point == "commit":  # the segment and its vectors are written, CURRENT not yet replaced
    update.write_state = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
else:  # the segment's sparse part is written, its mentions half embedded
    update.embed_mentions = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
update.add_documents(sys.argv[2], sys.argv[3], [sys.argv[4]], log=lambda *a: None)
"""


@pytest.mark.parametrize("point", ["embed", "commit"])
def test_sigkill_during_add_leaves_the_previous_version(grown, tmp_path, point):
    import shutil

    d, _ = grown
    index = tmp_path / "index"
    shutil.copytree(d / "index", index)
    before = SparseIndex.load(index)
    state = read_state(index)
    (tmp_path / "c.jsonl").write_text(json.dumps({"id": "new-1", "title": "Kismet Again",
                                                  "text": "Kismet Again stars Marlene Dietrich."}) + "\n")
    proc = subprocess.run([sys.executable, "-c", KILLER, point, str(index), str(tmp_path / "c.jsonl"),
                           str(d / "mentions")], cwd=ROOT, capture_output=True, env={**os.environ, "TQDM_DISABLE": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert read_state(index) == state  # the previous version, loadable, with the same arrays
    assert_same_index(SparseIndex.load(index), before)
    report = add_documents(index, tmp_path / "c.jsonl", [d / "mentions"], log=quiet)  # the lock died with it
    assert report["version"] == state["version"] + 1
    assert sorted(p.name for p in (index / "segments").iterdir()) == read_state(index)["segments"]  # leftovers gone
    after = SparseIndex.load(index)
    assert len(after.article_keys) == len(before.article_keys) + 1


# -- updates that cannot lose an index -------------------------------------------------------------------------
def test_a_lost_version_file_is_an_error_that_says_how_to_recover(grown, tmp_path, capsys):
    import shutil

    d, _ = grown
    index = tmp_path / "index"
    shutil.copytree(d / "index", index)
    state = read_state(index)
    grown_view = SparseIndex.load(index)
    (index / "CURRENT").unlink()
    segments = sorted(p.name for p in (index / "segments").iterdir())
    with pytest.raises(ArtifactError, match="is missing") as err:
        SparseIndex.load(index)  # never the base alone, as if nothing had been added
    assert "Restore it from a backup" in str(err.value) and "Nothing was changed" in str(err.value)
    (tmp_path / "ids.txt").write_text("1\n", encoding="utf-8")
    assert main(["remove", "--index", str(index), "--ids", str(tmp_path / "ids.txt")]) == 2  # refused, nothing deleted
    assert "is missing" in capsys.readouterr().err
    with pytest.raises(ArtifactError, match="is missing"):
        add_documents(index, d / "B.txt", [d / "mentions"], log=quiet)
    assert sorted(p.name for p in (index / "segments").iterdir()) == segments
    # the recovery the message gives: the state it names, written to CURRENT
    suggested = json.loads(str(err.value).split("write ", 1)[1].split(" to ", 1)[0])
    assert suggested["segments"] == state["segments"]
    (index / "CURRENT").write_text(json.dumps(suggested), encoding="utf-8")
    assert_same_index(SparseIndex.load(index), grown_view)


def test_add_refuses_to_leave_a_mention_index_beside_it_without_vectors(grown, tmp_path, capsys):
    import shutil

    d, _ = grown
    for name in ("index", "mentions"):
        shutil.copytree(d / name, tmp_path / name)
    index, mentions = tmp_path / "index", tmp_path / "mentions"
    shutil.rmtree(index / "segments")  # the index of A as built: no segment names its mention indexes yet
    (index / "CURRENT").unlink()
    state = read_state(index)
    (tmp_path / "c.jsonl").write_text(json.dumps({"id": "new-1", "title": "Kismet Again",
                                                  "text": "Kismet Again stars Marlene Dietrich."}) + "\n")
    assert main(["add", "--index", str(index), "--corpus", str(tmp_path / "c.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{mentions} is a mention index of {index}" in err and "--mentions" in err and "Traceback" not in err
    assert read_state(index) == state
    # one added without it anyway (the mention index elsewhere at the time): loading the pair says what mends it,
    # and the next compaction (or add) with --mentions embeds what the segment lacks
    (tmp_path / "elsewhere").mkdir()
    shutil.move(mentions, tmp_path / "elsewhere" / "mentions")
    add_documents(index, tmp_path / "c.jsonl", [], log=quiet)
    shutil.move(tmp_path / "elsewhere" / "mentions", mentions)
    with pytest.raises(ArtifactError, match="the next 'drkit add' or 'drkit compact' with --mentions"):
        MentionIndex.load(mentions).for_index(SparseIndex.load(index))
    lines = []
    compact(index, tmp_path / "c", [mentions], [tmp_path / "cm"], log=lines.append)
    assert any("which it lacked" in line for line in lines)
    view = MentionIndex.load(mentions).for_index(SparseIndex.load(index))
    assert len(view.vectors) == SparseIndex.load(index).n_mentions


def test_swap_in_replaces_a_folder_whole(tmp_path):
    from drkit.util.artifact import swap_in

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("old")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "new.txt").write_text("new")
    swap_in(tmp_path / "new", tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["new.txt"] and not (tmp_path / "new").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # the old one is gone, nothing left aside


OVERWRITER = """
import os, signal, sys
import drkit.util.artifact as artifact
point, what = sys.argv[1], sys.argv[2]
exchange = artifact._rename_exchange
def killed(a, b):
    if point == "after":
        exchange(a, b)  # the new one is in place, the old one not yet deleted
    os.kill(os.getpid(), signal.SIGKILL)
artifact._rename_exchange = killed
if what == "index":
    from drkit.index.build import build_index
    build_index(sys.argv[3], sys.argv[4], kb=sys.argv[5], overwrite=True, log=lambda *a: None)
else:
    from drkit.dense.update import compact
    compact(sys.argv[3], sys.argv[4], [sys.argv[5]], [sys.argv[6]], overwrite=True, log=lambda *a: None)
"""


@pytest.mark.parametrize("point", ["before", "after"])
@pytest.mark.parametrize("what", ["index", "compact"])
def test_sigkill_during_overwrite_leaves_the_old_artifact_or_the_new_one_whole(grown, tmp_path, point, what):
    """``drkit index --overwrite`` and ``drkit compact --overwrite`` killed just before and just after the swap:
    the folder holds the old artifact or the new one, loadable, never neither."""
    import shutil

    d, _ = grown
    out = tmp_path / "out"
    if what == "index":  # over an index of A, an index of A+B
        shutil.copytree(d / "index", out)
        shutil.rmtree(out / "segments")
        (out / "CURRENT").unlink()
        args = [str(d / "AB.txt"), str(out), str(SAMPLE / "kb.txt")]
        new = SparseIndex.load(d / "full").n_passages
    else:  # over an old compaction's output (the index of A), the compaction of the grown index
        shutil.copytree(d / "index", out)
        shutil.rmtree(out / "segments")
        (out / "CURRENT").unlink()
        shutil.copytree(d / "mentions", tmp_path / "mentions-out")
        args = [str(d / "index"), str(out), str(d / "mentions"), str(tmp_path / "mentions-out")]
        new = SparseIndex.load(d / "compact").n_passages
    old = SparseIndex.load(out).n_passages
    assert old != new
    proc = subprocess.run([sys.executable, "-c", OVERWRITER, point, what, *args], cwd=ROOT, capture_output=True,
                          env={**os.environ, "TQDM_DISABLE": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert SparseIndex.load(out).n_passages == (old if point == "before" else new)  # whole, old or new


def test_an_int8_mention_index_grows_with_int8_vectors(tmp_path, tiny_base, monkeypatch):
    """`drkit add` / `compact` embed new mentions as the mention index was embedded (int8 here, through the int8
    encoder each time), and the compacted vectors are close to a build of all (int8 activations are quantised
    per encoder batch, so a passage's int8 vector depends a little on its batch: not bit for bit)."""
    import drkit.dense.embedding as embedding
    import drkit.dense.update as update
    from drkit.dense.encoder import EncoderConfig
    from drkit.dense.pretrain import PretrainConfig, pretrain

    asked, real = {"add": [], "compact": []}, embedding.mention_encoder

    def spy(step):
        def mention_encoder(encoder, config):
            asked[step].append(config.quantize)
            return real(encoder, config)
        return mention_encoder

    # an old page names a title added later: compaction links it there, a mention whose vector it embeds
    old_pages = PAGES + [{"id": "a5", "title": "Enigma", "text": "Alan Turing broke the Enigma cipher."}]
    _jsonl(tmp_path / "a.jsonl", old_pages)
    _jsonl(tmp_path / "b.jsonl", ADDED)
    _jsonl(tmp_path / "ab.jsonl", old_pages + ADDED)
    build_index(tmp_path / "a.jsonl", tmp_path / "index", entities="titles", log=quiet)
    pretrain(tmp_path / "index", None, tmp_path / "enc", PretrainConfig(steps=0, precision="fp32"),
             EncoderConfig(base=str(tiny_base), dim=32), log=quiet)
    int8 = EmbedConfig(quantize="int8")
    build_mention_index(tmp_path / "index", tmp_path / "enc", tmp_path / "m", int8, log=quiet)
    before = np.asarray(MentionIndex.load(tmp_path / "m").vectors, np.float32).copy()
    monkeypatch.setattr(embedding, "mention_encoder", spy("add"))  # embed_mentions (drkit add) looks it up here
    monkeypatch.setattr(update, "mention_encoder", spy("compact"))  # and compact here
    add_documents(tmp_path / "index", tmp_path / "b.jsonl", [tmp_path / "m"], log=quiet)
    compact(tmp_path / "index", tmp_path / "c", [tmp_path / "m"], [tmp_path / "cm"], log=quiet)
    assert asked == {"add": ["int8"], "compact": ["int8"]}  # compaction embeds the old passages' new mentions
    monkeypatch.undo()
    build_index(tmp_path / "ab.jsonl", tmp_path / "full", entities="titles", log=quiet)
    build_mention_index(tmp_path / "full", tmp_path / "enc", tmp_path / "fm", int8, log=quiet)
    compacted = MentionIndex.load(tmp_path / "cm")
    assert compacted.manifest["config"]["quantize"] == "int8"
    got, want = (np.asarray(MentionIndex.load(tmp_path / p).vectors, np.float32) for p in ("cm", "fm"))
    assert got.shape == want.shape and got.shape[0] > len(before)
    reused = compacted.manifest["embedding"]["reused"]
    assert 0 < reused < len(got) and compacted.manifest["embedding"]["embedded"] > 0
    np.testing.assert_allclose(got, want, atol=0.02)


def test_int8_embedding_settings_are_checked():
    with pytest.raises(ConfigError, match="embeds on the CPU"):
        EmbedConfig(quantize="int8", device="cuda")
    with pytest.raises(ConfigError, match="activations in fp32"):
        EmbedConfig(quantize="int8", precision="bf16")
    resolved = EmbedConfig(quantize="int8").resolved()
    assert (resolved.precision, resolved.device, resolved.quantize) == ("fp32", "cpu", "int8")


def test_add_finds_the_encoder_from_another_folder_and_in_a_moved_tree(tmp_path, tiny_base, monkeypatch, capsys):
    """A mention index embedded with a relative --encoder records where the encoder is, so that `drkit add` run
    from another folder, or on the whole tree of runs moved elsewhere, embeds with it (it once read the
    relative path against its own folder and stopped: "runs/sample-pretrain/encoder does not exist")."""
    import shutil

    from drkit.dense.encoder import EncoderConfig
    from drkit.dense.pretrain import PretrainConfig, pretrain

    work = tmp_path / "work"
    (work / "runs").mkdir(parents=True)
    _jsonl(work / "a.jsonl", PAGES)
    _jsonl(tmp_path / "b.jsonl", ADDED)
    _jsonl(tmp_path / "c.jsonl", [{"id": "c1", "title": "Enigma", "text": "Alan Turing broke the Enigma cipher."}])
    monkeypatch.chdir(work)  # every path relative, as in `make demo`
    build_index("a.jsonl", "runs/index", entities="titles", log=quiet)
    pretrain("runs/index", None, "runs/enc", PretrainConfig(steps=0, precision="fp32"),
             EncoderConfig(base=str(tiny_base), dim=32), log=quiet)
    build_mention_index("runs/index", "runs/enc", "runs/m", EmbedConfig(precision="fp32"), log=quiet)
    record = MentionIndex.load("runs/m").manifest["encoder"]
    assert Path(record["path"]) == (work / "runs" / "enc" / "encoder").resolve()
    assert record["from_mentions"] == "../enc/encoder"

    monkeypatch.chdir(tmp_path)  # another folder
    assert main(["add", "--index", str(work / "runs" / "index"), "--corpus", "b.jsonl",
                 "--mentions", str(work / "runs" / "m")]) == 0
    moved = tmp_path / "moved"
    shutil.move(work / "runs", moved)  # the recorded absolute path is gone; the one from the index is not
    assert MentionIndex.load(moved / "m").encoder_dir() == moved / "m" / ".." / "enc" / "encoder"
    assert main(["add", "--index", str(moved / "index"), "--corpus", "c.jsonl", "--mentions", str(moved / "m")]) == 0
    assert SparseIndex.load(moved / "index").n_passages == len(PAGES) + len(ADDED) + 1
    compact(moved / "index", moved / "compact", [moved / "m"], [moved / "compact-m"], log=quiet)
    compacted = MentionIndex.load(moved / "compact-m").manifest["encoder"]
    assert compacted["from_mentions"] == "../enc/encoder" and compacted["sha256"] == record["sha256"]

    shutil.rmtree(moved / "enc")  # gone from both places: an error that names them, and nothing added
    capsys.readouterr()
    _jsonl(tmp_path / "d.jsonl", [{"id": "d1", "title": "Colossus", "text": "Colossus was built near London."}])
    assert main(["add", "--index", str(moved / "index"), "--corpus", "d.jsonl", "--mentions", str(moved / "m")]) == 2
    err = capsys.readouterr().err
    assert f"the encoder that embedded {moved / 'm'} is not at '{work / 'runs' / 'enc' / 'encoder'}'" in err
    assert "Traceback" not in err and SparseIndex.load(moved / "index").n_passages == len(PAGES) + len(ADDED) + 1
