#!/usr/bin/env bash
# `drkit reproduce-metaqa` on a lent GPU machine with the real MiniLM, within one device call.
# Prepare here first: `scripts/gpu_kit.sh metaqa` (the kit, the MiniLM weights in fp16 and the MetaQA files,
# 61 MB with the working tree: under the 64 MiB a call may carry). Then, through the device tool, carrying .gpu:
#   bash scripts/gpu_metaqa.sh SECONDS [--tests] [reproduce-metaqa flags...]
# e.g. `bash scripts/gpu_metaqa.sh 520 --tests --pretrain-steps 1000 --steps 750 --k-sweep 1000 10000
# --sweep-questions 500`. The weights travel in fp16 and are loaded in fp32 (each weight within 1e-3 of
# the release's). With --tests, tests/test_gpu.py and tests/test_hardware.py run first. The command stops
# after SECONDS in all (setup and tests included); its log, the tests' log and the run's small files
# (results, timings, training logs; no weights or index) come back in $OUT.
set -u
cd "$(dirname "$0")/.."
t0=$(date +%s)
limit=$1; shift
tests=0; if [ "${1:-}" = "--tests" ]; then tests=1; shift; fi
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/whl/*.whl || exit 3
export PYTHONPATH=$PWD/.gpu/site:$PWD:/tmp/site PYTHONUNBUFFERED=1 TQDM_MININTERVAL=20
python3 -c "
from safetensors.torch import load_file, save_file
sd = load_file('.gpu/model16.safetensors')
save_file({k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in sd.items()},
          '.gpu/base/model.safetensors', metadata={'format': 'pt'})
" || exit 4
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
mkdir -p /tmp/metaqa && tar xJf .gpu/mq.tar.xz -C /tmp/metaqa || exit 5
echo "setup $(( $(date +%s) - t0 )) s"
if [ $tests = 1 ]; then
    timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_hardware.py > "$OUT/tests.log" 2>&1
    echo "tests rc $? at $(( $(date +%s) - t0 )) s"; tail -1 "$OUT/tests.log"
fi
left=$(( limit - ($(date +%s) - t0) )); [ $left -gt 0 ] || { echo "no time left for reproduce-metaqa"; exit 6; }
timeout $left python3 -m drkit reproduce-metaqa --data /tmp/metaqa --out /tmp/mq "$@" \
    > "$OUT/metaqa.log" 2>&1
echo "reproduce-metaqa rc $? at $(( $(date +%s) - t0 )) s"
grep -v "it/s\]" "$OUT/metaqa.log" | grep -E "Hits|wrote|^- |^\|" | tail -30
cd /tmp/mq && find . -type f -size -3M ! -name "*.safetensors" ! -path "./index/*" ! -path "./mentions/*" \
    ! -path "*/checkpoints/*" | tar czf "$OUT/mq-small.tgz" -T -
