"""The MetaQA experiment's report: the results table (`results_markdown`) and the K sweep plot (the paper's
Figure 3, `plot_k_sweep`)."""

from __future__ import annotations

from pathlib import Path

from drkit.util.figures import three

# Every Hits@k of the results (main table, ablations, K sweep) has the same denominator:
DENOMINATOR = ("all lines of the question file (or of its seeded sample): a line that cannot be scored (malformed, or "
               "its question entity is not an entity of the index) counts as a miss")
DENOMINATOR_CAPTION = "over all lines, an unscorable line counted as a miss"


def results_markdown(results: dict) -> list[str]:
    hops = sorted(results["main"], key=int)
    head = "| | " + " | ".join(f"{h}-hop" for h in hops) + " |"
    rule = "|---|" + "---|" * len(hops)
    pruning = (f"; restricted retrieval skips passages below {results['min_weight']:g} of a row's best weight"
               if "min_weight" in results else "")
    lines = [f"DrKIT on {results['corpus']} (dev split{pruning}; Hits@1, Hits@5 in brackets, {DENOMINATOR_CAPTION})",
             "", head, rule]
    lines.append("| DrKIT | " + " | ".join(f"{three(results['main'][h]['hits@1'])} ({three(results['main'][h]['hits@5'])})"
                                            for h in hops) + " |")
    if results.get("ablations"):
        setup = results.get("ablation_setup", {})
        lines += ["", f"Ablations (training steps: {setup.get('steps', 'as DrKIT')}; scored on a seeded sample of "
                      + ", ".join(f"{n} {h}-hop" for h, n in setup.get("questions", {}).items())
                      + f" dev lines; Hits@1, Hits@5 in brackets, {DENOMINATOR_CAPTION}):",
                  "", head, rule]
        for name, row in results["ablations"].items():
            lines.append(f"| {'' if name == 'drkit' else '- '}{row['what']} | " + " | ".join(
                f"{three(row[h]['hits@1'])} ({three(row[h]['hits@5'])})" if h in row else "" for h in hops) + " |")
    lines += ["", "Questions/s (exact MIPS, K of the model):", "", head, rule]
    for key in ("batch_64_questions_per_s", "batch_1_questions_per_s"):
        lines.append(f"| {key.replace('_questions_per_s', '').replace('_', ' ')} | "
                     + " | ".join(str(results["main"][h].get(key, "")) for h in hops) + " |")
    if results.get("k_sweep"):
        sizes = ", ".join(f"{pts[0].get('lines', pts[0].get('questions'))} {h}-hop"
                          for h, pts in sorted(results["k_sweep"].items(), key=lambda kv: int(kv[0])) if pts)
        lines += ["", f"K sweep (Hits@1 / questions per s at batch 64; on a seeded sample of {sizes} dev lines, "
                      f"{DENOMINATOR_CAPTION}):", ""]
        for h in hops:
            pts = results["k_sweep"].get(h, [])
            for retrieval in dict.fromkeys(p.get("retrieval", "") for p in pts):
                lines.append(f"- {h}-hop, {retrieval or 'model'} retrieval: " + ", ".join(
                    f"K={p['K']}: {three(p['hits@1'])} / {p['questions_per_s']}" for p in pts if p.get("retrieval", "") == retrieval))
    if results.get("timings_s"):
        lines += ["", "Wall time of each step (seconds, summed over sessions):", ""]
        lines += [f"- {k}: {v:,.0f}" for k, v in results["timings_s"].items()]
    return lines


def plot_k_sweep(sweep: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (h, pts) in enumerate(sorted(sweep.items(), key=lambda kv: int(kv[0]))):
        for retrieval, style in (("restricted", "o-"), ("global", "s--"), ("", "o-")):
            sel = [p for p in pts if p.get("retrieval", "") == retrieval]
            if not sel:
                continue
            ax.plot([p["questions_per_s"] for p in sel], [p["hits@1"] for p in sel], style, color=f"C{i}",
                    label=f"{h}-hop" + (f", {retrieval}" if retrieval else ""))
            if retrieval != "restricted":  # restricted points sit on top of each other (K rarely binds)
                for p in sel:
                    ax.annotate(f"K={p['K']}", (p["questions_per_s"], p["hits@1"]), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("questions/s (batch 64, exact MIPS, 2 CPU cores)")
    ax.set_ylabel("dev Hits@1")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
