#!/usr/bin/env python3
"""Our inference kernels against llama.cpp's, one markdown table: matvec at 1 and 8 columns (ms per
call) and matmul at 512 columns (GFLOPS), each with how many times faster ours is.

    python3 scripts/peers/kernel_table.py OURS.json [OURS.json ...] --peer PEER.txt [PEER.txt ...]

OURS: `gguf-dequant bench --json` reports (kernel rows `matvec` batch 1 and 8, `matmul` batch 512;
the first report with a row wins). PEER: the output of `bash scripts/peers/llama-vulkan.sh ops
mv|mm8|mm512` (lines "mulmat TYPE n=N MS ms GIB GiB/s"). Matmul GFLOPS = 2·K·N·512 / time, for
both. Prints the table, then per column the number of shared types where ours is at least as
fast, the median ratio and the three slowest.
"""
import argparse
import json
import re
import statistics
import sys

PEER_LINE = re.compile(r"^mulmat\s+(\S+)\s+n=(\d+)\s+([\d.]+)\s+ms")
COLUMNS = [(1, "n=1"), (8, "n=8"), (512, "matmul 512")]


def ours(paths):
    """{(TYPE, batch): (seconds, flops)} from our reports, and the types in report order."""
    rows, order = {}, []
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        for r in report.get("kernels", []):
            key = (r["type"], r["batch"])
            if r["kernel"] not in ("matvec", "matmul") or key in rows:
                continue
            if (r["kernel"] == "matmul") != (r["batch"] == 512):
                continue
            rows[key] = (r["seconds"], r["flops"])
            if r["type"] not in order:
                order.append(r["type"])
    return rows, order


def peer(paths):
    """{(TYPE, batch): seconds} from the peer's logs (its lower-case names upper-cased)."""
    rows = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                m = PEER_LINE.match(line.strip())
                if m:
                    rows[(m.group(1).upper(), int(m.group(2)))] = float(m.group(3)) / 1e3
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours", nargs="+", help="our bench --json reports")
    ap.add_argument("--peer", nargs="+", required=True, help="llama-vulkan.sh ops outputs")
    args = ap.parse_args()
    mine, order = ours(args.ours)
    theirs = peer(args.peer)
    if not mine:
        sys.exit("no matvec or matmul rows in " + ", ".join(args.ours))
    head = ["type"]
    for _, name in COLUMNS:
        unit = "GFLOPS" if name.startswith("matmul") else "ms"
        head += [f"{name} ours {unit}", f"llama.cpp {unit}", "×"]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    ratios = {name: [] for _, name in COLUMNS}
    for t in order:
        cells = [t]
        for batch, name in COLUMNS:
            o, p = mine.get((t, batch)), theirs.get((t, batch))
            matmul = batch == 512
            if o is None:
                cells += ["–", "–", "–"]
                continue
            secs, flops = o
            cells.append(f"{flops / secs / 1e9:.2f}" if matmul else f"{secs * 1e3:.1f}")
            if p is None:
                cells += ["–", "–"]
                continue
            cells.append(f"{flops / p / 1e9:.2f}" if matmul else f"{p * 1e3:.1f}")
            ratio = p / secs
            ratios[name].append((ratio, t))
            cells.append(f"{ratio:.2f}×")
        print("| " + " | ".join(cells) + " |")
    print()
    for _, name in COLUMNS:
        r = sorted(ratios[name])
        if not r:
            print(f"{name}: no shared types")
            continue
        ahead = sum(1 for x, _ in r if x >= 1.0)
        slow = ", ".join(f"{t} {x:.2f}×" for x, t in r[:3])
        med = statistics.median(x for x, _ in r)
        print(f"{name}: ours at least as fast for {ahead} of {len(r)}, median {med:.2f}×, slowest {slow}")


if __name__ == "__main__":
    main()
