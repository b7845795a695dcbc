"""Load benchmark of ``drkit serve``: a real uvicorn server on 127.0.0.1 under concurrent clients, against
the same questions through the batch-64 front door, side by side in one run.

1. **Batch-64 path**: `DrKIT.answer_batch` in this process on the questions, 64 at a time, with the settings a
   request gets by default (5 answers, the chain's top 3 entities per hop); questions/s. Then the same
   questions one at a time (batch 1) for a lone question's latency. The model is then freed.
2. **Server**: ``python -m drkit serve`` in a subprocess on a free loopback port (its default batching:
   ``--max-batch 64 --max-wait-ms 5``). A lone client first sends questions one after another (a lone
   request's latency through HTTP and the batcher); then `--clients` concurrent clients (default 50), each
   on its own keep-alive connection, send one question per request, each the next of the list, for
   `--duration` seconds (default 60; no request is started after it, and at most `--max-requests`), and
   every request's status and latency is recorded. A request counts as an error when it is not HTTP 200
   or when its question's result is an error.
3. The server is stopped with SIGTERM and must exit with status 0.

Writes OUT/bench_serve.json (machine, parameters, every figure) and OUT/bench_serve.md (the table in the
README). Targets (issue 14): 0 errors, at least 70% of the batch-64 questions/s under load, p99 under 1 s.

    .venv/bin/python benchmarks/bench_serve.py --index runs/metaqa/index --model runs/metaqa/train-drkit-2hop \\
        --questions ../shared/data/metaqa/2-hop/vanilla/qa_dev.txt
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered) + 0.5)) - 1))]


def read_questions(path: Path, limit: int) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(line.split("\t")[0].strip())
            if len(out) == limit:
                break
    return out


def batch_path(index: str, model: str, questions: list[str], batch: int, lone: int) -> dict:
    """Questions/s of the front door at `batch`, and a lone question's latency (batch 1), in this process."""
    from drkit.errors import QuestionError
    from drkit.qa.pipeline import DrKIT

    kit = DrKIT.load(index, model)
    parsed, answerable = [], []  # a question naming no entity of the index is left out of both paths
    for q in questions:
        try:
            parsed.append(kit.parse(q))
            answerable.append(q)
        except QuestionError:
            pass
    kit.answer_batch(parsed[:batch])  # warm-up
    t0 = time.perf_counter()
    for i in range(0, len(parsed), batch):
        kit.answer_batch(parsed[i:i + batch])
    elapsed = time.perf_counter() - t0
    latencies = []
    for p in parsed[:lone]:
        s = time.perf_counter()
        kit.answer_batch([p])
        latencies.append(time.perf_counter() - s)
    del kit
    gc.collect()
    return {"questions": len(parsed), "unanswerable": len(questions) - len(parsed),
            f"qps_batch{batch}": round(len(parsed) / elapsed, 1), "seconds": round(elapsed, 2),
            "batch1_latency_ms": {"p50": round(1000 * statistics.median(latencies), 2),
                                  "p99": round(1000 * percentile(latencies, 99), 2), "n": len(latencies)},
            "_answerable": answerable}


class Client:
    """One keep-alive HTTP/1.1 connection sending POST /v1/ask; cheap enough that 50 of them in one process
    leave the cores to the server."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def ask(self, question: str) -> tuple[int, bool]:
        """(HTTP status, whether the question's result is an error)."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        body = json.dumps({"question": question}).encode()
        self.writer.write(b"POST /v1/ask HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (self.host.encode(), len(body), body))
        status = int((await self.reader.readline()).split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        payload = await self.reader.readexactly(length)
        failed = status != 200 or any("error" in r for r in json.loads(payload)["results"])
        return status, failed

    async def close(self):
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None


async def load(host: str, port: int, questions: list[str], clients: int, duration: float, max_requests: int) -> dict:
    latencies, statuses, errors = [], {}, []
    started = [0]
    end = time.perf_counter() + duration

    async def one(client_id: int):
        client = Client(host, port)
        while time.perf_counter() < end and started[0] < max_requests:
            q = questions[started[0] % len(questions)]
            started[0] += 1
            t0 = time.perf_counter()
            try:
                status, failed = await client.ask(q)
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                await client.close()
                continue
            latencies.append(time.perf_counter() - t0)
            statuses[status] = statuses.get(status, 0) + 1
            if failed:
                errors.append(f"HTTP {status}" + (" (a question's result is an error)" if status == 200 else ""))
        await client.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(clients)))
    wall = time.perf_counter() - t0
    return {"requests": len(latencies), "wall_s": round(wall, 2), "requests_per_s": round(len(latencies) / wall, 1),
            "latency_ms": {k: round(1000 * percentile(latencies, q), 1) for k, q in (("p50", 50), ("p95", 95),
                                                                                     ("p99", 99))}
            | {"max": round(1000 * max(latencies), 1)},
            "statuses": {str(k): v for k, v in sorted(statuses.items())}, "errors": len(errors),
            "error_examples": errors[:5]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default="runs/metaqa/index", help="sparse index (default: %(default)s)")
    ap.add_argument("--model", default="runs/metaqa/train-drkit-2hop", help="2-hop model run (default: %(default)s)")
    ap.add_argument("--questions", default="../shared/data/metaqa/2-hop/vanilla/qa_dev.txt",
                    help="MetaQA-format questions (default: %(default)s)")
    ap.add_argument("--n-questions", type=int, default=4000, help="first N lines used (default: %(default)s)")
    ap.add_argument("--clients", type=int, default=50, help="concurrent clients (default: %(default)s)")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load (default: %(default)s)")
    ap.add_argument("--max-requests", type=int, default=200_000, help="at most this many requests (default: %(default)s)")
    ap.add_argument("--lone", type=int, default=200, help="questions sent one at a time for the lone latency "
                    "(default: %(default)s)")
    ap.add_argument("--serve-args", default="", help="extra flags for drkit serve, e.g. '--max-wait-ms 10'")
    ap.add_argument("--out", default="benchmarks/results", help="output folder (default: %(default)s)")
    args = ap.parse_args()
    for path in (args.index, args.model, args.questions):
        if not Path(path).exists():
            sys.exit(f"bench_serve: {path} does not exist (build the MetaQA 2-hop model first: make metaqa, or "
                     "drkit reproduce-metaqa --hops 2)")

    questions = read_questions(Path(args.questions), args.n_questions)
    print(f"batch-64 path on {len(questions)} questions ...", flush=True)
    direct = batch_path(args.index, args.model, questions, 64, args.lone)
    answerable = direct.pop("_answerable")
    print(json.dumps(direct), flush=True)

    port = free_port()
    cmd = [sys.executable, "-m", "drkit", "serve", "--index", args.index, "--model", args.model, "--port", str(port),
           *args.serve_args.split()]
    server = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONUNBUFFERED="1"))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None:
                sys.exit(f"bench_serve: drkit serve exited: {server.stderr.read()}")
            try:
                if get_json(f"{url}/readyz")["status"] == "ready":
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit("bench_serve: drkit serve was not ready after 300 s")
            time.sleep(0.2)
        print(f"server ready on {url}; a lone client ...", flush=True)
        lone = asyncio.run(load("127.0.0.1", port, answerable, 1, 3600, args.lone))
        print(json.dumps(lone), flush=True)
        before = get_json(f"{url}/readyz")
        print(f"{args.clients} clients for {args.duration:g} s ...", flush=True)
        loaded = asyncio.run(load("127.0.0.1", port, answerable, args.clients, args.duration, args.max_requests))
        after = get_json(f"{url}/readyz")
        batches, asked = after["batches"] - before["batches"], after["questions"] - before["questions"]
        loaded["mean_batch"] = round(asked / max(batches, 1), 1)
        print(json.dumps(loaded), flush=True)
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=120)
        exit_status = server.returncode
    finally:
        if server.poll() is None:
            server.kill()

    ratio = loaded["requests_per_s"] / direct["qps_batch64"]
    targets = {"zero_errors": loaded["errors"] == 0, "ratio_at_least_0.70": ratio >= 0.70,
               "p99_under_1s": loaded["latency_ms"]["p99"] < 1000, "clean_exit": exit_status == 0}
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
              "parameters": vars(args), "server_command": " ".join(cmd[1:]),
              "batch64_path": direct, "server_lone": lone, "server_load": loaded,
              "ratio_load_to_batch64": round(ratio, 3), "server_exit_status": exit_status, "targets": targets}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_serve.json").write_text(json.dumps(result, indent=2) + "\n")
    d, ld = direct, loaded["latency_ms"]
    table = "\n".join([
        f"drkit serve under load: {args.clients} clients, {args.duration:g} s, {len(answerable):,} questions of "
        f"{args.questions}, model {args.model} (2 CPU cores; server and clients on one machine)", "",
        "| | questions/s | p50 ms | p95 ms | p99 ms | errors |", "|---|---|---|---|---|---|",
        f"| server, {args.clients} concurrent clients (mean batch {loaded['mean_batch']}) | {loaded['requests_per_s']} | "
        f"{ld['p50']} | {ld['p95']} | {ld['p99']} | {loaded['errors']} of {loaded['requests']:,} |",
        f"| front door in-process, batch 64 | {d['qps_batch64']} | | | | |",
        f"| server, one client at a time | {lone['requests_per_s']} | {lone['latency_ms']['p50']} | "
        f"{lone['latency_ms']['p95']} | {lone['latency_ms']['p99']} | {lone['errors']} of {lone['requests']} |",
        f"| front door in-process, batch 1 | | {d['batch1_latency_ms']['p50']} | | {d['batch1_latency_ms']['p99']} | |",
        "", f"Under load / batch 64: **{ratio:.2f}** (target 0.70). Server exit status after SIGTERM: {exit_status}.",
        "Targets: " + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in targets.items()) + "."])
    (out / "bench_serve.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
