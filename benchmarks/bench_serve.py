"""Load, overload and fault benchmark of ``drkit serve``: a real server on 127.0.0.1 under concurrent clients,
against the same questions through the batch-64 front door, side by side in one run. Either model kind: a
multi-hop model (MetaQA-style questions, one per line, tab-separated answers) or a hop-mixing model (plain
questions, JSONL lines with "question").

1. **Batch-64 path**: `DrKIT.answer_batch` in this process, 64 questions at a time, with the settings a request
   gets by default (5 answers, and for a hop-mixing model 5 passages; the chain's top 3 entities per hop);
   questions/s. Then batch 1 for a lone question's latency. The model is then freed.
2. **Server**: ``python -m drkit serve`` in a subprocess, over a copy of the index and mention index (so that the
   update phase can add to it), with ``--expose-paths`` (for the model process's id) and `--serve-args`.
   Phases, each with its own clients (keep-alive connections, one question per request; a client that gets
   503 waits the Retry-After it is given, as a polite client does):

   * ``lone``: one client, `--lone` questions one after another;
   * ``load``: `--clients` clients (default 50) for `--duration` s;
   * ``overload``: `--overload-clients` clients (default 400, more than the queue holds) for `--duration` s:
     accepted throughput, the share of 503s;
   * ``update``: `--clients` clients; a third of the way in, ``drkit add`` adds one new article to the served
     index: the time until the server names the new version, and whether any request failed;
   * ``kill``: `--clients` clients; a third of the way in, the model process is killed (SIGKILL): the time until
     ``/readyz`` is green again (no person restarting anything) and the requests refused meanwhile.

   An **error** is any response other than 200, 413, 422 and 503, a connection failure, or a 200 whose
   question's result is an error (503s are counted on their own).
3. The server is stopped with SIGTERM: it must exit with status 0 within its drain time (``--drain-s``, 10 s).

Writes OUT/bench_serve.json (machine, parameters, every figure) and OUT/bench_serve.md. Targets (issue 27): 0
errors in every phase; the model process back within 60 s; the update visible with no request failed; load at
>= 70% of the batch-64 questions/s with p99 < 1 s; SIGTERM exits within the drain time.

    .venv/bin/python benchmarks/bench_serve.py --index runs/sample-index --model runs/sample-model-2hop \\
        --questions data/sample/2-hop/qa_dev.txt --out benchmarks/results/serve-sample
    .venv/bin/python benchmarks/bench_serve.py --index runs/2wiki-f0/index --model runs/2wiki-f0/train-drkit \\
        --mentions runs/2wiki-f0/mentions-kb_qa --questions runs/2wiki-f0/split/dev.jsonl --out benchmarks/results/serve-2wiki
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ACCEPTED = {200, 413, 422, 503}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of `values` (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered) + 0.5)) - 1))]


def read_questions(path: Path, limit: int) -> list[str]:
    """Questions of a MetaQA-format file (question TAB answers) or a JSONL file ({"question": ...} per line)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            out.append(json.loads(line)["question"] if path.suffix == ".jsonl" else line.split("\t")[0].strip())
            if len(out) == limit:
                break
    return out


def batch_path(index: str, model: str, mentions: str | None, questions: list[str], batch: int, lone: int) -> dict:
    """Questions/s of the front door at `batch` and a lone question's latency (batch 1), in this process, with the
    settings the server uses by default."""
    from drkit.errors import QuestionError
    from drkit.qa.pipeline import HOP_MIXING, DrKIT

    kit = DrKIT.load(index, model, mentions)
    mixing = kit.kind == HOP_MIXING
    inputs, answerable = [], []  # a question naming no entity of the index is left out of both paths
    for q in questions:
        try:
            inputs.append(q if mixing else kit.parse(q))
            answerable.append(q)
        except QuestionError:
            pass
    settings = {"top": 5, "chain_top": 3, "passages": 5 if mixing else 0}
    kit.answer_batch(inputs[:batch], **settings)  # warm-up
    t0 = time.perf_counter()
    for i in range(0, len(inputs), batch):
        kit.answer_batch(inputs[i:i + batch], **settings)
    elapsed = time.perf_counter() - t0
    latencies = []
    for p in inputs[:lone]:
        s = time.perf_counter()
        kit.answer_batch([p], **settings)
        latencies.append(time.perf_counter() - s)
    kind, mentions_path = kit.kind, str(kit.vkb.mentions.path)
    del kit
    gc.collect()
    return {"kind": kind, "questions": len(inputs), "unanswerable": len(questions) - len(inputs),
            f"qps_batch{batch}": round(len(inputs) / elapsed, 1), "seconds": round(elapsed, 2),
            "batch1_latency_ms": {"p50": round(1000 * statistics.median(latencies), 2),
                                  "p99": round(1000 * percentile(latencies, 99), 2), "n": len(latencies)},
            "_answerable": answerable, "_mentions": mentions_path}


class Client:
    """One keep-alive HTTP/1.1 connection sending POST /v1/ask; cheap enough that hundreds of them in one
    process leave the cores to the server."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None
        self.stale = 0

    async def ask(self, question: str) -> tuple[int, bool, float]:
        """(HTTP status, whether a 200's question result is an error, the Retry-After given). A kept-alive
        connection that the server closed while it was idle (uvicorn closes them after 5 s, e.g. while the
        client waits out a Retry-After) is opened again and the request sent again, as HTTP clients do; such a
        request had not reached the server (`stale` counts them)."""
        body = json.dumps({"question": question}).encode()
        request = (b"POST /v1/ask HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n%s" % (self.host.encode(), len(body), body))
        reused = self.writer is not None
        if not reused:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        try:
            self.writer.write(request)
            line = await self.reader.readline()
        except ConnectionResetError:
            if not reused:
                raise
            line = b""
        if not line and reused:  # closed while idle, before this request: open a new one
            self.stale += 1
            await self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            self.writer.write(request)
            line = await self.reader.readline()
        status = int(line.split()[1])
        length, retry_after, close = 0, 0.0, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"retry-after":
                retry_after = float(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        payload = await self.reader.readexactly(length)
        if close:
            await self.close()
        failed = status == 200 and any("error" in r for r in json.loads(payload)["results"])
        return status, failed, retry_after

    async def close(self):
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None


async def load(host: str, port: int, questions: list[str], clients: int, duration: float, max_requests: int,
               event=None) -> dict:
    """`clients` clients for `duration` s (at most `max_requests` started); `event(elapsed_fraction)`: an async
    callable run beside them (the update or the kill), whose result is returned under "event"."""
    latencies, statuses, errors, refused_at, stale = [], {}, [], [], []
    started = [0]
    t_start = time.perf_counter()
    end = t_start + duration

    async def one():
        client = Client(host, port)
        while time.perf_counter() < end and started[0] < max_requests:
            q = questions[started[0] % len(questions)]
            started[0] += 1
            t0 = time.perf_counter()
            try:
                status, failed, retry_after = await client.ask(q)
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError, KeyError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                await client.close()
                continue
            statuses[status] = statuses.get(status, 0) + 1
            if status == 200:
                latencies.append(time.perf_counter() - t0)
            if status not in ACCEPTED or failed:
                errors.append(f"HTTP {status}" + (" (a question's result is an error)" if failed else ""))
            if status == 503:
                refused_at.append(time.perf_counter() - t_start)
                await asyncio.sleep(min(retry_after or 1.0, max(0.0, end - time.perf_counter())))
        stale.append(client.stale)
        await client.close()

    tasks = [one() for _ in range(clients)]
    extra = {}
    if event is not None:
        async def run_event():
            extra["event"] = await event(t_start, duration)
        tasks.append(run_event())
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t_start
    answered = statuses.get(200, 0)
    total = sum(statuses.values())
    return {"clients": clients, "requests": total, "answered": answered, "wall_s": round(wall, 2),
            "answered_per_s": round(answered / wall, 1),
            "latency_ms_of_200": {k: round(1000 * percentile(latencies, q), 1)
                                  for k, q in (("p50", 50), ("p95", 95), ("p99", 99))}
            | {"max": round(1000 * max(latencies, default=0), 1)},
            "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "share_503": round(statuses.get(503, 0) / max(total, 1), 3),
            "refused_between_s": [round(min(refused_at), 2), round(max(refused_at), 2)] if refused_at else None,
            "errors": len(errors), "error_examples": errors[:5], "stale_connections_reopened": sum(stale), **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def readyz(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}
    except OSError:
        return 0, {}


def new_article(index: Path) -> tuple[str, str]:
    """(file name, text) of one article for ``drkit add``, in the index's corpus format."""
    manifest = json.loads((index / "manifest.json").read_text())
    title = "Zorblax Returns"
    text = f"{title} is a 1981 film directed by Irwin Allen. It was written by Irwin Allen."
    if manifest["config"].get("corpus_format") == "jsonl":
        return "added.jsonl", json.dumps({"id": "bench-added-1", "title": title, "text": text}) + "\n"
    return "added.txt", f"1 {title}\n2 {text}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default="runs/sample-index", help="sparse index (default: %(default)s)")
    ap.add_argument("--model", default="runs/sample-model-2hop", help="a trained model (default: %(default)s)")
    ap.add_argument("--mentions", default=None, help="mention index (default: the one the model was trained with)")
    ap.add_argument("--questions", default="data/sample/2-hop/qa_dev.txt",
                    help="MetaQA-format or JSONL questions (default: %(default)s)")
    ap.add_argument("--n-questions", type=int, default=4000, help="first N lines used (default: %(default)s)")
    ap.add_argument("--clients", type=int, default=50, help="concurrent clients of load, update and kill "
                    "(default: %(default)s)")
    ap.add_argument("--overload-clients", type=int, default=400, help="concurrent clients of overload, more than "
                    "the queue holds (default: %(default)s)")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of each phase (default: %(default)s)")
    ap.add_argument("--max-requests", type=int, default=200_000, help="at most this many requests a phase "
                    "(default: %(default)s)")
    ap.add_argument("--lone", type=int, default=200, help="questions sent one at a time for the lone latency "
                    "(default: %(default)s)")
    ap.add_argument("--phases", default="lone,load,overload,update,kill", help="phases to run (default: %(default)s)")
    ap.add_argument("--serve-args", default="", help="extra flags for drkit serve, e.g. '--max-wait-ms 10'")
    ap.add_argument("--out", default="benchmarks/results/serve", help="output folder (default: %(default)s)")
    args = ap.parse_args()
    for path in (args.index, args.model, args.questions):
        if not Path(path).exists():
            sys.exit(f"bench_serve: {path} does not exist (make demo builds runs/sample-index and "
                     "runs/sample-model-2hop)")
    phases = args.phases.split(",")

    questions = read_questions(Path(args.questions), args.n_questions)
    print(f"batch-64 path on {len(questions)} questions ...", flush=True)
    direct = batch_path(args.index, args.model, args.mentions, questions, 64, args.lone)
    answerable, mentions = direct.pop("_answerable"), direct.pop("_mentions")  # the mention index loaded
    print(json.dumps(direct), flush=True)

    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    shutil.copytree(args.index, work / "index")
    shutil.copytree(mentions, work / "mentions")
    for leftover in ("segments", "CURRENT"):  # served as built, whatever was added to the original
        target = work / "index" / leftover
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    gc.collect()

    port = free_port()
    cmd = [sys.executable, "-m", "drkit", "serve", "--index", str(work / "index"), "--model", args.model,
           "--mentions", str(work / "mentions"), "--port", str(port), "--expose-paths", "--no-access-log",
           *args.serve_args.split()]
    server = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONUNBUFFERED="1", DRKIT_PROGRESS="0"))
    url = f"http://127.0.0.1:{port}"
    results: dict = {}
    try:
        t0 = time.monotonic()
        while readyz(url)[0] != 200:
            if server.poll() is not None:
                sys.exit(f"bench_serve: drkit serve exited: {server.stderr.read()}")
            if time.monotonic() - t0 > 600:
                sys.exit("bench_serve: drkit serve was not ready after 600 s")
            time.sleep(0.2)
        results["start_to_ready_s"] = round(time.monotonic() - t0, 2)
        info = get_json(f"{url}/v1/info")
        limits = info["limits"]
        print(f"server ready on {url} in {results['start_to_ready_s']} s ({info['kind']} model, queue "
              f"{limits['max_queue']})", flush=True)

        def run(name: str, clients: int, event=None) -> None:
            if name not in phases:
                return
            print(f"{name}: {clients} clients for {args.duration:g} s ...", flush=True)
            before = readyz(url)[1]
            r = asyncio.run(load("127.0.0.1", port, answerable, clients,
                                 3600 if name == "lone" else args.duration,
                                 args.lone if name == "lone" else args.max_requests, event))
            after = readyz(url)[1]
            if before and after:
                r["mean_batch"] = round((after["questions"] - before["questions"]) /
                                        max(after["batches"] - before["batches"], 1), 1)
            results[name] = r
            print(json.dumps(r), flush=True)

        async def add_event(t_start: float, duration: float) -> dict:
            await asyncio.sleep(duration / 3)
            name, text = new_article(work / "index")
            (work / name).write_text(text, encoding="utf-8")
            version = (await asyncio.to_thread(readyz, url))[1].get("index_version")
            t = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "drkit", "add", "--index", str(work / "index"), "--corpus", str(work / name),
                "--mentions", str(work / "mentions"), "--entities", str(work / "names.txt"), cwd=ROOT,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env=dict(os.environ, DRKIT_PROGRESS="0"))
            out, err = await proc.communicate()
            added = time.perf_counter()
            while (await asyncio.to_thread(readyz, url))[1].get("index_version") == version:
                if time.perf_counter() - added > 120:
                    return {"add_status": proc.returncode, "error": "the new version was not served within 120 s"}
                await asyncio.sleep(0.05)
            served = time.perf_counter()
            return {"add_status": proc.returncode, "add_s": round(added - t, 2),
                    "add_to_served_s": round(served - added, 2), "at_s": round(t - t_start, 2),
                    "version": (await asyncio.to_thread(readyz, url))[1].get("index_version"),
                    "add_stderr_tail": err.decode()[-300:]}

        async def kill_event(t_start: float, duration: float) -> dict:
            await asyncio.sleep(duration / 3)
            pid = (await asyncio.to_thread(get_json, f"{url}/v1/info"))["model_process"]
            t = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.5)  # the supervisor notices within 0.2 s
            while (await asyncio.to_thread(readyz, url))[0] != 200:
                if time.perf_counter() - t > 300:
                    return {"killed_pid": pid, "error": "not ready again within 300 s"}
                await asyncio.sleep(0.05)
            return {"killed_pid": pid, "at_s": round(t - t_start, 2), "recovery_s": round(time.perf_counter() - t, 2),
                    "new_pid": (await asyncio.to_thread(get_json, f"{url}/v1/info"))["model_process"]}

        (work / "names.txt").write_text("Zorblax Returns\n", encoding="utf-8")
        run("lone", 1)
        run("load", args.clients)
        run("overload", args.overload_clients)
        run("update", args.clients, add_event)
        run("kill", args.clients, kill_event)
        results["metrics_after"] = {line.split(" ")[0]: float(line.split(" ")[1]) for line in
                                    urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode().splitlines()
                                    if line.startswith(("drkit_http_errors_total", "drkit_model_restarts_total",
                                                        "drkit_index_version", "drkit_queue_rejected_total"))}
        t = time.monotonic()
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=120)
        results["sigterm_to_exit_s"] = round(time.monotonic() - t, 2)
        results["exit_status"] = server.returncode
    finally:
        if server.poll() is None:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)

    drain = 10.0
    for i, a in enumerate(cmd):
        if a == "--drain-s":
            drain = float(cmd[i + 1])
    targets = {"zero_errors": all(results[p]["errors"] == 0 for p in phases if p in results),
               "sigterm_within_drain": results["exit_status"] == 0 and results["sigterm_to_exit_s"] <= drain + 1}
    if "load" in results:
        ratio = results["load"]["answered_per_s"] / direct["qps_batch64"]
        results["ratio_load_to_batch64"] = round(ratio, 3)
        targets |= {"ratio_at_least_0.70": ratio >= 0.70,
                    "p99_under_1s": results["load"]["latency_ms_of_200"]["p99"] < 1000}
    if "update" in results:
        ev = results["update"].get("event", {})
        targets["update_served_no_failure"] = ev.get("add_status") == 0 and "add_to_served_s" in ev and \
            results["update"]["errors"] == 0
    if "kill" in results:
        targets["recovered_within_60s"] = results["kill"].get("event", {}).get("recovery_s", 1e9) <= 60
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
              "parameters": vars(args), "server_command": " ".join(cmd[1:]), "batch64_path": direct, **results,
              "targets": targets}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_serve.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "bench_serve.md").write_text(table(args, direct, results, targets, len(answerable)) + "\n")
    print((out / "bench_serve.md").read_text())


def table(args, direct: dict, results: dict, targets: dict, n_questions: int) -> str:
    rows = [f"drkit serve ({direct['kind']} model {args.model}) on {n_questions:,} questions of {args.questions}; "
            f"each phase {args.duration:g} s; server and clients on one machine ({os.cpu_count()} CPUs)", "",
            "| phase | clients | answered/s | p50 ms | p95 ms | p99 ms | 503 share | errors | mean batch |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in ("lone", "load", "overload", "update", "kill"):
        r = results.get(name)
        if r is None:
            continue
        lat = r["latency_ms_of_200"]
        rows.append(f"| {name} | {r['clients']} | {r['answered_per_s']} | {lat['p50']} | {lat['p95']} | {lat['p99']} | "
                    f"{r['share_503']:.3f} | {r['errors']} of {r['requests']:,} | {r.get('mean_batch', '')} |")
    rows.append(f"| front door in-process, batch 64 | | {direct['qps_batch64']} | | | | | | |")
    rows.append(f"| front door in-process, batch 1 | | | {direct['batch1_latency_ms']['p50']} | | "
                f"{direct['batch1_latency_ms']['p99']} | | | |")
    rows.append("")
    if "ratio_load_to_batch64" in results:
        rows.append(f"Load / batch 64: **{results['ratio_load_to_batch64']:.2f}** (target 0.70).")
    if "update" in results and "event" in results["update"]:
        ev = results["update"]["event"]
        rows.append(f"Update: drkit add took {ev.get('add_s')} s; the new version (v{ev.get('version')}) was served "
                    f"{ev.get('add_to_served_s')} s after it finished. {ev.get('error', '')}")
    if "kill" in results and "event" in results["kill"]:
        ev = results["kill"]["event"]
        rows.append(f"Kill: the model process (pid {ev.get('killed_pid')}) was killed at {ev.get('at_s')} s; ready "
                    f"again after **{ev.get('recovery_s')} s** (target 60), refused with 503 between "
                    f"{results['kill']['refused_between_s']} s. {ev.get('error', '')}")
    rows.append(f"Start to ready: {results['start_to_ready_s']} s. SIGTERM to exit: {results['sigterm_to_exit_s']} s, "
                f"status {results['exit_status']}.")
    rows.append("Targets: " + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in targets.items()) + ".")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
