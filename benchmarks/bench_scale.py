"""How drkit's costs grow with the corpus: a seeded synthetic title-entity corpus at several sizes.

    .venv/bin/python benchmarks/bench_scale.py                       # 10^5 and 10^6 entities
    .venv/bin/python benchmarks/bench_scale.py --sizes 20000 --questions 64   # a quick look

For each size N (entities), in a work folder (default runs/scale/N):

1. **corpus**: N passages, one per title entity (the paper's HotpotQA setting), each with hyperlinks
   (JSONL ``links``) to other entities drawn with a Zipf-like skew (a few entities are linked from many
   pages, most from few), about 3.4 links a page, so that with the title mentions there are about 4.4
   mentions an entity: the paper's 22.8M mentions for 5.23M entities. The words are synthetic (names of
   two or three made-up words from a vocabulary of max(3000, N / 34) words, so that a name word is shared
   by a bounded number of names at every size, and none is a filler word; filler text from a Zipf
   vocabulary of 5,000 words).
2. **index**: the real ``drkit index --entities titles`` (links as mentions, TF-IDF, EP), in a process of
   its own: wall time, peak RSS, disk size.
3. **vectors**: synthetic mention vectors (p = 256, fp16, clustered by a topic per entity) written as a
   mention index; encoding 4.4 mentions an entity with MiniLM on 2 cores is left out (its cost is linear
   in mentions: `benchmarks/results/bench_dense.json` measures it).
4. **questions** (each mode in a process of its own): an untrained 2-hop model on the base MiniLM encoder
   answering questions that name an entity drawn by degree (its id given as Z_0), at batch 1 and 64, with restricted
   retrieval (the default: the mentions of the passages reached, scored exactly), global exact MIPS
   (bf16 in memory) and global IVF-PQ (codes in memory, the short list scored again from the memory-
   mapped fp16 vectors); the load time and peak RSS of each, and the recall@K of IVF-PQ against exact on
   the first hop's queries. Each batch size runs the same questions twice (100 at batch 1, all at 64): first
   with a cold page cache (the index's and vectors' file pages dropped with ``posix_fadvise(DONTNEED)``, all
   but those the process has mapped itself, such as what loading read), then warm. A served corpus larger
   than memory sits between the two.

Writes ``OUT/bench_scale.json`` and ``OUT/bench_scale.md`` and a plot of each cost against size
(``OUT/bench_scale.png``). The model is untrained: these are costs, not accuracies.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DIM = 256
LINKS_PER_PAGE = 3.4  # + 1 title mention a page: ~4.4 mentions an entity, as 22.8M / 5.23M in the paper


# -- 1. the synthetic corpus ------------------------------------------------------------------------------

def _words(n: int, rng: np.random.Generator, exclude: frozenset = frozenset()) -> list[str]:
    """`n` distinct made-up words of two to four syllables, none of them in `exclude`."""
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + [c + v + "n" for c in "bdgkmprst" for v in "aeiou"]
    out: set[str] = set()
    while len(out) < n:
        k = rng.integers(2, 5)
        word = "".join(rng.choice(syllables, k)).capitalize()
        if word not in exclude:
            out.add(word)
    return sorted(out)


def filler_vocabulary(seed: int = 0) -> list[str]:
    """The 5,000 words of the filler text (lower-cased in the corpus)."""
    return _words(5000, np.random.default_rng(seed + 2))


NAMES_PER_WORD = 34  # a name word is shared by about 2 x 34 names at every size, as real name words are


def name_vocabulary_size(n: int) -> int:
    """Words the names of `n` entities are made of: 3,000 up to 10^5 entities, then growing with n (a fixed
    vocabulary would make every name word's document frequency, and so the TF-IDF top-mu step, grow with n)."""
    return max(3000, n // NAMES_PER_WORD)


def entity_names(n: int, seed: int = 0) -> list[str]:
    """`n` distinct names: two made-up words (three past what two can name), in a seeded order, each word in
    about 2n / (vocabulary size) names (no word shared by a large share of the names)."""
    rng = np.random.default_rng(seed)
    # no name word is a filler word: a name made of a word in most passages would score every passage
    vocab = _words(name_vocabulary_size(n), rng, exclude=frozenset(filler_vocabulary(seed)))
    v = len(vocab)
    perm = rng.permutation(n)
    names = []
    space = v * v if n <= v * v else v ** 3
    step = _coprime_step(space)  # i -> i * step mod space: distinct codes, spread over every word position
    for i in perm.tolist():
        j = i * step % space
        if n <= v * v:
            names.append(f"{vocab[j // v]} {vocab[j % v]}")
        else:
            names.append(f"{vocab[j // (v * v)]} {vocab[j // v % v]} {vocab[j % v]}")
    return names


def _coprime_step(space: int) -> int:
    """A step coprime to `space` near 0.618 of it (so consecutive codes land far apart)."""
    step = int(space * 0.6180339887) | 1
    while math.gcd(step, space) != 1:
        step += 2
    return step


def write_corpus(path: Path, n: int, seed: int = 0, filler_words: int = 40) -> dict:
    """Write the JSONL corpus of `n` title entities; returns its counts."""
    rng = np.random.default_rng(seed + 1)
    names = entity_names(n, seed)
    filler = filler_vocabulary(seed)
    filler_p = 1.0 / np.arange(1, len(filler) + 1) ** 1.1
    filler_p /= filler_p.sum()
    popularity = 1.0 / np.arange(1, n + 1) ** 0.8  # Zipf-like in-degree: entity e is the e-th most linked
    popularity /= popularity.sum()
    cdf = np.cumsum(popularity)
    links = 0
    with open(path, "w", encoding="utf-8") as f:
        block = 10000
        for lo in range(0, n, block):
            hi = min(n, lo + block)
            n_links = rng.poisson(LINKS_PER_PAGE, hi - lo)
            targets = np.searchsorted(cdf, rng.random(int(n_links.sum())) * cdf[-1])
            words = rng.choice(len(filler), (hi - lo, filler_words), p=filler_p)
            at = 0
            for j, e in enumerate(range(lo, hi)):
                parts, spans, pos = [], [], 0
                chunk = filler_words // (n_links[j] + 1)
                own = targets[at : at + n_links[j]]
                at += n_links[j]
                for k in range(n_links[j] + 1):
                    text = " ".join(filler[w] for w in words[j, k * chunk : (k + 1) * chunk]).lower()
                    parts.append(text + " ")
                    pos += len(text) + 1
                    if k < n_links[j]:
                        t = int(own[k]) if own[k] != e else (e + 1) % n
                        spans.append({"start": pos, "end": pos + len(names[t]), "title": names[t]})
                        parts.append(names[t] + " ")
                        pos += len(names[t]) + 1
                links += len(spans)
                f.write(json.dumps({"id": f"p{e}", "title": names[e], "text": "".join(parts).rstrip(),
                                    "links": spans}) + "\n")
    return {"entities": n, "passages": n, "links": links}


# -- running a step in a process of its own ---------------------------------------------------------------

def run_step(code: str, *args: str, root: Path = ROOT) -> dict:
    """Run `code` (a function body that ends by returning a dict) in a fresh Python, importing drkit from
    `root`; its dict plus wall time and peak RSS (the process's own, from getrusage). `code` may call ``rss_split()``:
    the RSS now, split into the process's own memory and mapped file pages (the memory-mapped arrays it has
    read: page cache, which the kernel can drop and read again)."""
    script = (
        "import json, resource, sys, time\n"
        f"sys.path.insert(0, {str(root)!r})\n"
        "import drkit\n"
        f"assert drkit.__file__.startswith({str(root)!r}), drkit.__file__\n"
        "def rss_split():\n"
        "    status = dict(x.split(':', 1) for x in open('/proc/self/status') if x.startswith('Rss'))\n"
        "    return {'rss_own_mb': round(int(status['RssAnon'].split()[0]) / 1024, 1),\n"
        "            'rss_mapped_files_mb': round(int(status['RssFile'].split()[0]) / 1024, 1)}\n"
        "def step(args):\n" + "".join("    " + line + "\n" for line in code.strip().splitlines()) +
        "t = time.perf_counter()\n"
        "out = step(sys.argv[1:])\n"
        "out['wall_s'] = round(time.perf_counter() - t, 2)\n"
        "out['peak_rss_mb'] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)\n"
        "print('RESULT ' + json.dumps(out))\n")
    env = {**os.environ, "DRKIT_PROGRESS": "0"}
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"step failed (exit status {proc.returncode}):\n{proc.stderr[-3000:]}")
    line = lines[-1]
    return json.loads(line[len("RESULT "):])


BUILD = """
from drkit.index.build import build_index
idx = build_index(args[0], args[1], entities="titles", overwrite=True, log=lambda *a: None)
return {"entities": idx.n_entities, "passages": idx.n_passages, "mentions": idx.n_mentions,
        "ep_entries": int(len(idx.entity_passage))}
"""

VECTORS = """
import numpy as np
from drkit.dense.mentions import FORMAT, FORMAT_VERSION, index_identity
from drkit.index.sparse import SparseIndex
from drkit.util.artifact import ArtifactWriter
index = SparseIndex.load(args[0])
rng = np.random.default_rng(int(args[2]))
dim, topics = int(args[3]), 4096
centers = rng.standard_normal((topics, dim)).astype(np.float32)
centers /= np.linalg.norm(centers, axis=1, keepdims=True)
topic = rng.integers(0, topics, index.n_entities)
entity = np.asarray(index.mention_entity)
with ArtifactWriter(args[1], FORMAT, FORMAT_VERSION, overwrite=True) as w:
    out = w.open_array("mention_vectors", (index.n_mentions, dim), np.float16, note="synthetic")
    for lo in range(0, index.n_mentions, 1 << 18):
        e = entity[lo : lo + (1 << 18)]
        noise = rng.standard_normal((len(e), dim)).astype(np.float32) * 0.05
        out[lo : lo + len(e)] = (centers[topic[e]] * 0.8 + noise).astype(np.float16)
    out.flush()
    w.manifest.update(config={}, encoder={"path": "synthetic", "sha256": "synthetic"}, index=index_identity(index),
                      dim=dim, mentions=index.n_mentions, embedding={"synthetic": True}, warnings={})
return {"mentions": index.n_mentions}
"""

QUERY = """
import numpy as np, torch
torch.set_num_threads(2)
from drkit.dense.encoder import DualEncoder
from drkit.dense.mips import ExactMIPS, recall_at_k
from drkit.reason.follow import FollowConfig
from drkit.reason.model import ModelConfig, MultiHopModel
from drkit.reason.vkb import VirtualKB
from drkit.util.pages import drop_from_page_cache
index_dir, mentions_dir, encoder_dir, mode, n_q, nprobe, nlist, rerank = args[0], args[1], args[2], args[3], \
    int(args[4]), int(args[5]), int(args[6]), int(args[7])
t = time.perf_counter()
vkb = VirtualKB.load(index_dir, mentions_dir, "exact") if mode != "ivfpq" else \
    VirtualKB.load(index_dir, mentions_dir, "ivfpq", nprobe=nprobe, nlist=nlist, rerank=rerank)
model = MultiHopModel.from_encoder(DualEncoder.load(encoder_dir), ModelConfig(hops=2)).eval()
model.set_entities(vkb.entity_names)
fc = FollowConfig(retrieval="restricted" if mode == "restricted" else "global", top_k=1000)
out = {"mode": mode}
if mode != "restricted":
    ts = time.perf_counter()
    vkb.searcher  # built (exact: the bf16 copy; ivfpq: k-means and codes)
    out["searcher_build_s"] = round(time.perf_counter() - ts, 2)
out["load_s"] = round(time.perf_counter() - t, 2)
rng = np.random.default_rng(7)
degree = np.bincount(np.asarray(vkb.index.mention_entity), minlength=vkb.index.n_entities)
topics = rng.choice(len(degree), n_q, p=degree / degree.sum())
names = vkb.entity_names
texts = [f"which entities are linked from the page of {names[e]}" for e in topics]
def run(lo, hi):
    with torch.no_grad():
        model(texts[lo:hi], topics[lo:hi], vkb, follow_config=fc)
run(0, 2)  # warm-up
for batch in (1, 64):  # the same questions with a cold page cache, then warm
    n = min(n_q, 100) if batch == 1 else n_q
    drop_from_page_cache(index_dir, mentions_dir)  # but for the pages this process has mapped
    for key in (f"qps_batch{batch}_cold", f"qps_batch{batch}"):
        t = time.perf_counter()
        for lo in range(0, n, batch):
            run(lo, min(n, lo + batch))
        out[key] = round(n / (time.perf_counter() - t), 2)
out.update(rss_split())  # after every question: what they left resident
if mode == "ivfpq":
    with torch.no_grad():
        q = model.hop_queries(model.encode(texts[:64], True), 0,
                              __import__("drkit.reason.entity_set", fromlist=["EntitySet"]).EntitySet.one_hot(topics[:64]))
    q = q.float().numpy()
    exact = ExactMIPS(vkb.mentions.vectors, block_size=1 << 20)
    out["recall_at_1000"] = round(recall_at_k(vkb.searcher, exact, q, 1000), 4)
    out["ivfpq_codes_mb"] = round(vkb.searcher.memory_bytes / 2**20, 1)
return out
"""


def disk_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 2**20, 1)


def make_encoder(work: Path, index_dir: Path) -> Path:
    enc = work / "encoder-base"
    if not (enc / "encoder" / "model.safetensors").exists():
        from drkit.dense.pretrain import PretrainConfig, pretrain

        pretrain(index_dir, None, enc, PretrainConfig(steps=0), log=lambda *a: None)
    return enc / "encoder"


@dataclass(frozen=True)
class Settings:
    """What every size is run with (the command line's)."""

    work: Path  # where corpora and indexes are built
    questions: int  # questions a mode
    seed: int
    modes: tuple[str, ...]
    nprobe: int  # IVF-PQ
    nlist: int
    rerank: int


def bench_size(n: int, s: Settings, log, root: Path = ROOT, tag: str = "", reuse: bool = False) -> dict:
    """Corpus, index, vectors and question throughput at `n` entities, with the drkit found at `root`
    (the corpus and the vectors are always made by this checkout's code, so both codes see the same).
    `reuse`: where an earlier run with --keep left this size's corpus, index and vectors (``built.json``),
    time only the questions, and report the build figures of that run (marked with its commit)."""
    d = s.work / f"{n}{tag}"
    d.mkdir(parents=True, exist_ok=True)
    built = d / "built.json"
    if reuse and built.exists() and (d / "index").is_dir() and (d / "mentions").is_dir():
        row = json.loads(built.read_text())
        log(f"[{n:,}{tag}] reusing the corpus, index and vectors built at {row['built_at_commit'][:7]}")
        return time_questions(row, d, s, log, root, tag)
    row: dict = {"entities": n, "code": tag.lstrip("-") or "this checkout"}
    t = time.perf_counter()
    row["corpus"] = write_corpus(d / "corpus.jsonl", n, s.seed)
    row["corpus"]["write_s"] = round(time.perf_counter() - t, 2)
    row["corpus"]["mb"] = round((d / "corpus.jsonl").stat().st_size / 2**20, 1)
    log(f"[{n:,}{tag}] corpus: {row['corpus']}")
    row["index"] = run_step(BUILD, str(d / "corpus.jsonl"), str(d / "index"), root=root)
    row["index"]["disk_mb"] = disk_mb(d / "index")
    log(f"[{n:,}{tag}] index: {row['index']}")
    row["vectors"] = run_step(VECTORS, str(d / "index"), str(d / "mentions"), str(s.seed), str(DIM))
    row["vectors"]["disk_mb"] = disk_mb(d / "mentions")
    log(f"[{n:,}{tag}] vectors: {row['vectors']}")
    row["built_at_commit"] = git_head(root)
    built.write_text(json.dumps(row, indent=2) + "\n")
    return time_questions(row, d, s, log, root, tag)


def time_questions(row: dict, d: Path, s: Settings, log, root: Path, tag: str) -> dict:
    """Each mode's load time, questions/s and peak RSS on the index and vectors in `d` (one process each)."""
    n = row["entities"]
    enc = make_encoder(s.work, d / "index")
    row["questions"] = {}
    for mode in s.modes:
        row["questions"][mode] = run_step(QUERY, str(d / "index"), str(d / "mentions"), str(enc), mode,
                                          str(s.questions), str(s.nprobe), str(s.nlist), str(s.rerank), root=root)
        log(f"[{n:,}{tag}] {mode}: {row['questions'][mode]}")
    return row


def git_head(path: Path) -> str:
    """The commit checked out at `path`."""
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def baseline_checkout(ref: str, work: Path) -> Path:
    """A worktree of this repository at `ref` (the code to compare with), made once."""
    path = (work / f"baseline-{ref.replace('/', '_')}").resolve()
    if not (path / "drkit" / "__init__.py").exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--force", "--detach", str(path), ref], check=True,
                       capture_output=True)
    return path


def markdown(result: dict) -> list[str]:
    lines = [f"drkit at growing corpus sizes (synthetic title-entity corpus, seed {result['parameters']['seed']}; "
             f"{result['machine']['cpus']} CPU cores; an untrained 2-hop model: costs, not accuracy)", "",
             "| code | entities | mentions | build s | build peak RSS MB | index disk MB | vectors disk MB "
             "| mode | load s | peak RSS MB | RSS MB after the questions: own / mapped files | q/s b1 cold / warm | q/s b64 cold / warm | IVF-PQ recall@1000 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["sizes"] + result.get("baseline", []):
        for mode, q in row["questions"].items():
            code = row["code"] + (f" (run at {row['from_run'][:7]})" if "from_run" in row else "")
            if row.get("built_at_commit", result["parameters"]["commit"]) != result["parameters"]["commit"]:
                code += f" (build at {row['built_at_commit'][:7]})"
            lines.append(f"| {code} | {row['entities']:,} | {row['index']['mentions']:,} | {row['index']['wall_s']} | "
                         f"{row['index']['peak_rss_mb']:,} | {row['index']['disk_mb']:,} | {row['vectors']['disk_mb']:,} "
                         f"| {mode} | {q['load_s']} | {q['peak_rss_mb']:,} | {q.get('rss_own_mb', '?')} / "
                         f"{q.get('rss_mapped_files_mb', '?')} | {q.get('qps_batch1_cold', '-')} / {q['qps_batch1']} | "
                         f"{q.get('qps_batch64_cold', '-')} / {q['qps_batch64']} | "
                         f"{q.get('recall_at_1000', '')} |")
    return lines


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["sizes"]
    sizes = [r["entities"] for r in rows]
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    axes[0].plot(sizes, [r["index"]["wall_s"] for r in rows], "o-", label="index build")
    axes[0].set_ylabel("seconds")
    axes[1].plot(sizes, [r["index"]["peak_rss_mb"] for r in rows], "o-", label="index build")
    for i, mode in enumerate(rows[0]["questions"]):
        color = f"C{i + 1}"
        axes[1].plot(sizes, [r["questions"][mode]["peak_rss_mb"] for r in rows], "o-", color=color,
                     label=f"questions, {mode}")
        for ax, batch in zip(axes[2:], (1, 64)):
            ax.plot(sizes, [r["questions"][mode][f"qps_batch{batch}"] for r in rows], "o-", color=color,
                    label=f"{mode}, warm")
            cold = [(n, r["questions"][mode][f"qps_batch{batch}_cold"]) for n, r in zip(sizes, rows)
                    if f"qps_batch{batch}_cold" in r["questions"][mode]]
            if cold:
                ax.plot(*zip(*cold), "^:", color=color, label=f"{mode}, cold page cache")
    axes[1].set_ylabel("peak RSS (MB)")
    for ax in axes[2:]:
        ax.set_ylabel("questions / s")
        ax.set_yscale("log")
    for ax, title in zip(axes, ("build time", "memory", "questions at batch 1", "questions at batch 64")):
        ax.set_xscale("log")
        ax.set_xlabel("entities")
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="entities of each corpus")
    p.add_argument("--questions", type=int, default=256, help="questions per mode (batch 1 times the first 100)")
    p.add_argument("--modes", nargs="+", default=["restricted", "exact", "ivfpq"],
                   choices=["restricted", "exact", "ivfpq"], help="retrieval modes to time")
    p.add_argument("--nprobe", type=int, default=256, help="IVF lists an IVF-PQ search visits")
    p.add_argument("--nlist", type=int, default=4096, help="IVF lists of IVF-PQ (k-means on a sample)")
    p.add_argument("--rerank", type=int, default=16, help="IVF-PQ scores its best rerank x K candidates again, "
                   "exactly, from the memory-mapped vectors")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--include", type=Path, nargs="+", metavar="JSON", default=[],
                   help="earlier bench_scale.json files whose sizes (and baseline rows) are shown beside this run's, "
                   "in the table and the plot (sizes run again here replace them, and baseline rows where --baseline "
                   "runs that size again; of two files with a size, the first wins)")
    p.add_argument("--work", type=Path, default=Path("runs/scale"), help="where corpora and indexes are built")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/scale"))
    p.add_argument("--keep", action="store_true", help="keep each size's corpus and indexes (deleted by default)")
    p.add_argument("--reuse", action="store_true", help="where --keep left a size's corpus, index and vectors, time "
                   "only the questions (the build figures are that run's, marked with its commit)")
    p.add_argument("--baseline", metavar="GITREF", help="also run every size with the code at this git revision "
                   "(a worktree under --work), side by side in the same run")
    p.add_argument("--baseline-max", type=int, default=None, metavar="N",
                   help="run the baseline only at sizes up to N entities (default: every size)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
              "parameters": json.loads(json.dumps(vars(args), default=str)), "sizes": []}  # paths as strings
    baseline = baseline_checkout(args.baseline, args.work) if args.baseline else None
    if baseline:
        result["baseline"] = []
        result["parameters"]["baseline_commit"] = git_head(baseline)
    result["parameters"]["commit"] = git_head(ROOT)
    for include in args.include:  # rows of earlier runs, each marked with the run it came from
        earlier = json.loads(include.read_text())
        commit = earlier.get("parameters", {}).get("commit", "?")
        for key, rerun in (("sizes", set(args.sizes)),
                           ("baseline", {n for n in args.sizes if baseline and n <= (args.baseline_max or n)})):
            have = {r["entities"] for r in result.get(key, [])}
            rows = [dict(r, from_run=r.get("from_run", commit)) for r in earlier.get(key, [])
                    if r["entities"] not in rerun and r["entities"] not in have]
            if rows:
                result.setdefault(key, []).extend(rows)
    settings = Settings(args.work, args.questions, args.seed, tuple(args.modes), args.nprobe, args.nlist, args.rerank)
    for n in sorted(args.sizes):
        result["sizes"] = [r for r in result["sizes"] if r["entities"] != n]
        result["sizes"].append(bench_size(n, settings, print, reuse=args.reuse))
        if not args.keep:
            shutil.rmtree(args.work / str(n), ignore_errors=True)
        if baseline and (args.baseline_max is None or n <= args.baseline_max):
            old = replace(settings, modes=tuple(m for m in args.modes if m != "ivfpq"))  # IVF-PQ is new
            result["baseline"].append(bench_size(n, old, print, root=baseline, tag=f"-{args.baseline}"))
            if not args.keep:
                shutil.rmtree(args.work / f"{n}-{args.baseline}", ignore_errors=True)
        result["sizes"].sort(key=lambda r: r["entities"])
        (args.out / "bench_scale.json").write_text(json.dumps(result, indent=2) + "\n")
    if baseline:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)], capture_output=True)
    (args.out / "bench_scale.md").write_text("\n".join(markdown(result)) + "\n")
    plot(result, args.out / "bench_scale.png")
    print("\n".join(markdown(result)))
    print(f"wrote {args.out}/bench_scale.json, bench_scale.md, bench_scale.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
