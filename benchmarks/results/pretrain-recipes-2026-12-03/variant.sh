set -e
cd /work/wt
R=/work/main/runs/2wiki-f0; E=/work/main/runs/exp-f0; V=$1; shift
PY="/work/main/.venv/bin/python -m drkit"
export DRKIT_PROGRESS=0
t0=$(date +%s)
$PY pretrain --index $R/index --kb $R/kb-train.txt --qa $R/split/train.jsonl --out $E/pre-$V --steps 100 "$@"
t1=$(date +%s)
$PY embed --index $R/index --encoder $E/pre-$V --out $E/men-$V --quantize int8
t2=$(date +%s)
$PY train-mixing --index $R/index --mentions $E/men-$V --train $R/split/train.jsonl --dev $R/split/dev.jsonl --out $E/mix-$V
t3=$(date +%s)
$PY retrieve --index $R/index --model $E/mix-$V --questions $R/split/dev.jsonl --out $E/ret-$V --answers --qps-sample 0
echo "TIMES pretrain $((t1-t0)) embed $((t2-t1)) train $((t3-t2))"
