# Set-up is part of every target: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# torch==2.13.0 is pinned in the same command as everything that depends on it (a local CPU wheel).
# The demo and the server need drkit and its serve extra; the tests, benchmarks and experiments all extras.
INSTALL_CORE = $(BIN)/pip install --quiet "torch==2.13.0" -e ".[serve]"
INSTALL = $(BIN)/pip install --quiet "torch==2.13.0" -e ".[test,serve,ray,ner]"
SAMPLE  = data/sample

METAQA  = ../shared/data/metaqa

.PHONY: install demo serve test bench bench-serve clean metaqa-dense metaqa metaqa-ablations

# Stamps, not .venv/bin/drkit: the core install makes that script too.
$(VENV)/.core-installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(INSTALL_CORE)
	touch $@

$(VENV)/.full-installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(INSTALL)
	touch $(VENV)/.core-installed $@

install: $(VENV)/.full-installed

demo: $(VENV)/.core-installed
	$(BIN)/drkit index --corpus $(SAMPLE)/wiki.txt --kb $(SAMPLE)/kb.txt --out runs/sample-index --overwrite \
	    --questions $(SAMPLE)/1-hop/qa_dev.txt --questions $(SAMPLE)/2-hop/qa_dev.txt --questions $(SAMPLE)/3-hop/qa_dev.txt
	$(BIN)/drkit pretrain --index runs/sample-index --kb $(SAMPLE)/kb.txt --out runs/sample-pretrain --overwrite \
	    --steps 40 --holdout 0.05
	$(BIN)/drkit embed --index runs/sample-index --encoder runs/sample-pretrain --out runs/sample-mentions --overwrite
	$(BIN)/drkit train --index runs/sample-index --mentions runs/sample-mentions --hops 2 --steps 100 --eval-every 50 \
	    --train $(SAMPLE)/2-hop/qa_train.txt --dev $(SAMPLE)/2-hop/qa_dev.txt --out runs/sample-model-2hop --overwrite
	$(BIN)/drkit evaluate --index runs/sample-index --model runs/sample-model-2hop --questions $(SAMPLE)/2-hop/qa_dev.txt \
	    --qtypes $(SAMPLE)/2-hop/qa_dev_qtype.txt --out runs/sample-eval-2hop
	$(BIN)/drkit ask --index runs/sample-index --model runs/sample-model-2hop \
	    "which person wrote the films acted by [Kyle MacLachlan]" "who directed the movies written by Tullio Pinelli"

# The demo's model behind the HTTP API and web page: http://127.0.0.1:8000/ (Ctrl-C stops it).
serve: $(VENV)/.core-installed
	test -d runs/sample-model-2hop/model || $(MAKE) demo
	$(BIN)/drkit serve --index runs/sample-index --model runs/sample-model-2hop

# The suite runs in one pytest-xdist worker per CPU (at most 4, and no more than a cgroup CPU quota allows);
# tests/conftest.py keeps each worker on CPUs of its own.
CPU_MAX ?= /sys/fs/cgroup/cpu.max
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); \
	[ -r $(CPU_MAX) ] && read q p < $(CPU_MAX) && [ "$$q" != max ] && [ $$((q / p)) -lt $$n ] && n=$$((q / p)); \
	[ $$n -lt 1 ] && n=1; [ $$n -gt 4 ] && n=4; echo $$n)

test: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

bench: install
	$(BIN)/python benchmarks/bench_expand.py
	$(BIN)/python benchmarks/bench_index.py
	$(BIN)/python benchmarks/bench_mips.py
	$(BIN)/python benchmarks/bench_dense.py

# Load, overload and fault benchmark of drkit serve with the demo's 2-hop model (make demo first, or pass INDEX=,
# MODEL= and QUESTIONS=).
INDEX ?= runs/sample-index
MODEL ?= runs/sample-model-2hop
QUESTIONS ?= $(SAMPLE)/2-hop/qa_dev.txt
bench-serve: install
	$(BIN)/python benchmarks/bench_serve.py --index $(INDEX) --model $(MODEL) --questions $(QUESTIONS) \
	    --out benchmarks/results/serve-sample

# Pretrained and not-pretrained mention indexes of the full MetaQA data, and their slot-filling scores.
metaqa-dense: install
	test -d runs/metaqa-index || $(BIN)/drkit index --corpus $(METAQA)/wiki.txt --kb $(METAQA)/kb.txt --out runs/metaqa-index
	test -d runs/metaqa-pretrain/encoder || $(BIN)/drkit pretrain --index runs/metaqa-index --kb $(METAQA)/kb.txt --out runs/metaqa-pretrain
	test -d runs/metaqa-untrained/encoder || $(BIN)/drkit pretrain --index runs/metaqa-index --kb $(METAQA)/kb.txt --out runs/metaqa-untrained --steps 0
	test -d runs/metaqa-mentions || $(BIN)/drkit embed --index runs/metaqa-index --encoder runs/metaqa-pretrain --out runs/metaqa-mentions
	test -d runs/metaqa-mentions-untrained || $(BIN)/drkit embed --index runs/metaqa-index --encoder runs/metaqa-untrained --out runs/metaqa-mentions-untrained
	$(BIN)/drkit slot-fill --index runs/metaqa-index --mentions runs/metaqa-mentions --encoder runs/metaqa-pretrain \
	    --queries runs/metaqa-pretrain/heldout.jsonl --out runs/metaqa-slot-fill
	$(BIN)/drkit slot-fill --index runs/metaqa-index --mentions runs/metaqa-mentions-untrained --encoder runs/metaqa-untrained \
	    --queries runs/metaqa-pretrain/heldout.jsonl --out runs/metaqa-slot-fill-untrained

# The whole MetaQA experiment (index, pretrain, embed, train and evaluate 1/2/3 hops, K sweep); resumable.
metaqa: install
	$(BIN)/drkit reproduce-metaqa --data $(METAQA) --out runs/metaqa

metaqa-ablations: install
	$(BIN)/drkit reproduce-metaqa --data $(METAQA) --out runs/metaqa --ablations --ablation-steps 500

clean:
	rm -rf runs $(VENV) *.egg-info
