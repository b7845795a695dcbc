"""Precision, device and threads chosen for the machine (drkit.util.hardware), and their plumbing: the
`auto` choice against what the hardware reports, the probe, refusals, the scores' dtype, manifests that
record what the vectors were computed in, and CPU/GPU agreement where a GPU exists."""

import numpy as np
import pytest
import torch

from drkit.dense.encoder import DualEncoder, EncoderConfig
from drkit.dense.mentions import EmbedConfig, MentionIndex, build_mention_index, embed_mentions
from drkit.dense.mips import ExactMIPS
from drkit.errors import ConfigError
from drkit.util import hardware
from drkit.util.hardware import choose, configure_threads


@pytest.fixture
def fresh(monkeypatch):
    """`choose` and the CPU decision recomputed for the test (and again after it)."""
    choose.cache_clear()
    hardware._auto_cpu.cache_clear()
    yield monkeypatch
    choose.cache_clear()
    hardware._auto_cpu.cache_clear()


@pytest.mark.parametrize("report, probe, want", [
    ((True, "the CPU has AMX: native bf16"), None, "bf16"),
    ((False, "the CPU reports AVX2"), None, "fp32"),
    ((None, "the CPU reports SVE256"), 2.5, "bf16"),  # the probe decides: bf16 measured faster
    ((None, "the CPU reports SVE256"), 0.3, "fp32"),  # emulated: slower
])
def test_auto_follows_the_report_then_the_probe(fresh, capsys, report, probe, want):
    probed = []
    fresh.setattr(hardware, "cpu_native_bf16", lambda: report)
    fresh.setattr(hardware, "probe_bf16_speedup", lambda: probed.append(1) or probe)
    fresh.setattr(torch.cuda, "is_available", lambda: False)
    c = choose("auto", "auto")
    assert (c.precision, c.device.type) == (want, "cpu")
    assert len(probed) == (report[0] is None)  # probed only when the report does not settle it
    assert c.amp_dtype == (torch.bfloat16 if want == "bf16" else None)
    assert c.score_dtype == (torch.bfloat16 if want == "bf16" else torch.float32)
    assert report[1] in c.reason
    said = capsys.readouterr().err
    assert f"computing in {want} on cpu" in said and report[1] in said
    choose("auto", "auto")
    assert capsys.readouterr().err == ""  # said once per process


@pytest.mark.parametrize("flags, capability, want", [
    ((True, False), "AVX512", True), ((False, True), "AVX512", True), ((False, False), "AVX2", False),
    ((False, True), "AVX2", None),  # AVX512-BF16 with torch held to AVX2 code (ATEN_CPU_CAPABILITY): the probe
    ((False, False), "SVE256", None)])
def test_the_cpu_report(fresh, flags, capability, want):
    fresh.setattr(torch.cpu, "_is_amx_tile_supported", lambda: flags[0])
    fresh.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: flags[1])
    fresh.setattr(hardware, "cpu_capability", lambda: capability)
    fresh.setattr(hardware.platform, "machine", lambda: "x86_64")
    native, why = hardware.cpu_native_bf16()
    assert native is want
    assert ("native bf16" in why) if want else (capability in why)


def test_a_resolved_auto_handed_on_is_not_said_again_as_set(fresh, capsys):
    fresh.setattr(hardware, "_said", set())
    fresh.setattr(hardware, "_stated", set())
    fresh.setattr(hardware, "cpu_native_bf16", lambda: (True, "the CPU has AMX: native bf16"))
    fresh.setattr(torch.cuda, "is_available", lambda: False)
    assert choose("auto", "cpu").precision == "bf16" and choose("bf16", "cpu").reason == "as set"
    said = capsys.readouterr().err
    assert said.count("computing in bf16 on cpu") == 1 and "as set" not in said, said
    choose("fp32", "cpu")  # a precision set that was not said yet is
    assert "computing in fp32 on cpu (as set)" in capsys.readouterr().err
    choose("bf16", "cpu", training=True)  # training is said on its own
    assert "training in bf16 on cpu (as set)" in capsys.readouterr().err
    fresh.setattr(hardware, "_said", set())
    fresh.setattr(hardware, "_stated", set())
    assert EmbedConfig(quantize="int8").compute().precision == "fp32"  # int8 embedding says why it is fp32
    assert "embedding in fp32 on cpu (int8 dynamic quantisation" in capsys.readouterr().err
    choose.cache_clear()
    assert choose("fp32", "cpu").reason == "as set"  # what the encoder's stage hands on: said already
    assert capsys.readouterr().err == ""


def test_this_machines_choice_matches_its_report(fresh):
    native, _ = hardware.cpu_native_bf16()
    if native is None:
        pytest.skip("this CPU's report does not settle it (the probe decides)")
    assert choose("auto", "cpu").precision == ("bf16" if native else "fp32")


def test_drkit_device_sets_what_auto_means(fresh):
    fresh.setenv("DRKIT_DEVICE", "cpu")
    assert hardware.resolve_device("auto").type == "cpu" and hardware.resolve_device("cpu").type == "cpu"
    fresh.setenv("DRKIT_DEVICE", "gpu")
    with pytest.raises(ConfigError, match="DRKIT_DEVICE must be one of"):
        hardware.resolve_device("auto")
    assert hardware.resolve_device("cpu").type == "cpu"  # an explicit setting does not read it
    fresh.delenv("DRKIT_DEVICE")
    assert hardware.resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_explicit_settings_and_refusals(fresh):
    assert choose("fp32", "cpu").precision == "fp32"
    assert choose("bf16", "cpu").amp_dtype == torch.bfloat16
    with pytest.raises(ConfigError, match="fp16 is for a CUDA GPU"):
        choose("fp16", "cpu")
    with pytest.raises(ConfigError, match="precision must be one of"):
        choose("half", "cpu")
    with pytest.raises(ConfigError, match="device must be one of"):
        choose("auto", "tpu")
    with pytest.raises(ConfigError, match="train in auto, bf16 or fp32"):
        choose("fp16", "cuda", training=True)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            choose("fp32", "cuda")


def test_autocast_is_plain_fp32_or_bf16():
    layer = torch.nn.Linear(8, 4)
    x = torch.randn(3, 8)
    with choose("fp32", "cpu").autocast():
        assert layer(x).dtype == torch.float32
        assert torch.equal(layer(x), layer(x))
    with choose("bf16", "cpu").autocast():
        assert layer(x).dtype == torch.bfloat16


def test_the_probe_measures_a_ratio():
    speedup = hardware.probe_bf16_speedup(rows=16, size=32, repeats=1)
    assert np.isfinite(speedup) and speedup > 0


def test_threads(capsys):
    before = torch.get_num_threads()
    try:
        assert configure_threads(1, what="the test") == 1 and torch.get_num_threads() == 1
        cpus = hardware.available_cpus()
        assert configure_threads(0, reserve=cpus + 5) == 1  # never below one
        assert configure_threads(0) == cpus == torch.get_num_threads()
        assert "the test uses 1 torch thread(s)" in capsys.readouterr().err
        with pytest.raises(ConfigError, match="threads must be >= 0"):
            configure_threads(-1)
    finally:
        torch.set_num_threads(before)


def test_exact_mips_scores_in_the_chosen_dtype():
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((500, 16)).astype(np.float16)
    q = rng.standard_normal((4, 16)).astype(np.float32)
    want = q.astype(np.float64) @ vectors.astype(np.float64).T
    scores, ids = ExactMIPS(vectors, block_size=128, compute_dtype=torch.float32).search(q, 5)
    ref = np.argsort(-want, axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(ids, ref)
    np.testing.assert_allclose(scores, np.take_along_axis(want, ref, 1), rtol=1e-5, atol=1e-5)
    assert ExactMIPS(vectors).compute_dtype == choose("auto", "cpu").score_dtype


def test_embed_config_reads_old_manifests_and_records_what_ran():
    assert EmbedConfig.from_manifest({"batch_tokens": 64, "bf16": True}).precision == "bf16"
    assert EmbedConfig.from_manifest({"batch_tokens": 64, "bf16": False}).precision == "fp32"
    old = EmbedConfig.from_manifest({"batch_tokens": 64, "precision": "fp32", "device": "cuda"})
    assert (old.precision, old.device) == ("fp32", "auto")  # the device is this machine's choice
    resolved = EmbedConfig().resolved()
    assert resolved.precision == choose().precision and resolved.device == "cpu" or torch.cuda.is_available()


def test_a_mention_index_records_its_precision(toy_index, tiny_base, tmp_path):
    from drkit.dense.pretrain import PretrainConfig, pretrain

    pretrain(toy_index.path, None, tmp_path / "enc", PretrainConfig(steps=0),
             EncoderConfig(base=str(tiny_base), dim=16), log=lambda *a: None)
    enc = DualEncoder.load(tmp_path / "enc" / "encoder")
    assert enc.manifest["pretraining"]["computed_in"] == {"precision": choose("auto", "auto").precision,
                                                         "device": choose("auto", "auto").device.type}
    mi = build_mention_index(toy_index.path, tmp_path / "enc" / "encoder", tmp_path / "m", EmbedConfig(device="cpu"),
                             log=lambda *a: None)
    assert mi.manifest["config"]["precision"] == choose("auto", "cpu").precision
    assert mi.manifest["config"]["device"] == "cpu"
    again = MentionIndex.load(tmp_path / "m")
    assert again.manifest["config"] == mi.manifest["config"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CI has none)")
def test_gpu_embedding_and_pretraining_agree_with_the_cpu(toy_index, tiny_base, tmp_path):
    """The same encoder's mention vectors on CUDA and on the CPU (fp32 both): equal within 1e-3; in bf16 (where
    the GPU has it) within 5e-2 of the CPU's fp32 (relative to the largest value). One pretraining step's loss
    agrees likewise."""
    from drkit.dense.distant import DistantConfig, DistantSupervision
    from drkit.dense.pretrain import PretrainConfig, batch_loss, sample_batch

    enc = DualEncoder.from_base(EncoderConfig(base=str(tiny_base), dim=16)).eval()
    cpu, _ = embed_mentions(toy_index, enc, EmbedConfig(precision="fp32", device="cpu"))
    gpu, _ = embed_mentions(toy_index, enc, EmbedConfig(precision="fp32", device="cuda"))
    scale = float(np.abs(cpu.astype(np.float32)).max())
    assert np.abs(gpu.astype(np.float32) - cpu.astype(np.float32)).max() <= 1e-3 * scale
    if torch.cuda.is_bf16_supported():
        half, _ = embed_mentions(toy_index, enc, EmbedConfig(precision="bf16", device="cuda"))
        assert np.abs(half.astype(np.float32) - cpu.astype(np.float32)).max() <= 5e-2 * scale

    from drkit.data.kb import read_kb

    ds = DistantSupervision(toy_index, read_kb(toy_index.path.parent / "kb.txt"), DistantConfig())
    losses = {}
    for device in ("cpu", "cuda"):
        config = PretrainConfig(steps=1, anchor_passages=2, max_passages=4, precision="fp32", device=device)
        model = DualEncoder.from_base(EncoderConfig(base=str(tiny_base), dim=16)).to(device).eval()
        losses[device] = batch_loss(model, ds, sample_batch(ds, config, 0), config)["loss"].item()
    assert abs(losses["cpu"] - losses["cuda"]) <= 1e-3 * max(1.0, abs(losses["cpu"]))


def test_rows_alike_gives_each_row_what_a_large_batch_gives_it():
    """A product of one to three rows may run another kernel (another summation order) than of more: with
    `rows_alike`, each row's result is bit for bit what an 8-row product gives it, whatever the other rows,
    and its result in a batch of 64 up to the last bits (a CPU's kernels may sum 8 and 64 rows in other
    orders: MKL on AVX-512 with one thread does)."""
    from drkit.reason.question_encoder import MIN_ROWS, rows_alike

    torch.manual_seed(0)
    layer = torch.nn.Linear(384, 128)
    x = torch.randn(64, 384)
    with torch.no_grad():
        eight = layer(x[:MIN_ROWS])
        full = layer(x)
        for b in (1, 2, 3, 5, 8):
            assert torch.equal(rows_alike(layer, x[:b]), eight[:b])
            torch.testing.assert_close(rows_alike(layer, x[:b]), full[:b], rtol=1e-5, atol=1e-6)
        assert rows_alike(layer, x[:0]).shape == (0, 128)


def test_a_run_made_with_the_bf16_flag_reads_as_its_precision(tmp_path):
    """run.json of a run made when precision was `bf16: true/false` is read as precision bf16 / fp32, so the
    same command resumes it instead of refusing it for other settings."""
    import json

    from drkit.reason.train import TrainConfig
    from drkit.util.runs import upgrade_run_settings

    for flag, want in ((True, "bf16"), (False, "fp32")):
        old = {k: v for k, v in __import__("dataclasses").asdict(TrainConfig()).items() if k != "precision"}
        (tmp_path / "run.json").write_text(json.dumps({"train": {**old, "bf16": flag}, "index": "x"}))
        upgrade_run_settings(tmp_path, {"train": TrainConfig})
        settings = json.loads((tmp_path / "run.json").read_text())
        assert settings["train"]["precision"] == want and "bf16" not in settings["train"]
        assert settings["index"] == "x"


def test_an_fp16_mention_index_is_extended_in_fp32_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("with a GPU the recorded fp16 stands")
    assert EmbedConfig.from_manifest({"batch_tokens": 64, "precision": "fp16", "device": "cuda"}).precision == "fp32"


def test_xdist_workers_keep_to_cpus_of_their_own_within_a_quota():
    from conftest import worker_cpus

    cpus = list(range(8))
    assert [worker_cpus(cpus, 8, 2, me) for me in (0, 1)] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert [worker_cpus(cpus, 2, 2, me) for me in (0, 1)] == [[0], [1]]  # a 2-CPU quota on 8 visible CPUs
    assert [worker_cpus(cpus, 3, 2, me) for me in (0, 1)] == [[0], [1]]
    assert [worker_cpus(cpus, 1, 2, me) for me in (0, 1)] == [[0], [1]]  # never none
    assert [worker_cpus([0, 1], 2, 4, me) for me in range(4)] == [[0], [1], [0], [1]]  # more workers than CPUs
    for quota in range(1, 9):  # disjoint, and together within the quota (or one CPU a worker)
        mine = [worker_cpus(cpus, quota, 4, me) for me in range(4)]
        assert len({c for m in mine for c in m}) == sum(map(len, mine)) <= max(quota, 4)
