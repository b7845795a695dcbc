#!/bin/bash
# after fold 1 (pid 5170): the reading budget swept, fp32 and int8, both folds' own readers, pooled
while kill -0 5170 2>/dev/null; do sleep 10; done
date -u +"end fold 1 (seen by chain2) %FT%TZ" >> /work/runs/chain.times
cd /work/snap-18ba6a4
date -u +"start pieces %FT%TZ" >> /work/runs/chain.times
/work/main/.venv/bin/python benchmarks/bench_reader.py --run /work/runs/f0-zen3 /work/runs/f1-zen3 --max-pieces 512 448 384 320 --quantize none int8 --out /work/runs/bench-pieces > /work/runs/bench-pieces.log 2>&1
date -u +"end pieces %FT%TZ rc=$?" >> /work/runs/chain.times
touch /work/runs/chain.done
