"""One denominator for every results table of ``drkit reproduce-metaqa`` (all lines, an unscorable
line counted as a miss), stated in each table's caption and in results.json."""

from test_model import films_kb  # noqa: F401  (a fixture)
from test_reproduce import metaqa_folder  # noqa: F401  (a fixture)


def test_k_sweep_counts_unscorable_lines_as_misses(metaqa_folder, tmp_path):  # noqa: F811
    from drkit.experiments.metaqa import ReproduceConfig, k_sweep_points, reproduce_metaqa
    from drkit.qa.evaluate import evaluate
    from drkit.qa.pipeline import DrKIT, QueryConfig

    data, films = metaqa_folder
    out = tmp_path / "out"
    dev = data / "1-hop/vanilla/qa_dev.txt"
    dev.write_text(dev.read_text() + "who directed [No Such Film]\tSomebody\nthis line has no tab\n")
    results = reproduce_metaqa(data, out, ReproduceConfig(hops=(1,), steps=2, pretrain_steps=0, k_sweep=(10,),
                                                          sweep_questions=100), log=lambda *a: None)
    points = k_sweep_points(out / "index", out / "train-drkit-1hop", dev, ks=(10,), n_questions=100)
    kit = DrKIT.load(out / "index", out / "train-drkit-1hop")
    for p in points:
        assert p["lines"] == 26 and p["scored"] == 24
        query = QueryConfig(top_k=p["K"], retrieval=p["retrieval"])
        metrics = evaluate(kit, dev, None, qps_sample=0, query=query, log=lambda *a: None)
        assert p["hits@1"] == round(metrics["hits@1"], 4)  # the same denominator as the main table
    assert "all lines" in results["denominator"] and "miss" in results["denominator"]


def test_every_results_table_states_its_denominator():
    from drkit.experiments.metaqa import DENOMINATOR_CAPTION, results_markdown

    row = {"hits@1": 0.5, "hits@5": 0.75, "questions": 10, "batch_64_questions_per_s": 100.0}
    results = {"corpus": "c", "min_weight": 0.001, "main": {1: row}, "ablations": {"drkit": {"what": "DrKIT", 1: row}},
               "ablation_setup": {"steps": 5, "questions": {1: 10}},
               "k_sweep": {1: [{"retrieval": "restricted", "K": 10, "hits@1": 0.5, "questions_per_s": 3.0}]}}
    lines = results_markdown(results)
    captions = [line for line in lines if line.startswith(("DrKIT on", "Ablations", "K sweep"))]
    assert len(captions) == 3
    for caption in captions:
        assert DENOMINATOR_CAPTION in caption, caption


def test_a_hits_figure_is_rounded_half_up_from_its_stored_four_digits():
    from drkit.experiments.metaqa import results_markdown
    from drkit.experiments.metaqa_report import three

    assert f"{0.9285:.3f}" == "0.928"  # the binary float is just below 0.9285: what the tables used to show
    assert [three(x) for x in (0.9285, 0.9284, 0.9572, 1.0, 0.0)] == ["0.929", "0.928", "0.957", "1.000", "0.000"]
    row = {"hits@1": 0.9285, "hits@5": 0.9619, "questions": 10}
    assert "| DrKIT | 0.929 (0.962) |" in results_markdown({"corpus": "c", "main": {2: row}})


def test_the_reader_rows_say_their_milliseconds_for_one_fold_and_pooled():
    from drkit.experiments.twowiki_reader import reader_markdown

    def m(ms, read):
        return {"em": 0.5, "em_ci95": [0.4, 0.6], "f1": 0.6, "f1_ci95": [0.5, 0.7], "by_type": {"comparison": {"em": 1.0}},
                "reader_ms_per_question_batch1": ms, **({"reader_ms_per_read_batch1": read} if read != "absent" else {})}

    one = reader_markdown({"rows": {"gold": m(50.0, 100.0), "drkit": m(80.0, "absent")}}, "# t")
    pooled = reader_markdown({"rows": {"gold": m([50.0, 60.0], [100.0, 110.0]), "drkit_reader_only": m([90.0, 95.0],
                                                                                                         [None, None])}}, "# t")
    assert one[-1].endswith("gold 50.0 / 100.0; drkit 80.0 / -.")
    assert pooled[-1].endswith("gold [50.0, 60.0] / [100.0, 110.0]; drkit_reader_only [90.0, 95.0] / -.")
    assert "| reader on the gold passages (upper bound) | 0.500 [0.400, 0.600] | 0.600 [0.500, 0.700] | 1.000 |" in one


def test_the_2wiki_tables_round_their_stored_figures_half_up_like_metaqa():
    from drkit.experiments.twowiki_reader import reader_markdown
    from drkit.experiments.twowiki_report import interval_lines
    from drkit.util.figures import interval, three

    assert three(0.0005) == "0.001" and three(0.6285) == "0.629" and interval([0.1235, 0.8765]) == "[0.124, 0.877]"
    assert three(-0.0004) == "0.000" and three(-0.0015) == "-0.002"
    cell = {"mean": 0.6285, "ci95": [0.5835, 0.6745], "questions": 436}
    lines = interval_lines({"drkit": {m: cell for m in ("R@2", "R@5", "AR@2", "AR@5")}}, "# t")
    assert "| **drkit** | 436 | " + " | ".join(["0.629 [0.584, 0.675]"] * 4) + " |" in lines, lines
    m = {"em": 0.6285, "em_ci95": [0.5835, 0.6745], "f1": 0.7125, "f1_ci95": [0.6665, 0.7555],
         "by_type": {"comparison": {"em": 0.9285}}}
    row = "| reader on the gold passages (upper bound) | 0.629 [0.584, 0.675] | 0.713 [0.667, 0.756] | 0.929 |"
    assert row in reader_markdown({"rows": {"gold": m}}, "# t")


def test_bench_reader_pools_two_runs_over_all_their_questions():
    """bench_reader's pooled row against a direct computation over the two runs' readings: the means, the paired
    test against the first row, the milliseconds and pieces of all the readings over all the questions."""
    import numpy as np
    from benchmark_scripts import load_benchmark

    from drkit.qa.stats import paired_test

    bench = load_benchmark("bench_reader")
    rng = np.random.default_rng(0)
    base = {"reader": 0, "passages": 5, "quantize": "none", "decompose": "on"}
    rows, readings, em = [], [], {}
    for run, n in (("f0", 7), ("f1", 5)):  # the same question ids in both runs: they are still other questions
        for pieces in (512, 384):
            scores = rng.integers(0, 2, n).astype(float)
            em[run, pieces] = scores
            rows.append({"run": run, **base, "max_pieces": pieces, "questions": n, "seconds_batch1": 0.05 * n,
                         "seconds_batch8": 0.03 * n, "pieces_read": (pieces - 100) * n})
            readings += [{"run": run, "id": f"q{i}", **base, "max_pieces": pieces, "em": s, "f1": s / 2}
                         for i, s in enumerate(scores)]
    first, short = bench.pooled_rows(rows, readings)
    a, b = (np.concatenate([em["f0", p], em["f1", p]]) for p in (384, 512))
    test = paired_test(a, b)
    assert first["questions"] == short["questions"] == 12 and short["max_pieces"] == 384
    assert first["em"] == round(float(b.mean()), 4) and short["em"] == round(float(a.mean()), 4)
    assert short["em_minus_first"] == round(test["diff"], 4) and short["em_p"] == round(test["p"], 4)
    assert short["em_p_exact"] == test["exact"] and "em_p" not in first
    assert short["ms_per_question_batch1"] == 50.0 and short["mean_pieces_read"] == 284.0
    table = "\n".join(bench.markdown({"runs": ["f0", "f1"], "questions": 12, "machine": {}, "rows": [],
                                      "pooled": [first, short]}))
    assert f"(p {test['p']:.4f})" in table and "## Pooled over the runs (12 questions)" in table
