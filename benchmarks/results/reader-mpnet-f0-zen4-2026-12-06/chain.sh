#!/bin/bash
cd /work/runs
f=0
rm -rf f$f-mpnet && cp -a f$f-avx2-b f$f-mpnet
rm -rf f$f-mpnet/train-reader f$f-mpnet/read-* f$f-mpnet/transfer/read-*
grep -rl "/work/runs/f$f-avx2-b" f$f-mpnet --include=*.json | xargs sed -i "s#/work/runs/f$f-avx2-b#/work/runs/f$f-mpnet#g"
cd /work/main
export ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
/usr/bin/time -v .venv/bin/drkit reproduce-2wiki --data ../shared/data/2wiki --fold $f --out /work/runs/f$f-mpnet --reader-base /work/models/all-mpnet-base-v2 > /work/runs/f$f-mpnet.log 2>&1
echo done > /work/runs/chain4.done
