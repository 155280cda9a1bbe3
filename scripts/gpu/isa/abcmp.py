#!/usr/bin/env python3
"""Two isa.sh runs of the same variants, before and after a change: per (chip, format, precision,
mapping), the instructions per weight of each variant's inner loop after over before (median,
smallest, largest, count; variants whose hot loop keeps nested loops left out).

    python3 scripts/gpu/isa/abcmp.py BEFORE/isa.json AFTER/isa.json
"""
import json,sys,collections,statistics
def load(p):
    d={}
    for r in json.load(open(p)):
        if r['source']!='ours' or r.get('nested_loops') or not r['inst_per_weight']: continue
        d[(r['gpu'],r['variant'])]=r
    return d
a=load(sys.argv[1]); b=load(sys.argv[2])
g=collections.defaultdict(list); v=collections.defaultdict(list)
for k in a:
    if k in b:
        ra,rb=a[k],b[k]
        cls='classic' if ra['rows']==0 else 'rows'
        g[(k[0],ra['format'],ra['precision'],cls)].append(rb['inst_per_weight']/ra['inst_per_weight'])
        v[(k[0],ra['format'])].append(rb['vgprs']-ra['vgprs'])
for k in sorted(g):
    x=g[k]; print(k, 'median %.3f min %.3f max %.3f n=%d'%(statistics.median(x),min(x),max(x),len(x)))
