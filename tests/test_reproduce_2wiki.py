"""`drkit reproduce-2wiki` end to end on a tiny 2WikiMultiHopQA-shaped folder (the real MiniLM, a few steps
of each stage): every output is written, the figures are the retrievers' own metrics files, a rerun finds
everything done, and a run with other settings is refused, naming the setting."""

import json
import shutil

import numpy as np
import pytest
import torch

from drkit.cli import main
from drkit.errors import ConfigError

FIRST = ["Anna", "Boris", "Clara", "Dmitri", "Elena", "Farid"]
LAST = ["Lindqvist", "Okafor", "Ramirez", "Tanaka"]
FILMS = ["The Silent Harbor", "Red Mountain", "A Letter to Quito", "The Glass Empire", "Night Garden",
         "The Long River", "Paper Moons", "Winter Orchard"]
CITY = ["Oslo", "Lima", "Perth", "Riga"]


def tiny_2wiki(d, seed=0):
    rng = np.random.default_rng(seed)
    people = [f"{f} {l}" for f in FIRST for l in LAST][:6]
    born = {p: CITY[i % len(CITY)] for i, p in enumerate(people)}
    rows, questions = [], []
    for i, p in enumerate(people):
        rows.append({"id": str(len(rows)), "title": p, "text": f"{p} is a film director who was born in {born[p]}."})
    for c in CITY:  # the answers have pages (with no entity list, entities are the titles and the recogniser's)
        rows.append({"id": str(len(rows)), "title": c, "text": f"{c} is a city."})
    directed, year = {}, {}
    for f in FILMS:
        directed[f], year[f] = people[int(rng.integers(len(people)))], 1950 + int(rng.integers(60))
        rows.append({"id": str(len(rows)), "title": f, "text": f"{f} is a {year[f]} drama film directed by {directed[f]}."})
    key = {r["title"]: r["id"] for r in rows}
    for i, f in enumerate(FILMS):
        g = FILMS[(i + 3) % len(FILMS)]
        questions.append({"id": f"c{i}", "type": "comparison", "question": f"Which film came out first, {f} or {g}?",
                          "answers": [f if year[f] <= year[g] else g], "supporting": [key[f], key[g]],
                          "supporting_titles": [f, g], "evidence": [[f, "publication date", str(year[f])],
                                                                    [g, "publication date", str(year[g])]]})
        p = directed[f]
        questions.append({"id": f"p{i}", "type": "compositional", "question": f"Where was the director of film {f} born?",
                          "answers": [born[p]], "supporting": [key[f], key[p]], "supporting_titles": [f, p],
                          "evidence": [[f, "director", p], [p, "place of birth", born[p]]]})
    d.mkdir()
    (d / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "train.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    return d


def assert_tables_well_formed(md: str) -> None:
    """Every Markdown table has as many cells in each row as in its header, and a separator that matches it."""
    table: list[str] = []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            widths = [row.count("|") - 1 for row in table]
            assert len(set(widths)) == 1 and set(table[1].strip("|").split("|")) == {"---"}, table[:3]
            table = []


def assert_reading_ranking(where, questions, metrics, cells):
    """WHERE/read-drkit/ranking holds drkit's ranking of each question with the passages the reader read, those with a
    supporting sentence first, then the rest of drkit's, and its R@2 is scored as a retriever's."""
    retrieved, read, ranked = ([json.loads(x) for x in (where / d / "predictions.jsonl").read_text().splitlines()]
                               for d in ("retrieve-drkit", "read-drkit", "read-drkit/ranking"))
    gold = {r["id"]: set(map(str, r["supporting"])) for r in map(json.loads, questions.read_text().splitlines())}
    r2 = []
    for a, b, c in zip(retrieved, read, ranked):
        assert a["id"] == b["id"] == c["id"]
        held = {s["passage_id"] for s in b["supporting"]}
        first = [p["id"] for p in b["passages"] if p["id"] in held] + [p["id"] for p in b["passages"] if p["id"] not in held]
        expected = first + [p["id"] for p in a["passages"] if p["id"] not in first]
        assert [p["id"] for p in c["passages"]] == expected and sorted(map(str, c["passages"])) == sorted(map(str, a["passages"]))
        r2.append(len(set(expected[:2]) & gold[a["id"]]) / len(gold[a["id"]]))
    assert metrics["overall"]["R@2"] == pytest.approx(np.mean(r2), abs=1e-4) == cells["R@2"]["mean"]


def test_reproduce_2wiki_end_to_end(tmp_path, capsys):
    data, out = tiny_2wiki(tmp_path / "data"), tmp_path / "run"
    other = tiny_2wiki(tmp_path / "other", seed=1)  # the transfer corpus: corpus.jsonl and questions.jsonl
    (other / "train.jsonl").rename(other / "questions.jsonl")
    args = ["reproduce-2wiki", "--data", str(data), "--out", str(out), "--steps", "2", "--pretrain-steps", "2",
            "--answers", "--answer-steps", "2", "--rows", "fixed_1", "no_pretraining", "kb_qa_pretrained", "--qps-sample", "2",
            "--transfer", str(other), "--reader-epochs", "1", "--bootstrap", "retriever"]
    assert main(args) == 0
    results = json.loads((out / "results.json").read_text())
    # --bootstrap retriever: every row's hop-mixing training also reads the chained facts of the grown KB
    for run in ("train-drkit", "train-fixed_1", "train-no_pretraining"):
        assert json.loads((out / run / "run.json").read_text())["more_kb"]["path"].endswith("kb-bootstrapped.txt")
        assert (out / run / "kb-chains.jsonl").exists()
    assert results["split"] == {"comparison": {"train": 4, "dev": 4}, "compositional": {"train": 4, "dev": 4}}
    drkit = json.loads((out / "retrieve-drkit" / "metrics.json").read_text())
    assert results["drkit"]["overall"] == drkit["overall"] and drkit["questions"] == 8
    assert set(results["retrieval"]) == {"bm25", "dense", "single_step", "ppr", "drkit_reader"}
    # every retriever's intervals, and the paired test against drkit for the others
    iv = results["intervals"]
    assert set(iv) == {"drkit", "bm25", "dense", "single_step", "ppr", "drkit_reader", "fixed_1", "no_pretraining"}
    assert_reading_ranking(out, data / "train.jsonl", results["retrieval"]["drkit_reader"], iv["drkit_reader"])
    assert iv["drkit"]["R@5"]["mean"] == drkit["overall"]["R@5"] and iv["drkit"]["R@5"]["questions"] == 8
    assert all(c["ci95"][0] <= c["mean"] <= c["ci95"][1] for cells in iv.values() for c in cells.values())
    assert "p" in iv["bm25"]["AR@2"] and "p" not in iv["drkit"]["AR@2"]
    t = results["transfer"]
    assert set(t["retrieval"]) == {"drkit", "bm25", "dense", "single_step", "ppr", "drkit_reader"}
    assert set(t["intervals"]) == set(t["retrieval"])
    assert_reading_ranking(out / "transfer", other / "questions.jsonl", t["retrieval"]["drkit_reader"],
                           t["intervals"]["drkit_reader"])
    assert t["retrieval"]["drkit"]["questions"] == 16 and t["intervals"]["drkit"]["R@2"]["questions"] == 16
    assert json.loads((out / "transfer" / "mentions" / "manifest.json").read_text())["encoder"]["path"].endswith("encoder")
    assert set(results["rows"]) == {"fixed_1", "no_pretraining", "kb_qa_pretrained"}
    # kb_qa is DrKIT's own encoder: the row is DrKIT's, not a second training
    assert results["rows"]["kb_qa_pretrained"]["overall"] == drkit["overall"]
    assert not (out / "train-kb_qa_pretrained").exists()
    assert json.loads((out / "train-no_pretraining" / "run.json").read_text())["mentions"].endswith("mentions-base")
    assert json.loads((out / "train-drkit" / "run.json").read_text())["mentions"].endswith("mentions-kb_qa")
    a = results["answers"]
    assert a["questions"] == 4 and a["fixed_2hop_bracketed_lines"] == 4
    assert 0 <= a["drkit_mixing_hits@1"] <= 1 and 0 <= a["fixed_2hop_bracketed_hits@1"] <= 1
    reader = results["reader"]
    assert set(reader["rows"]) == {"gold", "drkit", "drkit_reader_only", "bm25"} and reader["training"]["questions"] == 8
    for name, m in reader["rows"].items():
        rows = [json.loads(line) for line in (out / f"read-{name}" / "predictions.jsonl").read_text().splitlines()]
        assert len(rows) == m["questions"] == 8 and m["em"] == pytest.approx(np.mean([r["em"] for r in rows]), abs=1e-4)
        assert set(m["by_type"]) == {"comparison", "compositional"}
    assert reader["rows"]["gold"]["passage_recall_read"] == 1.0 and "entity_answer" in reader["rows"]["drkit"]
    # the same passages read with and without the comparisons: they differ only where it settled a question
    assert [m["compare"] for m in reader["rows"].values()] == [True, True, False, True]
    with_, without = ([json.loads(line) for line in (out / f"read-{n}" / "predictions.jsonl").read_text().splitlines()]
                      for n in ("drkit", "drkit_reader_only"))
    assert reader["rows"]["drkit_reader_only"]["compared"] == 0 and reader["rows"]["gold"]["compared"] > 0
    assert reader["rows"]["drkit"]["compared"] == sum("comparison" in r for r in with_)
    for a, b in zip(with_, without):
        assert a["answer"] == b["answer"] or "comparison" in a
    assert set(reader["transfer"]["rows"]) == {"gold", "drkit", "bm25"} and reader["transfer"]["rows"]["drkit"]["questions"] == 16
    assert reader["transfer"]["rows"]["gold"]["passage_recall_read"] == 1.0  # the transfer questions' own passages
    md = (out / "results.md").read_text()
    assert "| **drkit** (hop mixing) |" in md and "BM25" in md and "Entity answers" in md
    assert_tables_well_formed(md)
    assert "q/s with the entity answer" in md  # passages alone and with the answer's second pass, apart
    ir = drkit["ir_measures"]
    assert f"| {drkit['overall']['AR@20']:.3f} | {ir['nDCG@10']:.3f} | {ir['RR']:.3f} |" in md
    assert "| **drkit** top N + reader |" in md and "not trained on): gold passages + reader EM" in md
    assert (out / "recall_at_k.png").stat().st_size > 0
    timings = json.loads((out / "timings.json").read_text())
    assert {"index", "pretrain-kb_qa", "embed-kb_qa", "train-drkit", "retrieve-drkit", "peer-bm25"} <= set(timings)
    capsys.readouterr()
    assert main(args) == 0  # everything is done: nothing is made again
    assert json.loads((out / "timings.json").read_text()) == timings
    assert main(args[:args.index("--steps") + 1] + ["3"] + args[args.index("--steps") + 2:]) == 2
    assert "steps" in capsys.readouterr().err
    # the other fold, then both pooled: every question scored once, by the model that did not train on it
    out1 = tmp_path / "run1"
    assert main([a if a != str(out) else str(out1) for a in args] + ["--fold", "1", "--rows", "fixed_1"]) == 0
    assert main(["pool-2wiki", "--runs", str(out), str(out1), "--out", str(tmp_path / "pooled")]) == 0
    assert_tables_well_formed((out1 / "results.md").read_text())  # with a row of --rows
    pooled = json.loads((tmp_path / "pooled" / "results.json").read_text())
    assert pooled["retrieval"]["drkit"]["overall"]["questions"] == 16
    assert pooled["intervals"]["drkit"]["R@5"]["questions"] == 16 and "row:fixed_1" in pooled["intervals"]
    assert pooled["intervals"]["drkit_reader"]["R@2"]["questions"] == 16 and "p" in pooled["intervals"]["drkit_reader"]["R@2"]
    # the reader's order is made again from the runs' files when pooled, into OUT: a ranking file left in a run is
    # neither read nor written (pooling never writes the runs)
    (out / "read-drkit" / "ranking" / "predictions.jsonl").write_text("")
    shutil.rmtree(out1 / "read-drkit" / "ranking")
    assert main(["pool-2wiki", "--runs", str(out), str(out1), "--out", str(tmp_path / "pooled-again")]) == 0
    again = json.loads((tmp_path / "pooled-again" / "results.json").read_text())
    assert again["retrieval"]["drkit_reader"] == pooled["retrieval"]["drkit_reader"]
    assert (out / "read-drkit" / "ranking" / "predictions.jsonl").read_text() == ""
    assert not (out1 / "read-drkit" / "ranking").exists()
    assert all((tmp_path / "pooled-again" / f"reading-ranking-fold{k}" / "predictions.jsonl").stat().st_size
               for k in (0, 1))
    fold1 = json.loads((out1 / "retrieve-drkit" / "metrics.json").read_text())["overall"]
    both = (drkit["overall"]["R@5"] * 8 + fold1["R@5"] * 8) / 16
    assert abs(pooled["retrieval"]["drkit"]["overall"]["R@5"] - both) < 1e-3
    # nDCG@10 and MRR by ir_measures over the pooled rankings: each question's own, so the folds' mean
    folds_ir = [json.loads((o / "retrieve-drkit" / "metrics.json").read_text())["ir_measures"] for o in (out, out1)]
    pooled_ir = pooled["retrieval"]["drkit"]["ir_measures"]
    assert pooled_ir["questions"] == 16 and pooled_ir["R@5"] == pytest.approx(both, abs=1e-3)
    for k in ("nDCG@10", "RR"):
        assert pooled_ir[k] == pytest.approx((folds_ir[0][k] + folds_ir[1][k]) / 2, abs=1e-3)
    assert "| nDCG@10 | MRR |" in (tmp_path / "pooled" / "results.md").read_text()
    assert [t["fold"] for t in pooled["transfer"]] == [0, 1]
    assert "both folds pooled (16 questions" in (tmp_path / "pooled" / "results.md").read_text()
    assert pooled["reader"]["rows"]["drkit"]["questions"] == 16 and len(pooled["reader"]["transfer"]) == 2
    assert main(["pool-2wiki", "--runs", str(out), str(out), "--out", str(tmp_path / "bad")]) == 2
    # transfer questions that do not all name their gold passages: no gold row there, said, the other rows read
    lines = (other / "questions.jsonl").read_text().splitlines()
    (other / "questions.jsonl").write_text("".join(json.dumps({k: v for k, v in json.loads(x).items() if i or k != "supporting"})
                                                   + "\n" for i, x in enumerate(lines)))
    for row in ("gold", "drkit", "bm25"):
        shutil.rmtree(out / "transfer" / f"read-{row}")
    capsys.readouterr()
    assert main(args) == 0
    assert "not every question of" in capsys.readouterr().err
    transfer = json.loads((out / "results.json").read_text())["reader"]["transfer"]["rows"]
    assert set(transfer) == {"drkit", "bm25"} and not (out / "transfer" / "read-gold").exists()
    # --reader-distill 1: a one-layer reader taught by the trained one reads every row; the teacher stays as it was;
    # it trains for --reader-distill-epochs where given
    teacher = (out / "train-reader" / "reader" / "model.safetensors").read_bytes()
    assert main(args + ["--reader-distill", "1", "--reader-distill-epochs", "2"]) == 0
    assert [json.loads((out / r / "run.json").read_text())["train"]["epochs"]
            for r in ("train-reader", "train-reader-distilled")] == [1, 2]
    student = json.loads((out / "train-reader-distilled" / "reader" / "manifest.json").read_text())
    assert student["config"]["layers"] == 1 and student["training"]["teacher"] == str(out / "train-reader" / "reader")
    assert (out / "train-reader" / "reader" / "model.safetensors").read_bytes() == teacher
    from drkit.util.artifact import file_checksum

    sha = file_checksum(out / "train-reader-distilled" / "reader" / "model.safetensors")["sha256"]
    for row in ("gold", "drkit", "drkit_reader_only", "bm25"):
        assert json.loads((out / f"read-{row}" / "metrics.json").read_text())["made_with"]["reader"] == sha
    assert "train-reader-distilled" in json.loads((out / "timings.json").read_text())
    assert json.loads((out / "results.json").read_text())["reader"]["training"]["teacher"].endswith("reader")


def test_the_reading_ranking_puts_the_passages_of_supporting_sentences_first_and_refuses_what_does_not_match(tmp_path):
    from drkit.errors import InputFormatError
    from drkit.experiments.twowiki_reader import write_reading_ranking

    def lines(path, rows):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    assert write_reading_ranking(tmp_path) is None  # nothing read: no ranking
    ranked = [{"id": "q1", "passages": [{"id": i, "score": s} for i, s in (("a", .5), ("b", .3), ("c", .1), ("d", .05))]},
              {"id": "q2", "passages": [{"id": "x"}, {"id": "y"}]}]
    lines(tmp_path / "retrieve-drkit" / "predictions.jsonl", ranked)
    read = [{"id": "q1", "passages": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
             "supporting": [{"passage_id": "c"}, {"passage_id": "b"}, {"passage_id": "c"}]},
            {"id": "q2", "passages": [], "supporting": []}]  # a question not read keeps drkit's order
    lines(tmp_path / "read-drkit" / "predictions.jsonl", read)
    out = write_reading_ranking(tmp_path)
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [[p["id"] for p in r["passages"]] for r in got] == [["b", "c", "a", "d"], ["x", "y"]]
    assert got[0]["passages"][0] == {"id": "b", "score": .3}  # each passage as drkit gave it
    lines(tmp_path / "read-drkit" / "predictions.jsonl", read[:1])
    with pytest.raises(InputFormatError, match=r"retrieve-drkit/predictions.jsonl:2 \(field 'id'\): question 'q2'"):
        write_reading_ranking(tmp_path)
    lines(tmp_path / "read-drkit" / "predictions.jsonl", [read[0], {**read[1], "passages": [{"id": "z"}]}])
    with pytest.raises(InputFormatError, match="a passage read is not among"):
        write_reading_ranking(tmp_path)


def test_the_reader_settings_are_the_readers_and_checked_by_it(monkeypatch):
    from drkit.errors import ConfigError
    from drkit.experiments.twowiki import TwoWikiConfig

    assert TwoWikiConfig(reader_max_pieces=320, reader_layers=3).reader_config().max_pieces == 320
    assert TwoWikiConfig().reader_config().layers == 0
    with pytest.raises(ConfigError, match="reader_distill"):
        TwoWikiConfig(reader_distill=-1)
    with pytest.raises(ConfigError, match="reader_distill_epochs"):
        TwoWikiConfig(reader_distill=2, reader_distill_epochs=-1)
    with pytest.raises(ConfigError, match=r"reader_base \(--reader-base\): '/no/such/folder' is neither"):
        TwoWikiConfig(reader_base="/no/such/folder")
    from drkit.data.tokenizer import encoder_path

    folder = encoder_path().resolve()  # a folder holding a base is taken, and is the reader's base
    assert TwoWikiConfig(reader_base=str(folder)).reader_config().base == str(folder)
    # given relative to where the command runs, it is the same setting (pool-2wiki compares the folds' settings)
    monkeypatch.chdir(folder.parent)
    assert TwoWikiConfig(reader_base=folder.name) == TwoWikiConfig(reader_base=str(folder))
    for bad in ({"reader_layers": -1}, {"reader_max_pieces": 16}):  # 16: no room beside a 64-piece question
        with pytest.raises(ConfigError, match="--reader-max-pieces"):
            TwoWikiConfig(**bad)


def test_pooling_compares_what_the_figures_depend_on_reading_absent_settings_as_they_were_meant():
    from drkit.experiments.twowiki import TwoWikiConfig
    from drkit.experiments.twowiki_report import differing_settings

    old = {"fold": 0, "steps": 100, "rows": ["fixed_0"], "reader_epochs": 2}  # made before reader_layers, max_pieces
    new = {"fold": 1, "steps": 100, "rows": [], "reader_epochs": 2, "reader_layers": 0, "reader_max_pieces": 512}
    assert differing_settings(old, new, TwoWikiConfig.ABSENT_MEANT) == []  # fold and rows may differ
    assert differing_settings(old, {**new, "reader_max_pieces": 320}, TwoWikiConfig.ABSENT_MEANT) == \
        ["reader_max_pieces: 512 / 320"]
    assert differing_settings(old, {**new, "steps": 50}, {}) == ["steps: 100 / 50", "reader_layers: None / 0",
                                                              "reader_max_pieces: None / 512"]


def test_mentions_embedded_otherwise_are_refused_not_mixed(tmp_path, monkeypatch):
    """--embed-quantize: a run folder whose mentions were embedded otherwise (fp32, as every run before the
    setting) is refused with what to do, never re-embedded under models trained on the old vectors."""
    from types import SimpleNamespace

    import drkit.util.hardware as hardware
    from drkit.experiments.steps import embedded_as
    from drkit.experiments.twowiki import TwoWikiConfig

    old = SimpleNamespace(manifest={"config": {"precision": "fp32", "device": "cpu"}}, path=tmp_path / "mentions-kb_qa")
    made_int8 = SimpleNamespace(manifest={"config": {"quantize": "int8"}}, path=tmp_path / "mentions-kb_qa")
    assert embedded_as(old, TwoWikiConfig(embed_quantize="none")) is old
    assert embedded_as(made_int8, TwoWikiConfig()) is made_int8
    with pytest.raises(ConfigError, match=r"embedded with quantize 'none' and this run asks for 'int8'.*--embed-quantize none"):
        embedded_as(old, TwoWikiConfig())  # int8 on this machine's CPU
    with pytest.raises(ConfigError, match=r"quantize 'int8' and this run asks for 'none'"):
        embedded_as(made_int8, TwoWikiConfig(embed_quantize="none"))
    assert TwoWikiConfig(embed_quantize="none").embed_config().quantize == "none"
    monkeypatch.setattr(hardware, "resolve_device", lambda device="auto": torch.device("cuda"))
    assert TwoWikiConfig().embed_config().quantize == "none"  # on a GPU: its own precision there
    # a folder made on a CPU goes on on a GPU machine, and one made on a GPU (fp32) with int8 asked
    assert embedded_as(made_int8, TwoWikiConfig()) is made_int8
    assert embedded_as(old, TwoWikiConfig()) is old
    with pytest.raises(ConfigError, match="embed_quantize must be"):
        TwoWikiConfig(embed_quantize="int4")


def test_an_encoder_pretrained_with_the_other_attention_dropout_is_refused_with_the_flag_that_goes_on(tmp_path):
    from drkit.experiments.twowiki import TwoWikiConfig, _check_pretrained_as_asked

    for saved, asked, flag in (({"attention_dropout": True}, False, "--pretrain-attention-dropout"),
                               ({}, False, "--pretrain-attention-dropout"),  # made before the setting: on
                               ({"attention_dropout": False}, True, "--no-pretrain-attention-dropout")):
        (tmp_path / "run.json").write_text(json.dumps({"pretrain": {"steps": 100, **saved}}))
        with pytest.raises(ConfigError, match=f"pass {flag} to go on"):
            _check_pretrained_as_asked(tmp_path, TwoWikiConfig(pretrain_attention_dropout=asked))
        _check_pretrained_as_asked(tmp_path, TwoWikiConfig(pretrain_attention_dropout=not asked))  # as made: goes on
    assert TwoWikiConfig().pretrain_attention_dropout is False


def test_a_pretraining_begun_with_the_other_attention_dropout_is_refused_before_it_resumes(tmp_path):
    from drkit.experiments.twowiki import TwoWikiConfig, _check_pretrained_as_asked

    _check_pretrained_as_asked(tmp_path / "none", TwoWikiConfig())  # nothing there yet: goes on
    (tmp_path / "run.json").write_text(json.dumps({"pretrain": {"steps": 100, "attention_dropout": True}}))
    assert not (tmp_path / "encoder").exists()  # checkpoints only: the pretraining was cut off
    with pytest.raises(ConfigError, match="pass --pretrain-attention-dropout"):
        _check_pretrained_as_asked(tmp_path, TwoWikiConfig())
    (tmp_path / "run.json").unlink()
    (tmp_path / "encoder").mkdir()  # an encoder without its settings: made before the setting, with it on
    with pytest.raises(ConfigError, match="pass --pretrain-attention-dropout"):
        _check_pretrained_as_asked(tmp_path, TwoWikiConfig())
