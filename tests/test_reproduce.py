"""``drkit reproduce-metaqa``: flags generated from its settings dataclass; no stale work reused (a
changed setting redoes the work or is refused by name); one denominator per results table."""

import dataclasses
import json
from pathlib import Path

import pytest
from test_model import films_kb, write_questions  # noqa: F401  (films_kb is a fixture)

import drkit
from drkit.cli import build_parser, config_from_args, main
from drkit.errors import ConfigError
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


# -- no stale work: a changed setting or input redoes the work or is refused by name -------------------------

@pytest.fixture
def metaqa_folder(films_kb, tmp_path):  # noqa: F811
    d, films = films_kb
    data = tmp_path / "data"
    (data / "1-hop/vanilla").mkdir(parents=True)
    write_questions(data / "1-hop/vanilla/qa_train.txt", films[:36])
    write_questions(data / "1-hop/vanilla/qa_dev.txt", films[36:])
    for f in ("wiki.txt", "kb.txt"):
        (data / f).write_text((d / f).read_text())
    return data, films


def _counting(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_reproduce_redoes_or_refuses_stale_work(metaqa_folder, tmp_path, monkeypatch):
    import drkit.experiments.metaqa as metaqa
    import drkit.qa.evaluate
    from drkit.experiments.metaqa import ReproduceConfig, reproduce_metaqa
    from drkit.reason.model import MultiHopModel

    data, films = metaqa_folder
    out = tmp_path / "out"
    quiet = lambda *a: None  # noqa: E731
    cfg = ReproduceConfig(hops=(1,), steps=2, pretrain_steps=0, k_sweep=(10,), sweep_questions=8)
    first = reproduce_metaqa(data, out, cfg, log=quiet)
    evals = _counting(monkeypatch, drkit.qa.evaluate, "evaluate")
    sweeps = _counting(monkeypatch, metaqa, "k_sweep_points")
    assert reproduce_metaqa(data, out, cfg, log=quiet)["main"] == first["main"]
    assert (len(evals), len(sweeps)) == (0, 0)  # nothing changed: everything reused

    # (a) a finished training run is not reused with other training settings, nor the pretrained encoder
    with pytest.raises(ConfigError, match=r"train\.steps: 2 in the run, 3 asked"):
        reproduce_metaqa(data, out, dataclasses.replace(cfg, steps=3), log=quiet)
    with pytest.raises(ConfigError, match=r"pretrain\.steps: 0 in the run, 1 asked"):
        reproduce_metaqa(data, out, dataclasses.replace(cfg, pretrain_steps=1), log=quiet)

    # (b) the evaluation and the K sweep are redone when the run holds another model
    model_dir = out / "train-drkit-1hop" / "model"
    model = MultiHopModel.load(model_dir)
    import torch

    with torch.no_grad():
        for p in model.encoder.start.parameters():
            p.add_(0.5)
    model.save(model_dir, overwrite=True, extra_manifest={k: model.manifest[k] for k in ("training", "mentions", "index")})
    lines = []
    reproduce_metaqa(data, out, cfg, log=lines.append)
    assert (len(evals), len(sweeps)) == (1, 1)
    assert any("eval-drkit-1hop" in line and "again" in line for line in lines), lines
    metrics = json.loads((out / "eval-drkit-1hop" / "metrics.json").read_text())
    from drkit.util.artifact import file_checksum

    assert metrics["made_with"]["model"]["weights_sha256"] == file_checksum(model_dir / "model.safetensors")["sha256"]

    # ... and when its questions changed
    write_questions(data / "1-hop/vanilla/qa_dev.txt", films[30:])
    reproduce_metaqa(data, out, cfg, log=quiet)
    assert len(evals) == 2
    assert json.loads((out / "eval-drkit-1hop" / "metrics.json").read_text())["lines"] == 2 * 18


def test_dev_sample_is_drawn_again_when_its_size_changes(tmp_path):
    """(c) the cached dev sample of the ablations follows --ablation-questions (and its source file)."""
    from drkit.experiments.metaqa import dev_sample

    source = tmp_path / "dev.txt"
    source.write_text("".join(f"question {i} [x]\ta\n" for i in range(40)))
    sample = tmp_path / "sample.txt"
    assert dev_sample(source, sample, 10) == sample
    assert len(sample.read_text().splitlines()) == 10
    assert dev_sample(source, sample, 5) == sample
    assert len(sample.read_text().splitlines()) == 5
    kept = sample.read_text()
    assert dev_sample(source, sample, 5) == sample and sample.read_text() == kept  # the same draw, reused
    source.write_text("".join(f"question {i} [y]\ta\n" for i in range(40)))
    dev_sample(source, sample, 5)
    assert "[y]" in sample.read_text()
    assert dev_sample(source, sample, 0) == source  # 0: all lines, no sample


def test_pretrain_run_done_is_found_done(tiny_base, toy_index, tmp_path):
    """Running a finished pretraining again returns its encoder (after checking its settings), like train."""
    from drkit.dense.encoder import EncoderConfig
    from drkit.dense.pretrain import PretrainConfig, pretrain

    enc = EncoderConfig(base=str(tiny_base), dim=16)
    first = pretrain(toy_index.path, None, tmp_path / "run", PretrainConfig(steps=0), enc, log=lambda *a: None)
    lines = []
    assert pretrain(toy_index.path, None, tmp_path / "run", PretrainConfig(steps=0), enc, log=lines.append) == first
    assert any("already" in line for line in lines)
    with pytest.raises(ConfigError, match=r"encoder\.dim: 16 in the run, 8 asked"):
        pretrain(toy_index.path, None, tmp_path / "run", PretrainConfig(steps=0), EncoderConfig(base=str(tiny_base), dim=8),
                 log=lambda *a: None)

