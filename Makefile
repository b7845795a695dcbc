# Set-up is part of every target: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# torch==2.13.0 is pinned in the same command as everything that depends on it (a local CPU wheel).
INSTALL = $(BIN)/pip install --quiet "torch==2.13.0" -e ".[test]"
SAMPLE  = data/sample

.PHONY: install demo test bench clean

$(BIN)/drkit: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(INSTALL)
	touch $@

install: $(BIN)/drkit

demo: install
	$(BIN)/drkit index --corpus $(SAMPLE)/wiki.txt --kb $(SAMPLE)/kb.txt --out runs/sample-index --overwrite \
	    --questions $(SAMPLE)/1-hop/qa_dev.txt --questions $(SAMPLE)/2-hop/qa_dev.txt --questions $(SAMPLE)/3-hop/qa_dev.txt

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python benchmarks/bench_expand.py
	$(BIN)/python benchmarks/bench_index.py
	$(BIN)/python benchmarks/bench_mips.py

clean:
	rm -rf runs $(VENV) *.egg-info
