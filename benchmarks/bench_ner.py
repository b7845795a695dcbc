"""The recogniser of ``drkit index --entities ner`` in one process against several, side by side in one run.

The texts of a JSONL corpus (every article's text, as `drkit index` reads them) go through
`drkit.index.ner.ner_entities` with each number of processes in turn, for ``--rounds`` rounds (the order
alternating), each from a pipeline loaded once. Records each run's seconds (the processes' start included)
and checks that every number of processes finds the same names, dates, forms, labels and kinds as one.
With ``--shared-tok2vec``, the pipeline as it was loaded before `load_pipeline` dropped spaCy's shared
tok2vec (which no component listens to) runs too, with the most processes, to time what dropping it saves
and check that it finds the same. With ``--spacy-processes``, the way `ner_entities` read before its processes
sent back spans (spaCy's own ``nlp.pipe(n_process=N)``, which sends each whole Doc back to be rebuilt) runs
too, with the most processes. Writes OUT/bench_ner.json and OUT/bench_ner.md.

    .venv/bin/python benchmarks/bench_ner.py --corpus ../shared/data/2wiki/corpus.jsonl --out benchmarks/results/ner-processes
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench_quantize import machine_info, write_report

from drkit.data.corpus import read_corpus
from drkit.index.found import word_case_counts
from drkit.index.ner import _recognised, load_pipeline, ner_entities, ner_processes
from drkit.util.hardware import available_cpus
from drkit.util.processes import prepare_children
from drkit.util.warnlog import WarningLog


def spacy_processes(texts: list[str], nlp, processes: int):
    """`ner_entities` as it read before its processes sent back spans: spaCy's ``n_process``, each Doc sent back."""
    upper, lower = word_case_counts(texts)
    prepare_children()
    docs = nlp.pipe(texts, batch_size=128, n_process=processes)
    return _recognised(texts, [[(e.label_, e.start_char, e.end_char) for e in d.ents] for d in docs], upper, lower)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, required=True, help="a JSONL corpus (id, title, text a line)")
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 2], help="numbers of processes compared")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each number of processes")
    ap.add_argument("--shared-tok2vec", action="store_true", help="also the pipeline with spaCy's shared tok2vec kept")
    ap.add_argument("--spacy-processes", action="store_true", help="also spaCy's own n_process, whole Docs sent back")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    texts = [a.text for a in read_corpus(args.corpus, "jsonl", WarningLog())]
    nlp = load_pipeline()
    runs = {n: (nlp, n) for n in args.processes}  # label -> (pipeline, processes)
    if args.shared_tok2vec:
        import spacy

        from drkit.index.ner import EXCLUDED, PIPELINE

        kept = spacy.load(PIPELINE, exclude=list(EXCLUDED))
        runs[f"{max(args.processes)}, shared tok2vec kept"] = (kept, max(args.processes))
    spacy_label = f"{max(args.processes)}, spaCy's n_process (whole Docs sent back)"
    if args.spacy_processes:
        runs[spacy_label] = (nlp, max(args.processes))
    seconds: dict = {n: [] for n in runs}
    found = {}
    for r in range(args.rounds):
        for n in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            t = time.perf_counter()
            result = (spacy_processes if n == spacy_label else ner_entities)(texts, runs[n][0], processes=runs[n][1])
            seconds[n].append(time.perf_counter() - t)
            found[n] = (result.names, result.aliases, result.labels, result.kinds)
    first = args.processes[0]
    same = {n: found[n] == found[first] for n in runs}
    report = {"corpus": str(args.corpus), "texts": len(texts), "available_cpus": available_cpus(),
              "auto_processes": ner_processes(len(texts)), "names_found": len(found[first][0]),
              "same_as_first": {str(n): v for n, v in same.items()}, "seconds": {str(n): [round(s, 2) for s in v] for n, v in seconds.items()},
              "machine": machine_info()}
    lines = [f"# The recogniser in one process and in several ({args.corpus}, {len(texts):,} texts)", "",
             f"Machine: {report['machine']['platform']}, {available_cpus()} available CPUs, torch CPU capability "
             f"{report['machine']['cpu_capability']}; `drkit index` chooses {report['auto_processes']} process(es) "
             "here.", "",
             "| processes | seconds, median (each round) | texts/s | found the same as " + f"{first} process(es) |",
             "|---|---|---|---|"]
    for n in runs:
        med = statistics.median(seconds[n])
        lines.append(f"| {n} | {med:.1f} ({', '.join(f'{s:.1f}' for s in seconds[n])}) | {len(texts) / med:.1f} | "
                     f"{'yes' if same[n] else 'NO'} |")
    write_report(args.out, "bench_ner", report, lines)
    if not all(same.values()):
        raise SystemExit("the processes found different entities")


if __name__ == "__main__":
    main()
