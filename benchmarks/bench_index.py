#!/usr/bin/env python
"""Wall time and peak memory of a full `drkit.index.build.build_index` on the MetaQA data.

The build runs in a fresh Python subprocess, so the peak resident set size (RSS) measured is that of
the build alone (interpreter start and imports included): it is read from the rusage of that one
child (os.wait4; ru_maxrss is KiB on Linux) and, where GNU /usr/bin/time is present, cross-checked
with its "Maximum resident set size". The wall time is measured around the subprocess (start-up,
imports and the writing of the artifact included); the build's own per-stage timings come from the
artifact's report.json ("timings_s"), with its counts ("counts").

Targets (from the issue): at most 5 minutes wall and 4 GB (4e9 bytes) peak RSS.

Run 1 builds without questions: build_index(corpus=DATA/wiki.txt, kb=DATA/kb.txt, out=TMP, overwrite=True).
With --with-questions, run 2 also passes DATA/{1,2,3}-hop/vanilla/qa_dev.txt (hops read from the
N-hop folder name) and is reported separately.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = "../shared/data/metaqa"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "bench_index.json"
TARGET_WALL_S = 5 * 60
TARGET_PEAK_GB = 4.0
QUESTION_FILES = [f"{h}-hop/vanilla/qa_dev.txt" for h in (1, 2, 3)]

CHILD = """
import sys
from drkit.index.build import build_index
corpus, kb, out, *questions = sys.argv[1:]
build_index(corpus=corpus, out=out, kb=kb, questions=questions, overwrite=True)
"""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=DEFAULT_DATA,
                   help=f"MetaQA folder with wiki.txt, kb.txt and N-hop/vanilla/qa_dev.txt; a relative path is "
                        f"taken from the repository root {ROOT} (default: {DEFAULT_DATA})")
    p.add_argument("--with-questions", action="store_true",
                   help="also time a second build given the 1/2/3-hop dev question files (sparse reachability)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="where to write the index artifacts (default: a temporary folder, removed afterwards)")
    p.add_argument("--keep", action="store_true", help="keep the built artifacts (printed paths)")
    p.add_argument("--python", default=sys.executable, help="interpreter for the build subprocess (default: this one)")
    p.add_argument("--strict", action="store_true", help="exit 1 if a target (time or memory) is missed")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"JSON results file (default: {DEFAULT_OUT.relative_to(ROOT)})")
    return p.parse_args(argv)


def gnu_time() -> str | None:
    path = shutil.which("time") or ("/usr/bin/time" if os.path.exists("/usr/bin/time") else None)
    if path is None:
        return None
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return path if "GNU" in (r.stdout + r.stderr) else None


def maxrss_bytes(ru_maxrss: int) -> int:
    return ru_maxrss if sys.platform == "darwin" else ru_maxrss * 1024  # bytes on macOS, KiB on Linux


def run_build(python: str, data: Path, out: Path, questions: list[Path], time_bin: str | None) -> dict:
    cmd = [python, "-c", CHILD, str(data / "wiki.txt"), str(data / "kb.txt"), str(out), *map(str, questions)]
    time_file = None
    if time_bin:
        fd, time_file = tempfile.mkstemp(prefix="drkit-bench-time-", suffix=".txt")
        os.close(fd)
        cmd = [time_bin, "-v", "-o", time_file, *cmd]
    env = dict(os.environ)
    env.setdefault("DRKIT_PROGRESS", "0")
    print(f"$ {' '.join(cmd[:3]) if not time_bin else ' '.join(cmd[:6])} ... {' '.join(cmd[-3 - len(questions):])}",
          flush=True)
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env)
    _, status, rusage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"build failed with exit status {proc.returncode}: {' '.join(cmd)}")
    peak = maxrss_bytes(rusage.ru_maxrss)
    result = {"wall_s": round(wall, 2), "peak_rss_bytes": peak, "peak_rss_gb": round(peak / 1e9, 3),
              "peak_rss_gib": round(peak / 2**30, 3), "user_cpu_s": round(rusage.ru_utime, 2),
              "system_cpu_s": round(rusage.ru_stime, 2), "peak_rss_source": "os.wait4 ru_maxrss of the build subprocess"}
    if time_file:
        text = Path(time_file).read_text()
        os.unlink(time_file)
        for line in text.splitlines():
            if "Maximum resident set size" in line:
                kib = int(line.rsplit(":", 1)[1])
                result["gnu_time_max_rss_gb"] = round(kib * 1024 / 1e9, 3)
    report = json.loads((out / "report.json").read_text())
    result["counts"] = report["counts"]
    result["timings_s"] = report.get("timings_s", {})
    if "reachability" in report:
        result["reachability"] = {k: {f: v[f] for f in ("hops", "questions", "reachable", "fraction") if f in v}
                                  for k, v in report["reachability"].items()}
    result["target_wall_ok"] = wall <= TARGET_WALL_S
    result["target_peak_rss_ok"] = peak / 1e9 <= TARGET_PEAK_GB
    result["targets_ok"] = result["target_wall_ok"] and result["target_peak_rss_ok"]
    return result


def machine_info() -> dict:
    import numpy
    import scipy
    return {"nproc": os.cpu_count(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "python": sys.version.split()[0],
            "numpy": numpy.__version__, "scipy": scipy.__version__,
            "mem_total_gib": _mem_total_gib()}


def _mem_total_gib():
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def format_table(runs: dict) -> str:
    rows = [["run", "wall s", f"<= {TARGET_WALL_S} s", "peak RSS GB", f"<= {TARGET_PEAK_GB:g} GB", "user+sys CPU s",
             "build total s (report)"]]
    for name, r in runs.items():
        rows.append([name, f"{r['wall_s']:.1f}", "PASS" if r["target_wall_ok"] else "FAIL", f"{r['peak_rss_gb']:.2f}",
                     "PASS" if r["target_peak_rss_ok"] else "FAIL", f"{r['user_cpu_s'] + r['system_cpu_s']:.1f}",
                     f"{r['timings_s'].get('total', float('nan')):.1f}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for name, r in runs.items():
        lines.append(f"\n{name}: stage timings (s, from report.json): "
                     + ", ".join(f"{k} {v}" for k, v in r["timings_s"].items()))
        if "gnu_time_max_rss_gb" in r:
            lines.append(f"{name}: GNU time max RSS {r['gnu_time_max_rss_gb']:.2f} GB (cross-check)")
        for key, v in r.get("reachability", {}).items():
            lines.append(f"{name}: reachability {key}: {v['reachable']:,} / {v['questions']:,} = {v['fraction']:.3f}")
    first = next(iter(runs.values()))
    lines.append("\ncounts: " + ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v:.2f}"
                                            if isinstance(v, float) else f"{k} {v}" for k, v in first["counts"].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    data = Path(args.data)
    if not data.is_absolute():
        data = (ROOT / data).resolve()
    needed = [data / "wiki.txt", data / "kb.txt"] + ([data / q for q in QUESTION_FILES] if args.with_questions else [])
    if not data.is_dir():
        print(f"error: MetaQA data folder not found: {data} (give --data PATH)", file=sys.stderr)
        return 2
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        print(f"error: missing input files in {data}: {', '.join(missing)}", file=sys.stderr)
        return 2

    time_bin = gnu_time()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="drkit-bench-index-"))
    workdir.mkdir(parents=True, exist_ok=True)
    plan = {"build": []}
    if args.with_questions:
        plan["build_with_questions"] = [data / q for q in QUESTION_FILES]
    runs = {}
    try:
        for name, questions in plan.items():
            out = workdir / name
            print(f"\n== {name}: build_index(corpus={data / 'wiki.txt'}, kb={data / 'kb.txt'}, out={out}, "
                  f"questions={[str(q.relative_to(data)) for q in questions]}, overwrite=True)", flush=True)
            runs[name] = run_build(args.python, data, out, questions, time_bin)
    finally:
        if args.keep:
            print(f"\nartifacts kept in {workdir}")
        elif args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    print()
    print(format_table(runs))
    payload = {
        "benchmark": "bench_index",
        "description": "full build_index on MetaQA (wiki.txt + kb.txt) in a fresh subprocess: wall time and peak RSS",
        "machine": machine_info(),
        "parameters": {"data": str(data), "with_questions": args.with_questions,
                       "questions": [str(q) for q in plan.get("build_with_questions", [])],
                       "python": args.python, "gnu_time": time_bin,
                       "config": "build_index defaults (LinkConfig(), SparseConfig())"},
        "targets": {"wall_s_max": TARGET_WALL_S, "peak_rss_gb_max": TARGET_PEAK_GB,
                    "gb": "1e9 bytes; peak RSS of the build subprocess"},
        **runs["build"],
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    if args.strict and not all(r["targets_ok"] for r in runs.values()):
        print("error: a target was missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
