#!/usr/bin/env bash
# drkit's own path of `drkit reproduce-2wiki` (fold 0) on a lent GPU machine, within one device call, timed.
# Prepare here first: `scripts/gpu_kit.sh 2wiki runs/2wiki-f0` (a run folder made here: its index and split travel,
# since the recogniser that made the index is not on that machine). Then, through the device tool, carrying .gpu:
#   bash scripts/gpu_2wiki.sh SECONDS [--reader | --whole] [reproduce-2wiki flags...]
# The MiniLM weights cannot travel with the rest (64 MiB a call): the encoder is a randomly initialised transformer
# of MiniLM's shape (seed 0), the same computation, so the times hold and the accuracy means nothing. The own path
# (pretraining, embedding, training, retrieval: --rows --no-peers --no-controls --transfer none --no-answers
# --no-reader) runs first; with --reader the reader's training and reading follow in a second run on the same
# folder. With --whole, the whole command with its defaults instead (but --transfer none: the second corpus would
# need the recogniser there), in one run. The log, results and timings come back in $OUT. With DRKIT_GPU_RUN set, the folder is that path (a
# rehearsal on a CPU machine, with PYTHON naming a Python that has the wheels' packages); the stand-in MiniLM package is used wherever the script runs.
set -u
cd "$(dirname "$0")/.."
t0=$(date +%s)
limit=$1; shift
reader=0; whole=0
while [ "${1:-}" = "--reader" ] || [ "${1:-}" = "--whole" ]; do
    [ "$1" = "--reader" ] && reader=1 || whole=1; shift
done
[ $reader = 1 ] && [ $whole = 1 ] && { echo "--reader or --whole, not both"; exit 2; }
seconds_left() {  # of the limit, at least 1 (timeout 0 would mean none)
    local left=$(( limit - ($(date +%s) - t0) )); [ $left -gt 0 ] && echo $left || echo 1
}
run=${DRKIT_GPU_RUN:-/tmp/2wiki-gpu}
out=${OUT:-$run-out}
mkdir -p "$out"
py=${PYTHON:-python3}
kit=/tmp/gpu-kit  # the stand-in MiniLM package and its folder, given random weights there (never in .gpu)
rm -rf $kit && mkdir -p $kit && cp -r .gpu/base .gpu/site $kit/
if [ -z "${PYTHON:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .gpu/whl/*.whl || exit 3
fi
export PYTHONPATH=$kit/site:$PWD:/tmp/site PYTHONUNBUFFERED=1 TQDM_MININTERVAL=20
$py - $kit/base <<'PY' || exit 4
import sys, torch
from transformers import AutoConfig, AutoModel
torch.manual_seed(0)
AutoModel.from_config(AutoConfig.from_pretrained(sys.argv[1])).save_pretrained(sys.argv[1])
PY
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
rm -rf "$run" && mkdir -p "$run" && cp -r .gpu/2wiki-run/* "$run"/
echo "setup $(( $(date +%s) - t0 )) s"
flags=(--data .gpu/2wiki --out "$run" --fold 0)
left=$(seconds_left)
if [ $whole = 1 ]; then  # every default but the transfer corpus, which would need the recogniser there
    timeout $left $py -m drkit reproduce-2wiki "${flags[@]}" --transfer none "$@" > "$out/whole.log" 2>&1
    rc=$?; echo "whole rc $rc at $(( $(date +%s) - t0 )) s"
    cp "$run/timings.json" "$out/timings-whole.json" 2>/dev/null && cat "$out/timings-whole.json"
    cp "$run/results.md" "$run/results.json" "$out/" 2>/dev/null
    grep -E "skipped|Error|error" "$out/whole.log" | head -5
    exit $rc
fi
timeout $left $py -m drkit reproduce-2wiki "${flags[@]}" --rows --no-peers --no-controls --transfer none --no-answers \
    --no-reader "$@" > "$out/own.log" 2>&1
echo "own path rc $? at $(( $(date +%s) - t0 )) s"
cp "$run/timings.json" "$out/timings-own.json" 2>/dev/null && cat "$out/timings-own.json"
grep -E "drkit: |questions/s|wrote .*model" "$out/own.log" | head -20
if [ $reader = 1 ]; then
    left=$(seconds_left)
    timeout $left $py -m drkit reproduce-2wiki "${flags[@]}" --rows --no-peers --no-controls --transfer none \
        --no-answers --reader "$@" > "$out/reader.log" 2>&1
    echo "reader rc $? at $(( $(date +%s) - t0 )) s"
    cp "$run/timings.json" "$out/timings-reader.json" 2>/dev/null && cat "$out/timings-reader.json"
    tail -5 "$out/reader.log"
fi
cp "$run/results.md" "$run/results.json" "$out/" 2>/dev/null
echo "done at $(( $(date +%s) - t0 )) s"
