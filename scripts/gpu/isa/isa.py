#!/usr/bin/env python3
"""AMD machine-code statistics of the matvec kernels and of llama.cpp's: the helpers of scripts/gpu/isa.sh.

    isa.py llama SRC OUT            compile llama.cpp's mul_mat_vec shaders (SRC: its ggml-vulkan/vulkan-shaders
                                    folder) with glslc into OUT/*.spv, with OUT/manifest.json
    isa.py jobs OUT GPU             shaderstats job lines (stdout) for every file of the manifests
                                    OUT/spv/*/manifest.json, their disassembly to OUT/asm/GPU/
    isa.py summary OUT [--h200 OURS.json LLAMA.txt]
                                    OUT/isa.json (one row per variant, build and GPU), OUT/isa-brief.json
                                    (per format and GPU: our t32.u4 default and the H200's t32.u1, each with
                                    and without loop bounding, our best variant, llama.cpp's) and the table
                                    (stdout, OUT/table.txt), from OUT/spv/*/manifest.json, OUT/raw/GPU*.jsonl
                                    and OUT/asm/GPU/*.s (isa.sh keeps those with ISA_ASM=1); with --h200, how
                                    well the instruction counts rank the formats' H200 times
    isa.py loop FILE.s              the hot loop of one disassembly (for checking the heuristic)

Standard library only. The inner loop of a disassembly (ACO's, `RADV_DEBUG=shaders` or the "Assembly"
internal representation) is found as follows, see `hot_loop`:
  * a loop is a backward branch: `s_branch`/`s_cbranch_*` to a label at or above it; its body is every
    instruction from that label to the branch;
  * the hot loop is the first outermost loop, in program order, that has a vector memory load (buffer_,
    global_, ...): the main loop over a row's weights. Setup loops before it read only uniform
    parameters (scalar loads); the loops after it are the remainders (our rolled loop after the unrolled
    one, with the ragged end of one-value rows; llama.cpp's loops of 2 and 1 `iter`s after its 4) and
    the reductions, and llama.cpp's second copy of its main loop for the last rows of the matrix
    (`num_rows` not a constant there). "The largest loop" picks those remainders instead: they carry
    the ragged-end code, and where naga's loop bounding keeps our unrolled loop's inner loops rolled,
    they are larger than the main loop. Without any loop with a vector load, the largest loop;
  * instructions are counted without the scheduling hints and waits that issue no work: s_delay_alu,
    s_clause, s_nop, s_waitcnt* (gfx12: s_wait_*), s_set_inst_prefetch_distance (and "(then repeated N
    times)" counts N more of the line above);
  * loops nested in the hot loop are counted once, as written; their number is reported
    (`nested_loops`), and with any the instructions per weight are a lower bound (naga's loop bounding,
    which wgpu asks for, keeps constant-trip loops such as our `for u < U` from being unrolled by RADV);
  * the count is static: every instruction of the body once, whether or not it runs in the steady state,
    so cold paths count too (the ragged end of one-value rows in our rolled loop, naga's loop-bound exits
    and their zero-fills). Our unrolled loop (U = 4) built without loop bounding ("ours-unbounded") has
    neither and is the cleanest measure of our per-weight code; llama.cpp's main loops have no cold path.
Instructions per weight = hot-loop instructions / the weights one invocation processes per iteration
(`values_per_step`, from the SPIR-V dumper's manifest for ours, `llama_values_per_step` for llama.cpp's).
"""
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys

HINTS = re.compile(r"^(s_delay_alu|s_clause|s_nop|s_waitcnt\w*|s_wait_\w+|s_set_inst_prefetch_distance|s_inst_prefetch)$")

# ---------------------------------------------------------------------------------------------------
# llama.cpp's matrix-vector shaders (ggml/src/ggml-vulkan, llama-cpp-python 0.3.36's vendored copy)

# Its type names, as vulkan-shaders-gen.cpp's type_names (less the ones without a mul_mat_vec shader).
LLAMA_TYPES = ["f32", "f16", "bf16", "q1_0", "q2_0", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k",
               "q4_k", "q5_k", "q6_k", "iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s",
               "iq4_xs", "iq4_nl", "mxfp4", "nvfp4", "tq1_0", "tq2_0"]


def llama_shader(t):
    """The .comp file vulkan-shaders-gen.cpp compiles for type t's mul_mat_vec."""
    own = t.endswith("_k") or t.startswith(("iq1_", "iq2_", "iq3_")) or t in ("iq4_xs", "tq1_0", "tq2_0")
    return f"mul_mat_vec_{t}.comp" if own else "mul_mat_vec.comp"


def llama_defines(t):
    """vulkan-shaders-gen.cpp's defines for mul_mat_vec_<t>_f32_f32_subgroup_no_shmem: f32 x and y, the
    subgroup reduction without shared memory (what ggml-vulkan.cpp picks with subgroup arithmetic and a
    workgroup of one subgroup, DMMV_WG_SIZE_SUBGROUP: AMD's choice)."""
    return {"FLOAT_TYPE": "float", "FLOAT_TYPEV2": "vec2", f"DATA_A_{t.upper()}": "1", "B_TYPE": "float",
            "B_TYPEV2": "vec2", "B_TYPEV4": "vec4", "D_TYPE": "float", "USE_SUBGROUP_ADD_NO_SHMEM": "1"}


def llama_arch(gpu):
    """ggml-vulkan.cpp's architecture class of a RADV_FORCE_FAMILY chip: AMD_GCN where the subgroup size is
    64 only (GCN, CDNA: vega*, gfx9*), else RDNA (navi*, gfx10-12)."""
    return "gcn" if gpu.startswith(("vega", "gfx9", "polaris", "tonga", "fiji", "hawaii", "bonaire")) else "rdna"


def llama_rows(t, arch):
    """NUM_ROWS (spec constant 1) ggml-vulkan.cpp gives type t's mul_mat_vec at n = 1 (rm_stdq, rm_kq, rm_iq
    of ggml_vk_load_shaders: 1, 2, 4 on RDNA and NVIDIA; 2, 4, 8 on AMD_GCN)."""
    rm_stdq, rm_kq = (2, 4) if arch == "gcn" else (1, 2)
    rm_iq = 2 * rm_kq
    if t == "f32":
        return 1
    if t in ("f16", "bf16"):
        return 2
    if t == "q8_0":
        return rm_stdq
    if t in ("q1_0", "q2_0", "q4_0", "q4_1", "q5_0", "q5_1"):
        return 2 * rm_stdq
    if t.endswith("_k") or t.startswith("tq"):
        return rm_kq
    return rm_iq


def llama_values_per_step(t, rows):
    """Weights one invocation processes per iteration of the shader's main loop, all rows together:
    mul_mat_vec.comp's loop runs 4 `iter`s of K_PER_ITER values (4 for f32/f16/bf16, 8 for the quantised)
    per row; the per-type shaders give each superblock (256 values) 16 invocations (q2_k..q6_k, tq2_0,
    iq2_*, iq3_xxs: 16 values each) or 8 (iq1_s, iq1_m, iq4_xs, iq3_s at n <= 4: 32 values each), one
    superblock per row per iteration; tq1_0's block loop (8 invocations a block) covers one row, inside
    a loop over the rows."""
    if llama_shader(t) == "mul_mat_vec.comp":
        return 4 * (4 if t in ("f32", "f16", "bf16") else 8) * rows
    if t == "tq1_0":  # its block loop runs per row, inside a loop over the rows (its main loop: one row's)
        return 32
    eight = t in ("iq1_s", "iq1_m", "iq4_xs", "iq3_s")
    return (32 if eight else 16) * rows


def llama_compile(src, out):
    os.makedirs(out, exist_ok=True)

    def one(t):
        spv = f"llama.{t}.spv"
        cmd = ["glslc", "-fshader-stage=compute", "--target-env=vulkan1.2", os.path.join(src, llama_shader(t)),
               "-o", os.path.join(out, spv)]
        if "bf16" not in t:  # vulkan-shaders-gen.cpp leaves spirv-opt off for bf16
            cmd.append("-O")
        cmd += [f"-D{k}={v}" for k, v in sorted(llama_defines(t).items())]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            return t, None, r.stderr.strip().splitlines()[:3]
        return t, spv, None

    only = [f.strip().lower() for f in os.environ.get("ISA_FORMATS", "").split(",") if f.strip()]
    types = [t for t in LLAMA_TYPES if not only or t in only]
    rows = []
    with concurrent.futures.ThreadPoolExecutor(int(os.environ.get("ISA_JOBS", "2"))) as ex:
        for t, spv, err in ex.map(one, types):
            if spv is None:
                print(f"[isa] llama.cpp {t}: glslc failed: {' '.join(err)}", file=sys.stderr)
                continue
            rows.append({"file": spv, "variant": f"llama.{t}", "family": "matvec", "format": t.upper(),
                         "entry": "main", "shader": llama_shader(t), "source": "llama.cpp"})
    json.dump(rows, open(os.path.join(out, "manifest.json"), "w"), indent=1)
    print(f"[isa] {len(rows)} llama.cpp shaders compiled to {out}", file=sys.stderr)


def llama_job_options(row, gpu):
    """shaderstats options of a llama.cpp shader on `gpu`, as ggml-vulkan.cpp creates the pipeline on that
    architecture at n = 1: spec constants {BLOCK_SIZE = the subgroup (64 on AMD), NUM_ROWS, NUM_COLS = 1},
    that subgroup size required with full subgroups, robustness off for the quantised types."""
    t = row["format"].lower()
    rows = llama_rows(t, llama_arch(gpu))
    opts = ["0=64", f"1={rows}", "2=1", "sg=64"]
    if t not in ("f32", "f16", "bf16"):
        opts.append("robust=0")
    return opts, rows


# ---------------------------------------------------------------------------------------------------
# Disassembly


def parse_asm(text):
    """(labels: name -> index, instructions: [(mnemonic, count, None, branch target or None)]) of ACO's
    disassembly: LLVM's (`BB3:` labels, `v_add_f32 v1, v2, v3 ; encoding`) or, for chips the system's LLVM
    does not know (gfx12 with LLVM 15), ACO's own print_program (`BB3` labels, `v1: %7:v[1] = v_add_f32 ...`,
    branches to `block:BB3`)."""
    labels, insts = {}, []
    for line in text.splitlines():
        m = re.match(r"^(BB\d+):?\s*$", line)
        if m:
            labels[m.group(1)] = len(insts)
            continue
        s = line.strip()
        if not s or s.startswith((";", "/*")) or not line.startswith(("\t", " ")):
            continue
        m = re.match(r"^\(then repeated (\d+) times\)", s)
        if m:
            if insts:
                insts.append((insts[-1][0], int(m.group(1)), None, None))
            continue
        if " = " in s and re.match(r"^(\w+: |\()", s):
            s = s.split(" = ", 1)[1]
        mn = s.split()[0]
        target = None
        if mn.startswith(("s_branch", "s_cbranch")):
            t = re.search(r"\b(?:block:)?(BB\d+)\b", s)
            target = t.group(1) if t else None
        insts.append((mn, 1, None, target))
    return labels, insts


def classify(mn):
    if HINTS.match(mn):
        return None
    if mn.startswith("v_"):
        return "valu"
    if mn.startswith(("buffer_", "global_", "flat_", "scratch_", "image_", "tbuffer_")):
        return "vmem"
    if mn.startswith(("s_load", "s_buffer_load", "s_scratch", "s_store", "s_buffer_store")):
        return "smem"
    if mn.startswith("ds_"):
        return "lds"
    if mn.startswith("s_"):
        return "salu"
    return "other"


def count(insts, lo, hi):
    c = {"insts": 0, "valu": 0, "salu": 0, "vmem": 0, "smem": 0, "lds": 0}
    for mn, n, _, _ in insts[lo:hi]:
        k = classify(mn)
        if k is None:
            continue
        c["insts"] += n
        if k in c:
            c[k] += n
    return c


def hot_loop(text):
    """The hot loop of a disassembly (see the module docs): {"insts", "valu", ..., "nested_loops", "loops"},
    or None when the program has no loop."""
    labels, insts = parse_asm(text)
    loops = []
    for i, (_, _, _, target) in enumerate(insts):
        if target in labels and labels[target] <= i:
            loops.append((labels[target], i + 1))
    if not loops:
        return None
    def inside(a, b):  # loop a nested in loop b
        return b[0] <= a[0] and a[1] <= b[1] and a != b

    top = sorted(l for l in loops if not any(inside(l, o) for o in loops))
    sized = [(count(insts, lo, hi), lo, hi) for lo, hi in top]
    hot = [s for s in sized if s[0]["vmem"] > 0] or sorted(sized, key=lambda s: -s[0]["insts"])
    c, lo, hi = hot[0]
    c["nested_loops"] = sum(1 for l in loops if inside(l, (lo, hi)))
    c["loops"] = len(loops)
    return c


def program_count(text):
    _, insts = parse_asm(text)
    return count(insts, 0, len(insts))


# ---------------------------------------------------------------------------------------------------
# Jobs and summary


def manifests(out):
    """(source, folder, rows) of every manifest under OUT/spv."""
    found = []
    for path in sorted(glob.glob(os.path.join(out, "spv", "*", "manifest.json"))):
        folder = os.path.dirname(path)
        source = {"wgpu": "ours", "unbounded": "ours-unbounded", "llama": "llama.cpp"}.get(
            os.path.basename(folder), os.path.basename(folder))
        found.append((source, folder, json.load(open(path))))
    return found


def jobs(out, gpu):
    asm = os.path.join(out, "asm", gpu)
    os.makedirs(asm, exist_ok=True)
    for source, folder, rows in manifests(out):
        for r in rows:
            name = f"{source}:{r['variant']}"
            opts = llama_job_options(r, gpu)[0] if source == "llama.cpp" else []
            path = os.path.join(folder, r["file"])
            print(" ".join([name, path, r["entry"]] + opts + [f"asm={os.path.join(asm, name + '.s')}"]))


STAT_KEYS = {"VGPRs": "vgprs", "SGPRs": "sgprs", "Subgroups per SIMD": "waves_per_simd",
             "Instructions": "instructions", "Code size": "code_size", "LDS size": "lds_bytes",
             "Scratch size": "scratch_bytes", "Latency": "latency", "Inverse Throughput": "inverse_throughput"}

KEY_FIELDS = ["columns", "threads", "rows", "slot", "vec_x", "vec_w", "subgroups", "x_lanes", "unroll", "int_dot", "precision",
              "dtype"]


def load_results(out, gpu):
    res = {}
    for path in sorted(glob.glob(os.path.join(out, "raw", f"{gpu}*.jsonl"))):
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if r.get("ok") or r["name"] not in res:
                    res[r["name"]] = r
    return res


def rows_for(out, gpus):
    table = []
    for gpu in gpus:
        res = load_results(out, gpu)
        for source, folder, rows in manifests(out):
            for m in rows:
                name = f"{source}:{m['variant']}"
                r = res.get(name)
                row = {"source": source, "variant": m["variant"], "family": m["family"], "format": m["format"],
                       "gpu": gpu}
                if source == "llama.cpp":
                    opts, nrows = llama_job_options(m, gpu)
                    row["shader"] = m["shader"]
                    row["spec_constants"] = " ".join(o for o in opts if o[0].isdigit())
                    row["values_per_step"] = llama_values_per_step(m["format"].lower(), nrows)
                    row["scope"] = "loop"
                else:
                    for k in KEY_FIELDS:
                        if k in m:
                            row[k] = m[k]
                    row["values_per_step"] = m["values_per_step"]
                    row["scope"] = m["scope"]
                if r is None or not r.get("ok"):
                    row["error"] = (r or {}).get("error", "no result (the compiler crashed or was not run)")
                    table.append(row)
                    continue
                st = r["stats"]
                row["wave"] = r.get("subgroup")
                for k, v in STAT_KEYS.items():
                    if k in st:
                        row[v] = st[k]
                row["spills"] = st.get("Spilled VGPRs", 0) + st.get("Spilled SGPRs", 0)
                asm_path = os.path.join(out, "asm", gpu, name + ".s")
                text = open(asm_path).read() if os.path.exists(asm_path) else ""
                if text:
                    loop = hot_loop(text) if row["scope"] == "loop" else None
                    if loop is None:
                        loop = dict(program_count(text), nested_loops=0, loops=0)
                        row["scope"] = "program"
                    row["loop_insts"] = loop["insts"]
                    for k in ("valu", "salu", "vmem", "smem", "lds"):
                        row[f"loop_{k}"] = loop[k]
                    row["nested_loops"] = loop["nested_loops"]
                    row["inst_per_weight"] = round(loop["insts"] / row["values_per_step"], 3)
                table.append(row)
    return table


def ours_variant(row, unroll=4, source="ours"):
    """Whether `row` is the classic matvec variant a GPU with 32-lane subgroups runs (NVIDIA; AMD under RADV):
    32 invocations per row, subgroup reduction, vec4 x (F16/BF16: four words of W per load), exact sums, one column,
    binary16 by the device's conversion where the format reads it (`hw_f16`, since 2026-12-07), and
    `unroll` chunks per loop step (4: the engine's default since 2026-12-05; 1: what the H200 ran)."""
    return (row["source"] == source and row["family"] == "matvec" and row.get("rows", 0) == 0
            and row.get("threads") == 32 and row.get("subgroups") and row.get("unroll") == unroll
            and row.get("vec_x") and row.get("precision", "exact") == "exact" and not row.get("int_dot")
            and row.get("columns", 1) == 1
            and row.get("vec_w") == (row["format"] in ("F16", "BF16"))
            and row.get("hw_f16", False) == row.get("reads_f16", False))


def ours_default(row):
    return ours_variant(row, 4)


def spearman(a, b):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return r
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va and vb else float("nan")


def h200_times(ours_json, llama_txt):
    """Format -> (our µs, llama.cpp µs) of matvec 4096 x 4096 at n = 1 on the H200 (docs/bench/h200-*)."""
    ours = {}
    for k in json.load(open(ours_json)).get("kernels", []):
        if k.get("kernel") == "matvec" and k.get("batch") == 1 and k.get("k") == 4096 and k.get("n") == 4096:
            ours[k["type"]] = k["seconds"] * 1e6
    llama = {}
    for line in open(llama_txt):
        m = re.search(r"name=mulmat_(\w+?)_n1,.*sources=\w+\[4096,4096,.*?([\d.]+) us/run", line)
        if m:
            llama[m.group(1).upper()] = float(m.group(2))
    return {f: (ours[f], llama[f]) for f in ours if f in llama}


def fmt(v, nd=2):
    return "-" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def pick(rows, **want):
    return next((r for r in rows if all(r.get(k) == v for k, v in want.items())), None)


def summary(out, argv):
    gpus = [g for g in os.environ.get("ISA_GPUS", "navi31 gfx940").split() if g]
    table = rows_for(out, gpus)
    with open(os.path.join(out, "isa.json"), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(r, separators=(", ", ": ")) for r in table) + "\n]\n")
    good = [r for r in table if "inst_per_weight" in r]
    bad = [r for r in table if "error" in r]
    brief = []
    for key in sorted({(r["gpu"], r["family"], r["format"]) for r in good}, key=str):
        g = [r for r in good if (r["gpu"], r["family"], r["format"]) == key]
        chosen = [r for r in g if r["source"] == "llama.cpp" or any(
            ours_variant(r, u, src) for u in (1, 4) for src in ("ours", "ours-unbounded"))]
        for src in ("ours", "ours-unbounded"):
            ours = [r for r in g if r["source"] == src]
            if ours:
                best = min(ours, key=lambda r: (r["inst_per_weight"], r.get("vgprs", 0)))
                if best not in chosen:
                    chosen.append(dict(best, best=True))
        brief += chosen
    with open(os.path.join(out, "isa-brief.json"), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(r, separators=(", ", ": ")) for r in brief) + "\n]\n")

    lines = []
    p = lines.append
    if os.environ.get("ISA_PROVENANCE"):
        p(os.environ["ISA_PROVENANCE"])
    p(f"{len(table)} rows ({len(good)} measured, {len(bad)} failed); GPUs: {', '.join(gpus)}")
    for r in bad[:10]:
        p(f"  failed: {r['gpu']} {r['source']} {r['variant']}: {r['error']}")
    h200 = None
    if "--h200" in argv:
        i = argv.index("--h200")
        h200 = h200_times(argv[i + 1], argv[i + 2])
    for family in sorted({r["family"] for r in good}):
        fam = [r for r in good if r["family"] == family]
        formats = list(dict.fromkeys(r["format"] for r in fam if r["source"] != "llama.cpp"))
        for gpu in gpus:
            g = [r for r in fam if r["gpu"] == gpu]
            if not g:
                continue
            wave = sorted({r.get("wave") for r in g if r.get("wave")})
            has_llama = any(r["source"] == "llama.cpp" for r in g)
            p("")
            p(f"== {family} on {gpu} (wave{'/'.join(map(str, wave))}): instructions per weight in the hot loop (ipw), "
              f"VGPRs, waves per SIMD")
            if family == "matvec":
                p("   default = t32.u4.vx.sg (.vw for F16/BF16) as wgpu compiles it ('+': loops left nested in the hot"
                  " loop, ipw a lower bound); nb = without naga's loop bounding; best = lowest ipw without it")
            head = f"{'format':8}"
            if family == "matvec":
                head += f" {'default':>7} {'vgpr':>4} {'wav':>3} {'nb':>6} |"
            nb_built = any(r["source"] == "ours-unbounded" for r in g)
            head += f" {'best (no loop bounding)' if nb_built else 'best':28} {'ipw':>6} {'vgpr':>4} {'wav':>3}"
            if has_llama:
                head += f" | {'llama':>6} {'vgpr':>4} {'wav':>3} | {'nb/ll':>5}"
            p(head)
            for f in formats:
                ours = [r for r in g if r["format"] == f and r["source"] == "ours"]
                unb = [r for r in g if r["format"] == f and r["source"] == "ours-unbounded"] or ours
                if not ours:
                    continue
                line = f"{f:8}"
                d = next((r for r in ours if ours_variant(r, 4)), None)
                dn = next((r for r in unb if ours_variant(r, 4, "ours-unbounded")), None)
                if family == "matvec":
                    if d:
                        line += (f" {d['inst_per_weight']:6.2f}{'+' if d.get('nested_loops') else ' '}"
                                 f"{d.get('vgprs', 0):4} {d.get('waves_per_simd', 0):3}")
                    else:
                        line += f" {'-':>7} {'-':>4} {'-':>3}"
                    line += f" {fmt(dn['inst_per_weight'] if dn else None):>6} |"
                best = min(unb, key=lambda r: (r["inst_per_weight"], r.get("vgprs", 0)))
                name = best["variant"].split(".", 2)[2] if best["variant"].count(".") >= 2 else best["variant"]
                name = name[3:] if name.startswith("c1.") else name
                line += (f" {name:28} {best['inst_per_weight']:6.2f}{'+' if best.get('nested_loops') else ' '}"
                         f"{best.get('vgprs', 0):3} {best.get('waves_per_simd', 0):3}")
                if has_llama:
                    ll = next((r for r in g if r["format"] == f and r["source"] == "llama.cpp"), None)
                    if ll:
                        ratio = dn["inst_per_weight"] / ll["inst_per_weight"] if dn else None
                        line += (f" | {ll['inst_per_weight']:6.2f}{'+' if ll.get('nested_loops') else ' '}"
                                 f"{ll.get('vgprs', 0):3} {ll.get('waves_per_simd', 0):3} | {fmt(ratio):>5}")
                    else:
                        line += f" | {'-':>6} {'-':>4} {'-':>3} | {'-':>5}"
                p(line)
            if h200 and family == "matvec" and has_llama:
                p_h200(p, g, formats, h200, gpu)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write(text)


def p_h200(p, g, formats, h200, gpu):
    """The rank correlations of the instruction counts on `gpu` with the H200's matvec times (4096 x 4096, n = 1):
    of the variant that ran there (t32.u1.vx.sg, before the unrolled loop existed) as wgpu compiles it, and of
    the default t32.u4 variant without loop bounding (the same decoding per chunk, and a hot loop with no cold
    code: the rolled loop also carries the ragged end of one-value rows, counted though never run for blocks)."""
    data = []
    for f in formats:
        ran = next((r for r in g if r["format"] == f and ours_variant(r, 1)), None)
        nb = next((r for r in g if r["format"] == f and ours_variant(r, 4, "ours-unbounded")), None)
        ll = next((r for r in g if r["format"] == f and r["source"] == "llama.cpp"), None)
        if ran and nb and ll and f in h200:
            data.append((f, ran, nb, ll) + h200[f])
    if len(data) < 3:
        return
    t = [d[4] / d[5] for d in data]

    def rho(xs, ys=t):
        return f"{spearman(xs, ys):+.2f}"

    p(f"H200 (matvec n = 1, 4096 x 4096, {len(data)} formats), Spearman rank correlation with counts on {gpu}:")
    p(f"  ours/llama.cpp ipw vs our time / llama.cpp's: {rho([d[1]['inst_per_weight'] / d[3]['inst_per_weight'] for d in data])}"
      f" (t32.u1, what ran, as wgpu compiles it), {rho([d[2]['inst_per_weight'] / d[3]['inst_per_weight'] for d in data])}"
      f" (t32.u4, no loop bounding); llama.cpp's waves / ours: {rho([d[3]['waves_per_simd'] / d[1]['waves_per_simd'] for d in data])}")
    p(f"  our ipw vs our time: {rho([d[1]['inst_per_weight'] for d in data], [d[4] for d in data])} (u1),"
      f" {rho([d[2]['inst_per_weight'] for d in data], [d[4] for d in data])} (u4 nb);"
      f" llama.cpp's ipw vs its time: {rho([d[3]['inst_per_weight'] for d in data], [d[5] for d in data])},"
      f" its VGPRs vs its time: {rho([d[3]['vgprs'] for d in data], [d[5] for d in data])}")
    p("  format ipw ratio (u4 nb / llama.cpp) : time ratio (ours / llama.cpp), slowest against llama.cpp first:")
    items = [f"{d[0]} {d[2]['inst_per_weight'] / d[3]['inst_per_weight']:.1f}:{d[4] / d[5]:.2f}"
             for d in sorted(data, key=lambda d: -d[4] / d[5])]
    for i in range(0, len(items), 9):
        p("    " + "  ".join(items[i:i + 9]))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd = sys.argv[1]
    if cmd == "llama":
        llama_compile(sys.argv[2], sys.argv[3])
    elif cmd == "jobs":
        jobs(sys.argv[2], sys.argv[3])
    elif cmd == "summary":
        summary(sys.argv[2], sys.argv[3:])
    elif cmd == "loop":
        print(json.dumps(hot_loop(open(sys.argv[2]).read())))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
