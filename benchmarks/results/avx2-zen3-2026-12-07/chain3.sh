#!/bin/bash
while [ ! -e /work/runs/chain.done ]; do sleep 10; done
cd /work/snap-18ba6a4
date -u +"start retriever %FT%TZ" >> /work/runs/chain.times
/work/main/.venv/bin/python benchmarks/bench_retriever.py --run /work/runs/f0-zen3 --code "auto=/work/snap-18ba6a4@auto" --code "int8=/work/snap-18ba6a4@int8" --rounds 3 --out /work/runs/retriever-speed > /work/runs/retriever-speed.log 2>&1
date -u +"end retriever %FT%TZ rc=$?" >> /work/runs/chain.times
touch /work/runs/chain3.done
