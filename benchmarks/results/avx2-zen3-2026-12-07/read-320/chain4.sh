#!/bin/bash
# the 320-piece default read again over both folds' stop-77 runs (only the reading rows are made again), pooled
cd /work/snap-320
PY=/work/main/.venv/bin/python
for f in 0 1; do
  date -u +"start reread fold $f %FT%TZ" >> /work/runs/chain4.times
  /usr/bin/time -v $PY -m drkit reproduce-2wiki --data ../shared/data/2wiki --fold $f --out /work/runs/f$f-zen3 > /work/runs/f$f-reread.log 2>&1
  date -u +"end reread fold $f %FT%TZ rc=$?" >> /work/runs/chain4.times
done
$PY -m drkit pool-2wiki --help > /dev/null 2>&1
touch /work/runs/chain4.done
