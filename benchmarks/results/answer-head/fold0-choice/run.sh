#!/bin/bash
# usage: run.sh NAME FOLD extra train flags...
set -e
cd /work/main
name=$1; fold=$2; shift 2
R=runs/2wiki-f$fold-ner; O=/tmp/exp/$name-f$fold
.venv/bin/drkit train-mixing --index $R/index --mentions $R/mentions-kb_qa --train $R/split/train.jsonl --dev $R/split/dev.jsonl --out $O --steps 100 --eval-every 100 "$@" > $O.train.log 2>&1
.venv/bin/drkit retrieve --index $R/index --model $O --questions $R/split/dev.jsonl --out $O/retrieve --answers --qps-sample 0 > $O.retrieve.log 2>&1
.venv/bin/python - <<PY
import json
m=json.load(open('$O/retrieve/metrics.json'))
a=m.get('answers',{})
n=sum(a[t]['questions'] for t in ('compositional','inference')); h=sum(a[t]['questions']*a[t]['hits@1'] for t in ('compositional','inference'))
o=m['overall']
print('$name f$fold', 'R@2',o['R@2'],'R@5',o['R@5'],'AR@2',o['AR@2'],'AR@5',o['AR@5'],'hits@1',round(h/n,4), {t:(v['R@2']) for t,v in m['by_type'].items()})
PY
