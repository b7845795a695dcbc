#!/bin/bash
# pretraining with and without the attention dropout, both folds, own path only, AVX2 code on this machine
# (ABBA order so that drift falls on both settings); run from a snapshot of the code at 3ff1b4b
cd /work/snap
export ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
run() {  # fold, name, flag
  echo "$(date -u +%FT%TZ) start f$1-$2" >> /work/runs/times.txt
  /usr/bin/time -v /work/main/.venv/bin/python -m drkit reproduce-2wiki --data ../shared/data/2wiki --fold $1 \
    --out /work/runs/f$1-$2 $3 --no-peers --no-controls --transfer none --no-reader > /work/runs/f$1-$2.log 2>&1
  echo "$(date -u +%FT%TZ) end f$1-$2 rc $?" >> /work/runs/times.txt
}
run 0 on --pretrain-attention-dropout
run 0 off --no-pretrain-attention-dropout
run 1 off --no-pretrain-attention-dropout
run 1 on --pretrain-attention-dropout
