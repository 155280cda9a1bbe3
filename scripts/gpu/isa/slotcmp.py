#!/usr/bin/env python3
"""Slots of the matvec rows mapping (`MatVec::slot`) against slots of one chunk, from an isa.sh run.

    python3 scripts/gpu/isa/slotcmp.py OUT/isa.json

For each (chip, format, precision, slot S > 1): for every rows-mapping variant with the subgroup
reduction (same W, R and x reader), the fewest instructions per weight of the inner loop among S's
kernels (unrolled or not) over the same for S = 1; prints the median, count, smallest and largest.
"""
import json,collections,statistics,sys
rows=json.load(open(sys.argv[1]))
g=collections.defaultdict(dict)
for r in rows:
    if r['source']!='ours' or r['family']!='matvec' or r['rows']==0: continue
    if r.get('nested_loops'): continue
    if not r['subgroups']: continue
    k=(r['gpu'],r['format'],r['precision'],r['threads'],r['rows'],r['vec_x'])
    g[k][(r['slot'],r['unroll'])]=(r['inst_per_weight'],r['vgprs'],r['waves_per_simd'],r['loop_vmem'],r['values_per_step'])
out=collections.defaultdict(list)
for k,v in sorted(g.items()):
    base=[x for (s,u),x in v.items() if s==1]
    if not base: continue
    b=min(x[0] for x in base if x[0])
    for s in (2,4):
        c=[x for (ss,u),x in v.items() if ss==s and x[0]]
        if c:
            out[(k[0],k[1],k[2],s)].append(min(x[0] for x in c)/b)
for k in sorted(out):
    print(k, 'median ratio ipw slot/slot1 = %.3f (n=%d, min %.3f max %.3f)'%(statistics.median(out[k]),len(out[k]),min(out[k]),max(out[k])))

# The lowest instructions per weight per (chip, format) of the classic mapping, the rows mapping
# by slot, and llama.cpp's (kernels whose hot loop keeps nested loops left out).
best = collections.defaultdict(dict)
llama = {}
for r in rows:
    if r['family'] != 'matvec' or r.get('nested_loops') or not r['inst_per_weight']:
        continue
    k = (r['gpu'], r['format'])
    if r['source'] == 'llama.cpp':
        llama[k] = min(llama.get(k, r['inst_per_weight']), r['inst_per_weight'])
        continue
    if r['source'] != 'ours':
        continue
    cls = 'classic' if r['rows'] == 0 else 'rows s%d' % r['slot']
    cur = best[k].get(cls)
    if cur is None or r['inst_per_weight'] < cur[0]:
        best[k][cls] = (r['inst_per_weight'], r['variant'])
print()
print('best ipw per chip and format: classic, rows by slot, llama.cpp; our best variant')
for k in sorted(best):
    b = best[k]
    cols = ' '.join('%s %5.2f' % (c, b[c][0]) for c in ['classic', 'rows s1', 'rows s2', 'rows s4'] if c in b)
    print(k[0], k[1].ljust(8), cols, ' llama.cpp %5.2f' % llama[k] if k in llama else '', ' best', min(b.values())[1])
