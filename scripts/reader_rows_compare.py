"""Each fold's reader rows read again as ``drkit reproduce-2wiki`` now reads them (the date comparison of
`drkit.reader.compare` in every row but ``drkit_reader_only``), with the fold's own reader, and the fold's
results.json / results.md updated as the command's last step writes them; then ``drkit pool-2wiki``.

    python scripts/reader_rows_compare.py runs/2wiki-f0 runs/2wiki-f1

Only the reader's step runs (its training is found done); the retrieval steps before it are not checked again."""
import json
import sys
from pathlib import Path

from drkit.experiments.steps import Timings, write_json
from drkit.experiments.twowiki import TwoWikiConfig
from drkit.experiments.twowiki_reader import reader_step
from drkit.experiments.twowiki_report import results_markdown
from drkit.experiments.twowiki_retrievers import transfer_dir

data = Path("../shared/data/2wiki")
for out in map(Path, sys.argv[1:]):
    results = json.loads((out / "results.json").read_text())
    config = TwoWikiConfig(**{k: v for k, v in results["settings"].items() if k in TwoWikiConfig.__dataclass_fields__})
    results["reader"] = reader_step(data, out, out / "split", transfer_dir(data, config.transfer), config,
                                    Timings(out / "timings.json"), print)
    results["timings_s"] = json.loads((out / "timings.json").read_text())
    write_json(out / "results.json", results)
    (out / "results.md").write_text("\n".join(results_markdown(results)) + "\n", encoding="utf-8")
    print(f"wrote {out / 'results.md'}")
