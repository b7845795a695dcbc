# usage (from the repository root): bash benchmarks/results/mix-steps-zen4-2026-12-04/steps.sh RUN STEPS
# drkit train-mixing with --steps STEPS on RUN's index, mentions and split (a reproduce-2wiki run), then
# drkit retrieve --answers on RUN's dev questions; writes RUN/steps-STEPS/{train,retrieve}.
# (The runs here were made from a frozen worktree of 5439993 with absolute paths; the commands are these.)
set -e
R=$1; S=$2; E=$R/steps-$S
PY="${PYTHON:-.venv/bin/python} -m drkit"
export DRKIT_PROGRESS=0
t0=$(date +%s)
$PY train-mixing --index $R/index --mentions $R/mentions-kb_qa --train $R/split/train.jsonl --dev $R/split/dev.jsonl --out $E/train --steps $S
t1=$(date +%s)
$PY retrieve --index $R/index --model $E/train --questions $R/split/dev.jsonl --out $E/retrieve --answers --qps-sample 0
echo "TIMES steps $S train $((t1-t0))"
