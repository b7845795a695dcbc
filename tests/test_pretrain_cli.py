"""``drkit pretrain`` without a KB: the untrained encoder, ready for ``drkit embed`` (in-process CLI)."""

import json

from drkit.cli import build_parser, main
from drkit.dense.encoder import DualEncoder


def test_pretrain_without_kb_writes_the_untrained_encoder(tiny_base, toy_index, tmp_path, capsys):
    run, mentions = tmp_path / "run", tmp_path / "mentions"
    assert main(["pretrain", "--index", str(toy_index.path), "--out", str(run), "--base", str(tiny_base),
                 "--dim", "16"]) == 0
    manifest = json.loads((run / "encoder" / "manifest.json").read_text())
    assert manifest["pretraining"]["steps"] == 0 and manifest["pretraining"]["settings"]["kb"] is None
    untrained = DualEncoder.from_base(DualEncoder.load(run / "encoder").config)
    for k, v in untrained.state_dict().items():
        assert v.equal(DualEncoder.load(run / "encoder").state_dict()[k]), k
    assert main(["embed", "--index", str(toy_index.path), "--encoder", str(run), "--out", str(mentions)]) == 0
    assert (mentions / "manifest.json").exists()


def test_pretrain_steps_without_kb_is_a_clear_error(tiny_base, toy_index, tmp_path, capsys):
    code = main(["pretrain", "--index", str(toy_index.path), "--out", str(tmp_path / "run"), "--base", str(tiny_base),
                 "--dim", "16", "--steps", "3"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--kb" in err and "--steps 3" in err
    assert not (tmp_path / "run").exists()


def test_pretrain_help_says_what_steps_default_to():
    pretrain = build_parser()._subparsers._group_actions[0].choices["pretrain"]
    steps = next(a for a in pretrain._actions if "--steps" in a.option_strings)
    kb = next(a for a in pretrain._actions if "--kb" in a.option_strings)
    assert not kb.required
    assert "2600 with --kb, 0 without" in steps.help and "(default: 2600)" not in steps.help
