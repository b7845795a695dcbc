#!/bin/bash
# true AVX2 machine (Zen 3): fold 0, fold 1 from nothing, then the reading-budget sweep; one at a time
cd /work/snap-18ba6a4
PY=/work/main/.venv/bin/python
for f in 0 1; do
  date -u +"start fold $f %FT%TZ" >> /work/runs/chain.times
  /usr/bin/time -v $PY -m drkit reproduce-2wiki --data ../shared/data/2wiki --fold $f --out /work/runs/f$f-zen3 > /work/runs/f$f-zen3.log 2>&1
  date -u +"end fold $f %FT%TZ rc=$?" >> /work/runs/chain.times
done
date -u +"start pieces %FT%TZ" >> /work/runs/chain.times
$PY benchmarks/bench_reader.py --run /work/runs/f0-zen3 /work/runs/f1-zen3 --max-pieces 512 448 384 320 --out /work/runs/bench-pieces > /work/runs/bench-pieces.log 2>&1
date -u +"end pieces %FT%TZ rc=$?" >> /work/runs/chain.times
touch /work/runs/chain.done
