"""Precision, device and threads chosen for the machine a command runs on.

Every stage that runs a transformer (pretraining, embedding, training, question encoding) or scores
mention vectors (exact MIPS, the follow's pair scores) asks this module what to compute in:

* ``precision``: ``auto`` (the default), ``fp32``, ``bf16`` or ``fp16`` (CUDA only). On a CPU ``auto``
  is bf16 where the CPU computes it natively (AMX or AVX512-BF16) and fp32 elsewhere: on a CPU without
  native bf16 (AVX2 only, say) bf16 autocast is emulated and a linear layer runs about 4x slower than in
  fp32. Where the CPU's report does not settle it (not x86), a short measured probe does: a linear layer
  timed in fp32 and under bf16 autocast. On a GPU ``auto`` is fp32: measured on an H100, bf16 autocast
  made every stage of drkit's 22M-parameter encoder slower (the GPU work is bound by kernel launches, and
  autocast adds a cast before each product); ``bf16`` stays for a larger base transformer.
* ``device``: ``auto`` (the environment's DRKIT_DEVICE when set, else CUDA when a GPU is present, else the
  CPU), ``cpu`` or ``cuda``.
* threads: torch's intra-op threads set to the CPUs this process may use (its affinity and cgroup
  quota), less what a caller reserves for processes running beside it.

Stored artifacts keep their formats (fp16 mention vectors): an index built on one machine loads and
answers on another. Each choice is said once per process on standard error, with its reason.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
from dataclasses import dataclass
from functools import lru_cache

import torch

from drkit.errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
PROBE_MIN_SPEEDUP = 1.2  # bf16 is kept by the probe only when at least this much faster than fp32
_said: set[str] = set()
_stated: set[tuple[bool, str, str]] = set()  # (training, precision, device) of every Compute said


def say(message: str) -> None:
    """Print `message` on standard error once per process (every later call with it is silent)."""
    if message not in _said:
        _said.add(message)
        print(f"drkit: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Compute:
    """Where and in what a stage computes: the device, the autocast dtype of its transformers (None:
    plain fp32) and the dtype in which mention vectors are scored (bf16 where native, else fp32)."""

    device: torch.device
    precision: str  # "fp32", "bf16" or "fp16": resolved, never "auto"
    reason: str

    @property
    def amp_dtype(self) -> torch.dtype | None:
        return None if self.precision == "fp32" else _DTYPES[self.precision]

    @property
    def score_dtype(self) -> torch.dtype:
        """The dtype of exact MIPS blocks and the follow's pair scores (fp16 vectors are exact in either)."""
        return torch.bfloat16 if self.precision == "bf16" else torch.float32

    def autocast(self):
        """A context in which the transformers run in `precision` (a no-op for fp32)."""
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    def describe(self) -> str:
        return f"{self.precision} on {self.device.type} ({self.reason})"


def cpu_capability() -> str:
    """What torch reports of the CPU's vector instructions: "AVX2", "AVX512", "DEFAULT", ..."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # an old torch, or a platform that does not say
        return "unknown"


def cpu_native_bf16() -> tuple[bool | None, str]:
    """(True/False, why) when the CPU's report settles whether it computes bf16 natively; (None, why) when
    it does not (not x86: the probe decides)."""
    def has(name: str) -> bool:
        try:
            return bool(getattr(torch.cpu, name)())
        except Exception:  # not in this torch: the report does not say
            return False

    amx, avx512_bf16 = has("_is_amx_tile_supported"), has("_is_avx512_bf16_supported")
    capability = cpu_capability()
    if (amx or avx512_bf16) and not capability.startswith("AVX512"):
        # the CPU has it but torch's kernels were held below AVX512 (ATEN_CPU_CAPABILITY=avx2, say, which is how
        # an AVX2 machine is imitated on this one): whether bf16 still runs natively is for the probe to measure
        return None, (f"the CPU has {'AMX' if amx else 'AVX512-BF16'} but torch reports {capability} "
                      "(ATEN_CPU_CAPABILITY)")
    if amx or avx512_bf16:
        return True, f"the CPU has {'AMX' if amx else 'AVX512-BF16'}: native bf16"
    x86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
    if x86 and (capability in ("DEFAULT", "NO AVX") or capability.startswith("AVX")):
        return False, f"the CPU reports {capability}, no AMX or AVX512-BF16: bf16 would be emulated"
    return None, f"the CPU reports {capability}"


def probe_bf16_speedup(rows: int = 256, size: int = 384, repeats: int = 3) -> float:
    """fp32 time / bf16-autocast time of a (rows x size) by (size x 4 size) linear layer on the CPU:
    the best of `repeats` runs each, after one warm-up run (about 0.1 s in all)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(rows, size, generator=gen)
    layer = torch.nn.Linear(size, 4 * size)

    def best(amp: bool) -> float:
        times = []
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            for _ in range(repeats + 1):
                t = time.perf_counter()
                layer(x)
                times.append(time.perf_counter() - t)
        return min(times[1:])

    return best(False) / max(best(True), 1e-9)


@lru_cache(maxsize=None)
def _auto_cpu() -> tuple[str, str]:
    native, why = cpu_native_bf16()
    if native is None:
        speedup = probe_bf16_speedup()
        native = speedup >= PROBE_MIN_SPEEDUP
        why += f"; a probe timed bf16 autocast at {speedup:.2f}x fp32's speed"
    return ("bf16" if native else "fp32"), why


def resolve_device(device: str = "auto") -> torch.device:
    """The torch device of a `device` setting. ``auto`` takes the environment variable DRKIT_DEVICE when it is set
    (auto, cpu or cuda: to keep every stage of a process off a GPU, say, as the test suite does), else a CUDA
    GPU when torch sees one, else the CPU."""
    if device not in DEVICES:
        raise ConfigError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "auto":
        device = os.environ.get("DRKIT_DEVICE", "").strip() or "auto"
        if device not in DEVICES:
            raise ConfigError(f"the environment variable DRKIT_DEVICE must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was asked for, but torch sees no CUDA GPU (use --device auto or cpu)")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


@lru_cache(maxsize=None)
def choose(precision: str = "auto", device: str = "auto", training: bool = False) -> Compute:
    """The `Compute` for a stage's `precision` and `device` settings (checked; "auto" resolved). fp16 is
    for inference on a GPU only (`training`: refused, since its gradients would need loss scaling)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if training and precision == "fp16":
        raise ConfigError("--precision fp16 is for embedding and answering; train in auto, bf16 or fp32")
    dev = resolve_device(device)
    if dev.type == "cuda":
        native = torch.cuda.is_bf16_supported()
        name = torch.cuda.get_device_name(dev)
        if precision == "auto":
            precision, reason = "fp32", (f"{name}: bf16 autocast measured slower than fp32 for drkit's small encoder, "
                                         "whose GPU work is bound by kernel launches that autocast's casts multiply "
                                         "(benchmarks/results/precision/precision-cuda-*.md); --precision bf16 "
                                         "for a large --base")
        else:
            reason = "as set"
            if precision == "bf16" and not native:
                raise ConfigError(f"--precision bf16: {name} has no bf16 support (use fp16, fp32 or auto)")
        if precision != "fp32" and torch.backends.cuda.cudnn_sdp_enabled():
            # cuDNN's attention builds an execution plan for every new sequence length: a 3.5x slower bf16
            # pretraining step on an H100 (precision-cuda-random-init-nocudnn.md); flash / memory-efficient
            # attention need none. For the whole process (fp32 attention there uses memory-efficient kernels anyway)
            torch.backends.cuda.enable_cudnn_sdp(False)
            reason += "; cuDNN attention off (it plans each new sequence length)"
    else:
        if precision == "fp16":
            raise ConfigError("--precision fp16 is for a CUDA GPU; on the CPU use auto, fp32 or bf16")
        if precision == "auto":
            precision, reason = _auto_cpu()
        else:
            reason = "as set"
    return state(Compute(dev, precision, reason), training)


def state(out: Compute, training: bool = False, verb: str | None = None) -> Compute:
    """Say `out` once ("computing in bf16 on cpu (why)"; `verb` for "computing" or "training"), and return it. A
    precision "as set" is not said where the same one was said before with its reason: a stage handing on what
    `auto` resolved to is not a setting of the user's."""
    key = (training, out.precision, out.device.type)
    if not (out.reason == "as set" and key in _stated):
        say(f"{verb or ('training' if training else 'computing')} in {out.describe()}")
    _stated.add(key)
    return out


def available_cpus() -> int:
    """CPUs this process may run on: its affinity, capped by a cgroup v2 CPU quota where there is one."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def configure_threads(threads: int = 0, reserve: int = 0, what: str = "this process") -> int:
    """Set torch's intra-op threads: `threads` when given (> 0), else the available CPUs less `reserve` (at
    least 1), so that processes working beside this one (Ray workers, a server's HTTP side) are not
    oversubscribed. Says what was used; returns the number of threads."""
    if threads < 0:
        raise ConfigError(f"threads must be >= 0 (0: all available CPUs), got {threads}")
    cpus = available_cpus()
    n = threads or max(1, cpus - reserve)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    say(f"{what} uses {n} torch thread(s) of {cpus} available CPU(s)"
        + (f" ({reserve} kept for other processes)" if reserve and not threads else ""))
    return n


def precision_field(what: str):
    """The `precision` field of a settings dataclass (`what`: the computation it sets)."""
    from dataclasses import field

    return field(default="auto", metadata={
        "help": f"precision of {what}: auto (bf16 on a CPU that computes it natively: AMX or AVX512-BF16; fp32 "
                "elsewhere, a GPU included, where bf16 autocast measured slower for drkit's small encoder), fp32, "
                "bf16, or fp16 (GPU, no training)",
        "choices": PRECISIONS})


def device_field(what: str):
    """The `device` field of a settings dataclass."""
    from dataclasses import field

    return field(default="auto", metadata={
        "help": f"where {what} runs: auto (a CUDA GPU when torch sees one, else the CPU), cpu or cuda",
        "choices": DEVICES})
