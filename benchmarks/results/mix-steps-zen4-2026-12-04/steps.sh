# usage: steps.sh RUN STEPS [env...]: train-mixing with --steps STEPS on RUN's index, mentions and split, then retrieve --answers
set -e
cd /work/wt
R=$1; S=$2; E=$R/steps-$S
PY="/work/main/.venv/bin/python -m drkit"
export DRKIT_PROGRESS=0
t0=$(date +%s)
$PY train-mixing --index $R/index --mentions $R/mentions-kb_qa --train $R/split/train.jsonl --dev $R/split/dev.jsonl --out $E/train --steps $S
t1=$(date +%s)
$PY retrieve --index $R/index --model $E/train --questions $R/split/dev.jsonl --out $E/retrieve --answers --qps-sample 0
echo "TIMES steps $S train $((t1-t0))"
