"""The drkit command, called in-process."""

import dataclasses
import json
import re

import numpy as np
import pytest

from drkit.cli import build_parser, main
from drkit.index.linking import LinkConfig
from drkit.index.sparse import SparseConfig, SparseIndex

WIKI = """1 Kismet
2 Kismet is a 1944 film directed by William Dieterle.
3 Marlene Dietrich stars.

1 Moon Over Miami
2 Moon Over Miami was directed by Walter Lang.
3 It stars Betty Grable and Don Ameche.
"""
KB = """Kismet|directed_by|William Dieterle
Kismet|starred_actors|Marlene Dietrich
Kismet|release_year|1944
Moon Over Miami|directed_by|Walter Lang
Moon Over Miami|starred_actors|Betty Grable
Moon Over Miami|starred_actors|Don Ameche
"""
QUESTIONS = "who directed [Kismet]\tWilliam Dieterle\nwho starred in [Moon Over Miami]\tBetty Grable|Don Ameche\n"


@pytest.fixture
def tiny(tmp_path):
    (tmp_path / "wiki.txt").write_text(WIKI, encoding="utf-8")
    (tmp_path / "kb.txt").write_text(KB, encoding="utf-8")
    (tmp_path / "q.txt").write_text(QUESTIONS, encoding="utf-8")
    return tmp_path


def test_index_command_builds_a_loadable_artifact(tiny, capsys):
    out = tiny / "idx"
    code = main(["index", "--corpus", str(tiny / "wiki.txt"), "--kb", str(tiny / "kb.txt"), "--out", str(out),
                 "--questions", f"1:{tiny / 'q.txt'}", "--mu", "1"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "sparse reachability, 1 hops" in printed
    index = SparseIndex.load(out)
    assert index.n_passages == 2
    assert index.config.mu == 1
    report = json.loads((out / "report.json").read_text())
    assert report["reachability"][f"1-hop:{tiny / 'q.txt'}"]["reachable"] == 2
    assert report["kb_coverage"]["covered"] == 6
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["sparse"]["mu"] == 1
    assert manifest["inputs"]["kb"]["sha256"]
    # With mu = 1 every entity keeps exactly one passage: its row holds all mentions of that passage.
    rows = np.diff(index.A_indptr)
    per_passage = np.bincount(index.mentions[:, 1], minlength=2)
    ep = np.asarray(index.entity_passage)
    assert np.array_equal(rows[np.diff(index.entity_passage_indptr) == 1], per_passage[ep])


def test_entity_list_instead_of_kb(tiny):
    (tiny / "entities.txt").write_text("Kismet\nWalter Lang\nnobody here\n", encoding="utf-8")
    out = tiny / "idx"
    assert main(["index", "--corpus", str(tiny / "wiki.txt"), "--entities", str(tiny / "entities.txt"),
                 "--out", str(out)]) == 0
    index = SparseIndex.load(out)
    assert index.entities.names == ["Kismet", "Walter Lang", "nobody here"]
    report = json.loads((out / "report.json").read_text())
    assert report["warnings"]["entity_never_mentioned"]["count"] == 1


def test_malformed_kb_line_is_a_clear_error(tiny, capsys):
    (tiny / "kb.txt").write_text(KB + "Kismet directed_by nobody\n", encoding="utf-8")
    code = main(["index", "--corpus", str(tiny / "wiki.txt"), "--kb", str(tiny / "kb.txt"), "--out", str(tiny / "idx")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{tiny / 'kb.txt'}:7" in err and "two '|'" in err
    assert not (tiny / "idx").exists()


def test_question_with_two_brackets_is_a_clear_error(tiny, capsys):
    (tiny / "q.txt").write_text(QUESTIONS + "who directed Kismet\tWilliam Dieterle\n"  # plain: linked, fine
                                + "did [Kismet] star [Marlene Dietrich]\tyes\n", encoding="utf-8")
    code = main(["index", "--corpus", str(tiny / "wiki.txt"), "--kb", str(tiny / "kb.txt"), "--out", str(tiny / "idx"),
                 "--questions", f"1:{tiny / 'q.txt'}"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{tiny / 'q.txt'}:4 (field 'question')" in err and "2 bracketed entities" in err


def test_existing_output_needs_overwrite(tiny, capsys):
    args = ["index", "--corpus", str(tiny / "wiki.txt"), "--kb", str(tiny / "kb.txt"), "--out", str(tiny / "idx")]
    assert main(args) == 0
    assert main(args) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(args + ["--overwrite"]) == 0


def test_a_bad_setting_names_its_flag(tmp_path, capsys):
    assert main(["corpus", "--docs", str(tmp_path), "--out", str(tmp_path / "c.jsonl"), "--passage-words", "0"]) == 2
    assert "passage_words must be at least 1, got 0 (flags: --passage-words)" in capsys.readouterr().err
    assert main(["retrieve", "--index", str(tmp_path), "--model", str(tmp_path), "--questions", "q.jsonl", "--out",
                 str(tmp_path / "o"), "--top", "0", "--qps-sample", "-1"]) == 2
    assert "(flags: --top, --batch-size, --qps-sample)" in capsys.readouterr().err
    assert main(["train-reader", "--corpus", "c.jsonl", "--questions", "q.jsonl", "--out", str(tmp_path / "r"),
                 "--layers", "-1"]) == 2  # "base's" in the message is not the setting --base
    assert capsys.readouterr().err.rstrip().endswith("got -1 (flags: --layers)")


def test_missing_corpus_file(tiny, capsys):
    code = main(["index", "--corpus", str(tiny / "nope.txt"), "--kb", str(tiny / "kb.txt"), "--out", str(tiny / "idx")])
    assert code == 2
    assert "nope.txt" in capsys.readouterr().err


def test_question_file_without_hop_count(tiny, capsys):
    code = main(["index", "--corpus", str(tiny / "wiki.txt"), "--kb", str(tiny / "kb.txt"), "--out", str(tiny / "idx"),
                 "--questions", str(tiny / "q.txt")])
    assert code == 2
    assert "HOPS:PATH" in capsys.readouterr().err


def test_kb_and_entities_are_exclusive(tiny):
    with pytest.raises(SystemExit) as exc:
        main(["index", "--corpus", "c", "--kb", "k", "--entities", "e", "--out", "o"])
    assert exc.value.code == 2


def test_flags_follow_the_config_dataclasses():
    parser = build_parser()
    index = parser._subparsers._group_actions[0].choices["index"]
    flags = {opt for action in index._actions for opt in action.option_strings}
    for cls in (LinkConfig, SparseConfig):
        for f in dataclasses.fields(cls):
            assert "--" + f.name.replace("_", "-") in flags


def test_every_command_has_a_flag_for_every_field_of_its_settings():
    from drkit.data.documents import DocumentsConfig
    from drkit.dense.bootstrap import BootstrapConfig
    from drkit.dense.distant import DistantConfig
    from drkit.dense.encoder import EncoderConfig
    from drkit.dense.mentions import EmbedConfig
    from drkit.dense.pretrain import PretrainConfig
    from drkit.experiments.metaqa import ReproduceConfig
    from drkit.experiments.twowiki import TwoWikiConfig
    from drkit.index.question_linking import QuestionLinkConfig
    from drkit.qa.answer import AnswerConfig
    from drkit.qa.ask import AskConfig
    from drkit.qa.evaluate import EvaluateConfig
    from drkit.qa.pipeline import LoadConfig, QueryConfig
    from drkit.qa.retrieve import RetrieveConfig
    from drkit.reader.examples import OrderConfig
    from drkit.reader.model import ReaderConfig
    from drkit.reader.reading import ReadConfig
    from drkit.reader.train import ReaderTrainConfig
    from drkit.reason.follow import FollowConfig
    from drkit.reason.mixing import MixConfig
    from drkit.reason.model import ModelConfig
    from drkit.reason.train import TrainConfig
    from drkit.reason.train_mixing import MixTrainConfig
    from drkit.serve.app import ServeConfig

    expected = {  # command -> its settings dataclasses, and fields deliberately without a flag
        "corpus": [DocumentsConfig], "index": [LinkConfig, SparseConfig], "pretrain": [DistantConfig, EncoderConfig, PretrainConfig],
        "bootstrap-kb": [BootstrapConfig],
        "embed": [EmbedConfig], "ann": [], "slot-fill": [], "train": [FollowConfig, ModelConfig, TrainConfig],
        "evaluate": [EvaluateConfig, LoadConfig, QueryConfig], "ask": [AskConfig, LoadConfig, QueryConfig, ReadConfig],
        "reproduce-metaqa": [ReproduceConfig], "retrieve": [RetrieveConfig], "reproduce-2wiki": [TwoWikiConfig],
        "train-mixing": [FollowConfig, MixConfig, MixTrainConfig, ModelConfig, QuestionLinkConfig],
        "serve": [LoadConfig, ServeConfig], "add": [], "remove": [], "compact": [], "pool-2wiki": [],
        "train-reader": [OrderConfig, ReaderConfig, ReaderTrainConfig],
        "answer": [AnswerConfig, LoadConfig, QueryConfig],
    }
    unflagged = {("train-mixing", "ModelConfig.hops"),  # the hop count is MixConfig's --hops
                 ("answer", "AnswerConfig.precision"),  # LoadConfig's --precision sets both
                 ("ask", "ReadConfig.passages")}  # AskConfig's --passages are those printed; the reader reads 5
    commands = build_parser()._subparsers._group_actions[0].choices
    assert set(commands) == set(expected)
    for name, sub in commands.items():
        dests = {a.dest for a in sub._actions}
        assert {d.split(".")[0] for d in dests if "." in d} == {c.__name__ for c in expected[name]}, name
        for cls in expected[name]:
            for f in dataclasses.fields(cls):
                dest = f"{cls.__name__}.{f.name}"
                assert (dest in dests) != ((name, dest) in unflagged), (name, dest)


def test_every_command_prints_its_help(capsys):
    # argparse %-formats help texts: a bare "%" in a field's help once made `drkit train-reader --help` a traceback
    commands = build_parser()._subparsers._group_actions[0].choices
    for name in commands:
        with pytest.raises(SystemExit) as exit_:
            main([name, "--help"])
        assert exit_.value.code == 0, name
        assert capsys.readouterr().out.startswith(f"usage: drkit {name}"), name
    assert "58% of the time" in " ".join(commands["train-reader"].format_help().split())  # shown as written


def test_top_level_help_lists_every_command_without_importing_torch():
    """`drkit --help` builds no command's flags (they import the settings dataclasses, and torch with them): it
    lists every command, with the help each registers, in a fraction of a second; a named command gets its own
    flags, and only those."""
    import subprocess
    import sys

    from drkit.cli import command_in
    from drkit.cli.flags import COMMANDS

    code = ("import sys\nfrom drkit.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('torch imported' if 'torch' in sys.modules else 'no torch')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("no torch"), done.stdout[-300:]
    listed = done.stdout
    for name, c in COMMANDS.items():
        assert re.search(rf"^ +{re.escape(name)}\s", listed, re.M) and " ".join(c.help.split()[:3]) in " ".join(
            listed.split()), name
    assert command_in(["--threads", "2", "ask", "--model", "m", "q"]) == "ask"
    assert command_in(["--threads=2", "serve"]) == "serve" and command_in(["--version"]) is None
    assert command_in(["--thr", "2", "index"]) == "index"  # an abbreviation argparse takes
    from drkit.cli import ORDER

    assert sorted(ORDER) == sorted(COMMANDS) and len(ORDER) == len(COMMANDS)  # every command listed, in its place
    with pytest.raises(SystemExit) as exit_:  # an option's value the parse reads otherwise: still the command's flags
        main(["--thread", "2", "index", "--help"])
    assert exit_.value.code == 0
    only = build_parser(only="index")._subparsers._group_actions[0].choices
    assert "--corpus" in only["index"].format_help() and "--model" not in only["ask"].format_help()
    full = build_parser()._subparsers._group_actions[0].choices
    assert only["index"].format_help() == full["index"].format_help()


def test_every_settings_flag_takes_a_value_of_its_kind():
    # a field defaulting to None once gave its flag the type NoneType: `--fixed 1` failed with a traceback
    commands = build_parser()._subparsers._group_actions[0].choices
    checked = 0
    for name, sub in commands.items():
        for action in sub._actions:
            if "." not in action.dest or action.nargs == 0 or action.type is None:
                continue
            sample = action.choices[0] if action.choices else {int: "1", float: "0.5"}.get(action.type, "x")
            assert action.type(str(sample)) is not None, (name, action.dest)
            checked += 1
    assert checked > 100
    args = commands["train-mixing"].parse_args(["--index", "i", "--mentions", "m", "--train", "t", "--dev", "d",
                                                "--out", "o", "--fixed", "1"])
    assert getattr(args, "MixConfig.fixed") == 1


@pytest.mark.parametrize("flag, expected", [([], None), (["--question-entity", "linked"], "linked"),
                                            (["--question-entity", "bracketed"], "bracketed")])
def test_evaluate_passes_question_entity(monkeypatch, tmp_path, flag, expected):
    import drkit.cli as cli
    import drkit.qa.evaluate as ev

    seen = {}

    def fake_evaluate(kit, questions, out, qtypes, batch_size, qps_sample, query, log, question_entity):
        seen["question_entity"] = question_entity
        return {"hits@1": 0.0, "hits@5": 0.0, "scored": 0, "lines": 0}

    monkeypatch.setattr(ev, "evaluate", fake_evaluate)
    monkeypatch.setattr(cli, "load_kit", lambda args: (None, None))
    assert cli.main(["evaluate", "--index", "i", "--model", "m", "--questions", "q.txt", "--out", str(tmp_path)] + flag) == 0
    assert seen == {"question_entity": expected}
