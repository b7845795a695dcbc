"""``drkit reproduce-metaqa``: flags generated from its settings dataclass; no stale work reused (a
changed setting redoes the work or is refused by name); one denominator per results table."""

import dataclasses
import json
from pathlib import Path

import drkit
from drkit.cli import build_parser, config_from_args, main
from drkit.reason.follow import FollowConfig

PACKAGE = Path(drkit.__file__).parent


def _reproduce_parser():
    return build_parser()._subparsers._group_actions[0].choices["reproduce-metaqa"]


def test_reproduce_flags_follow_the_settings_dataclass():
    from drkit.experiments.metaqa import ReproduceConfig

    actions = {opt: a for a in _reproduce_parser()._actions for opt in a.option_strings}
    for f in dataclasses.fields(ReproduceConfig):
        flag = "--" + f.name.replace("_", "-")
        assert flag in actions, flag
        assert f.metadata["help"] in actions[flag].help, flag
    args = build_parser().parse_args(["reproduce-metaqa"])
    assert config_from_args(args, ReproduceConfig) == ReproduceConfig()
    args = build_parser().parse_args(["reproduce-metaqa", "--hops", "1", "2", "--steps", "5", "--no-curriculum",
                                      "--min-weight", "0.01", "--k-sweep", "10", "100"])
    assert config_from_args(args, ReproduceConfig) == ReproduceConfig(hops=(1, 2), steps=5, curriculum=False,
                                                                      min_weight=0.01, k_sweep=(10, 100))


def test_min_weight_help_lives_in_one_place():
    min_weight = next(f for f in dataclasses.fields(FollowConfig) if f.name == "min_weight")
    assert min_weight.metadata["help"] in _reproduce_parser()._option_string_actions["--min-weight"].help
    copies = [p for p in PACKAGE.rglob("*.py") for line in p.read_text().splitlines() if "skips the passages" in line]
    assert copies == [PACKAGE / "reason" / "follow.py"], copies


def test_cli_hands_the_settings_to_the_python_api(monkeypatch, tmp_path):
    import drkit.experiments.metaqa as metaqa

    seen = {}
    monkeypatch.setattr(metaqa, "reproduce_metaqa", lambda data, out, config, log: seen.update(config=config))
    assert main(["reproduce-metaqa", "--data", str(tmp_path), "--out", str(tmp_path / "out"), "--hops", "2",
                 "--ablations", "--ablation-questions", "50"]) == 0
    assert seen["config"] == metaqa.ReproduceConfig(hops=(2,), ablations=True, ablation_questions=50)
