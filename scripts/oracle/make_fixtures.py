#!/usr/bin/env python3
"""Generate codec oracle fixtures for all 36 live ggml types.

Usage: make_fixtures.py OUT_DIR

For every type: random blocks (fixed seed) in ragged shapes, decoded by every oracle that speaks for
the type:
  * "ggml"     ggml's compiled C (libggml-python's libggml-base.so): type_traits.to_float, plus the
               exported dequantize_row_q8_K for Q8_K;
  * "gguf-py"  gguf.quants.dequantize of PyPI gguf 0.19.0;
  * "rule:*"   an independent numpy rule written from the format spec (the decode rules in
               src/formats/*/*.rs cite it), for the types
               neither of the above decodes (and as a cross-check where they do).
Blocks whose reference decode is not finite are re-drawn, so random fixtures hold only finite values.
Exhaustive "edge" fixtures (all f16 / bf16 codes, every E8M0 exponent, every UE4M3 code, ...) keep
NaN/Inf on purpose.

Whenever two oracles decode the same blocks they must agree bit for bit (NaN == NaN); otherwise the
generator fails. Writes OUT_DIR/manifest.json plus raw blocks (*.bin) and little-endian f32 (*.f32).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import sys
import warnings

import ml_dtypes
import numpy as np
from gguf import GGMLQuantizationType, quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggml_lib import NAME_BY_ID, TYPES, Ggml, libggml_version  # noqa: E402

SEED = 20261130
# (tag, rows, blocks per row)
SHAPES = [("1 block", 1, 1), ("7 blocks", 1, 7), ("33 blocks", 1, 33), ("3 rows x 5 blocks", 3, 5)]

GGUF_PY_TYPES = {
    name
    for name in TYPES
    if hasattr(GGMLQuantizationType, name)
    and (
        name in ("F32", "F16")
        or GGMLQuantizationType[name] in quants._type_traits  # noqa: SLF001
    )
}


# ----------------------------------------------------------------------------------------------
# Independent rules (numpy, from the spec)


def _f16(b: np.ndarray, off: int) -> np.ndarray:
    return b[:, off : off + 2].copy().view("<f2").astype(np.float32).reshape(-1)


def rule_f32(blocks: np.ndarray) -> np.ndarray:
    return blocks.reshape(-1).view("<f4").copy()


def rule_f64(blocks: np.ndarray) -> np.ndarray:
    return blocks.reshape(-1).view("<f8").astype(np.float32)  # IEEE round-to-nearest-even


def rule_int(dtype: str):
    def f(blocks: np.ndarray) -> np.ndarray:
        return blocks.reshape(-1).view(dtype).astype(np.float32)  # exact / RNE

    return f


def rule_f8_e4m3(blocks: np.ndarray) -> np.ndarray:
    return blocks.reshape(-1).view(ml_dtypes.float8_e4m3fn).astype(np.float32)


def rule_q8_1(blocks: np.ndarray) -> np.ndarray:
    b = blocks.reshape(-1, 36)
    d = _f16(b, 0)  # s (bytes 2..3) is ignored
    qs = b[:, 4:36].view(np.int8).astype(np.float32)
    return (qs * d[:, None]).astype(np.float32).reshape(-1)


def rule_q8_k(blocks: np.ndarray) -> np.ndarray:
    b = blocks.reshape(-1, 292)
    d = b[:, 0:4].copy().view("<f4").reshape(-1)
    qs = b[:, 4:260].view(np.int8).astype(np.float32)
    return (d[:, None] * qs).astype(np.float32).reshape(-1)


def rule_q1_0(blocks: np.ndarray) -> np.ndarray:
    b = blocks.reshape(-1, 18)
    d = _f16(b, 0)
    bits = np.unpackbits(b[:, 2:18], axis=1, bitorder="little")  # LSB first, element j = bit j
    return np.where(bits == 1, d[:, None], -d[:, None]).astype(np.float32).reshape(-1)


def rule_q2_0(blocks: np.ndarray) -> np.ndarray:
    b = blocks.reshape(-1, 18)
    d = _f16(b, 0)
    qs = b[:, 2:18].astype(np.int32)
    q = np.stack([(qs >> (2 * k)) & 3 for k in range(4)], axis=2).reshape(-1, 64)
    return ((q - 1).astype(np.float32) * d[:, None]).astype(np.float32).reshape(-1)


RULES = {
    "F32": ("rule:f32-view", rule_f32),
    "F64": ("rule:numpy-f64-astype-f32", rule_f64),
    "I8": ("rule:numpy-int-astype-f32", rule_int("<i1")),
    "I16": ("rule:numpy-int-astype-f32", rule_int("<i2")),
    "I32": ("rule:numpy-int-astype-f32", rule_int("<i4")),
    "I64": ("rule:numpy-int-astype-f32", rule_int("<i8")),
    "F8_E4M3": ("rule:ml_dtypes-float8_e4m3fn", rule_f8_e4m3),
    "Q8_1": ("rule:q8_1-int8-times-d", rule_q8_1),
    "Q8_K": ("rule:q8_k-d-times-int8", rule_q8_k),
    "Q1_0": ("rule:q1_0-spec", rule_q1_0),
    "Q2_0": ("rule:q2_0-spec", rule_q2_0),
}


# ----------------------------------------------------------------------------------------------


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-exact equality, except that any NaN equals any NaN."""
    if a.shape != b.shape:
        return False
    ab, bb = a.view(np.uint32), b.view(np.uint32)
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all((ab == bb) | both_nan))


class Oracles:
    def __init__(self) -> None:
        self.ggml = Ggml()

    def for_type(self, name: str) -> list[tuple[str, object]]:
        """(oracle label, decode fn) for every oracle that speaks for `name`; first is primary."""
        tid = TYPES[name][0]
        out: list[tuple[str, object]] = []
        if self.ggml.can_decode(tid):
            out.append(("ggml", lambda blocks, tid=tid: self.ggml.decode(tid, blocks)))
        if name in GGUF_PY_TYPES:
            qt = GGMLQuantizationType[name]

            def gp(blocks: np.ndarray, qt=qt) -> np.ndarray:
                r = quants.dequantize(np.ascontiguousarray(blocks, dtype=np.uint8).reshape(-1), qt)
                return np.asarray(r, dtype=np.float32).reshape(-1)

            out.append(("gguf-py", gp))
        if name in RULES:
            out.append(RULES[name])
        return out


class Writer:
    def __init__(self, out_dir: str) -> None:
        self.out = out_dir
        self.fixtures: list[dict] = []
        self.cross_checks: list[dict] = []
        self.total_bytes = 0

    def _write(self, fname: str, data: bytes) -> None:
        with open(os.path.join(self.out, fname), "wb") as f:
            f.write(data)
        self.total_bytes += len(data)

    def add(self, name: str, kind: str, tag: str, shape: str, rows: int, blocks: np.ndarray, oracles) -> None:
        tid, blk, size = TYPES[name]
        blocks = np.ascontiguousarray(blocks, dtype=np.uint8).reshape(-1, size)
        n_blocks = blocks.shape[0]
        assert n_blocks % rows == 0
        bfile = f"{name}.{tag}.bin"
        self._write(bfile, blocks.tobytes())
        results = []
        for label, fn in oracles:
            y = np.asarray(fn(blocks), dtype=np.float32).reshape(-1)
            if y.size != n_blocks * blk:
                raise SystemExit(f"{name} {tag}: oracle {label} returned {y.size} values, want {n_blocks * blk}")
            results.append((label, y))
        ref_label, ref = results[0]
        for label, y in results[1:]:
            if not same_bits(ref, y):
                bad = np.nonzero(~((ref.view(np.uint32) == y.view(np.uint32)) | (np.isnan(ref) & np.isnan(y))))[0]
                i = int(bad[0])
                raise SystemExit(
                    f"ORACLES DISAGREE: {name} {tag}: {ref_label} vs {label}: {bad.size} values differ, "
                    f"first at {i}: {ref.view(np.uint32)[i]:#010x} vs {y.view(np.uint32)[i]:#010x}"
                )
            self.cross_checks.append({"type": name, "fixture": tag, "oracles": [ref_label, label]})
        labels = [lab for lab, _ in results]
        for label, y in results:
            # A rule that only cross-checks a ggml/gguf-py decode gets no fixture of its own.
            if label.startswith("rule:") and ref_label != label:
                continue
            efile = f"{name}.{tag}.{label.replace(':', '_')}.f32"
            self._write(efile, y.astype("<f4").tobytes())
            self.fixtures.append(
                {
                    "type": name,
                    "type_id": tid,
                    "oracle": label,
                    "kind": kind,
                    "shape": shape,
                    "rows": rows,
                    "n_blocks": n_blocks,
                    "n_values": int(y.size),
                    "blocks": bfile,
                    "expected": efile,
                    "agreed_with": [lab for lab in labels if lab != label],
                    "non_finite_values": int(np.count_nonzero(~np.isfinite(y))),
                }
            )


def random_blocks(name: str, n: int, rng: np.random.Generator, primary) -> np.ndarray:
    """n random blocks; any block whose primary-oracle decode is not all-finite is re-drawn."""
    tid, blk, size = TYPES[name]
    if name == "F64":
        # Random f64 bit patterns almost always overflow/underflow f32; draw values around the f32
        # range instead: random sign/mantissa, exponent in [-160, 140] (covers f32 subnormals, round
        # to zero and overflow to Inf, which are re-drawn), plus exact f32 values and RNE ties.
        sign = rng.choice([-1.0, 1.0], n)
        mant = 1.0 + rng.random(n)
        exp = rng.integers(-160, 128, n)
        vals = sign * mant * np.exp2(exp.astype(np.float64))
        k = n // 4
        if k:
            f32 = rng.standard_normal(k).astype(np.float32).astype(np.float64)
            vals[:k] = f32
            # halfway between two adjacent f32 values: ties to even
            nxt = np.nextafter(f32.astype(np.float32), np.float32(np.inf)).astype(np.float64)
            vals[k : 2 * k] = (f32 + nxt) / 2
        return vals.astype("<f8").view(np.uint8).reshape(n, 8)
    b = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for _ in range(1000):
        y = np.asarray(primary(b), dtype=np.float32).reshape(n, blk)
        bad = ~np.all(np.isfinite(y), axis=1)
        if not bad.any():
            return b
        b[bad] = rng.integers(0, 256, size=(int(bad.sum()), size), dtype=np.uint8)
    raise SystemExit(f"{name}: could not draw finite blocks")


def f16_bytes(vals) -> np.ndarray:
    return np.asarray(vals, dtype="<f2").view(np.uint8)


def edge_fixtures(w: Writer, orc: Oracles) -> None:
    # F16 / BF16: every code, as one tensor of 65536 elements.
    codes = np.arange(65536, dtype="<u2").view(np.uint8)
    w.add("F16", "edge", "all-codes", "65536 elements (every f16 code)", 1, codes, orc.for_type("F16"))
    w.add("BF16", "edge", "all-codes", "65536 elements (every bf16 code)", 1, codes, orc.for_type("BF16"))
    w.add("I16", "edge", "all-codes", "65536 elements (every i16 code)", 1, codes, orc.for_type("I16"))
    all8 = np.arange(256, dtype=np.uint8)
    w.add("I8", "edge", "all-codes", "256 elements (every i8 code)", 1, all8, orc.for_type("I8"))
    w.add("F8_E4M3", "edge", "all-codes", "256 elements (every e4m3fn code)", 1, all8, orc.for_type("F8_E4M3"))

    # F32 specials
    f32 = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 1.17549435e-38, 3.4028235e38, -3.4028235e38, 1.0, -2.5],
        dtype="<f4",
    )
    f32b = np.concatenate([f32.view(np.uint8), np.array([0x01, 0x00, 0x80, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF], dtype=np.uint8)])
    w.add("F32", "edge", "specials", "15 elements (zeros, inf, NaNs, subnormals, max)", 1, f32b, orc.for_type("F32"))

    # F64 edges: specials, f32 boundaries, ties, overflow and underflow.
    f32max = float(np.finfo(np.float32).max)
    ulp_at_max = 2.0**104
    f64 = np.array(
        [
            0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1.0 + 2.0**-24, 1.0 + 3 * 2.0**-24, 1.0 + 2.0**-23 + 2.0**-24,
            f32max, f32max + ulp_at_max / 2 - 1.0e20, f32max + ulp_at_max / 2, -f32max - ulp_at_max, 1e300, -1e300,
            2.0**-149, 2.0**-150, 2.0**-150 * 1.5, 2.0**-151, 2.0**-126, 2.0**-126 - 2.0**-150, 5e-324, -5e-324,
            float(np.finfo(np.float64).max), 0.1, 1.0 / 3.0, 16777217.0, -16777219.0,
        ],
        dtype="<f8",
    )
    w.add("F64", "edge", "specials", f"{f64.size} elements (specials, ties, f32 overflow/underflow)", 1, f64.view(np.uint8), orc.for_type("F64"))

    # I32 / I64 edges: exact range limits and round-to-nearest-even ties.
    i32 = np.array([0, 1, -1, 2**24, 2**24 + 1, 2**24 + 3, -(2**24) - 1, 2**31 - 1, -(2**31), 2**25 + 2, 2**25 + 6, 123456789], dtype="<i4")
    w.add("I32", "edge", "edges", f"{i32.size} elements (2^24 boundary, ties, limits)", 1, i32.view(np.uint8), orc.for_type("I32"))
    i64 = np.array(
        [0, -1, 2**24 + 1, 2**53 + 1, 2**63 - 1, -(2**63), 2**40 + 2**16, 2**40 + 2**16 + 1, 2**40 + 3 * 2**16, -(2**62) - 1, 9007199254740993],
        dtype="<i8",
    )
    w.add("I64", "edge", "edges", f"{i64.size} elements (ties, limits)", 1, i64.view(np.uint8), orc.for_type("I64"))

    rng = np.random.default_rng([SEED, 999])

    # MXFP4: one block per E8M0 exponent 0..255; each block holds all 16 E2M1 codes in both nibbles.
    qs = (np.arange(16) | ((15 - np.arange(16)) << 4)).astype(np.uint8)
    mx = np.concatenate([np.full((256, 1), 0, np.uint8), np.tile(qs, (256, 1))], axis=1)
    mx[:, 0] = np.arange(256, dtype=np.uint8)
    w.add("MXFP4", "edge", "all-e8m0", "256 blocks (every E8M0 exponent x every E2M1 code)", 1, mx, orc.for_type("MXFP4"))

    # NVFP4: 64 blocks x 4 sub-block scales = every UE4M3 code; each sub-block holds all 16 codes.
    nv = np.zeros((64, 36), np.uint8)
    nv[:, 0:4] = np.arange(256, dtype=np.uint8).reshape(64, 4)
    sub = (np.arange(8) | ((np.arange(8) + 8) << 4)).astype(np.uint8)
    nv[:, 4:36] = np.tile(sub, 4)
    w.add("NVFP4", "edge", "all-ue4m3", "64 blocks (every UE4M3 scale code x every E2M1 code)", 1, nv, orc.for_type("NVFP4"))

    # Q8_0 / Q8_1: qs all -128 (0x80), and the full byte range, with assorted finite scales.
    scales = [1.0, -1.0, 0.0078125, 65504.0, -65504.0, 6e-8, 2.0**-14, 3.14]
    q8 = np.zeros((len(scales) + 8, 34), np.uint8)
    q8[: len(scales), 0:2] = f16_bytes(scales).reshape(-1, 2)
    q8[: len(scales), 2:] = 0x80
    q8[len(scales) :, 0:2] = f16_bytes(rng.standard_normal(8) * 0.01).reshape(-1, 2)
    q8[len(scales) :, 2:] = np.arange(256, dtype=np.uint8).reshape(8, 32)
    w.add("Q8_0", "edge", "minus128", f"{q8.shape[0]} blocks (qs = -128 with extreme scales; every int8)", 1, q8, orc.for_type("Q8_0"))
    q81 = np.zeros((q8.shape[0], 36), np.uint8)
    q81[:, 0:2] = q8[:, 0:2]
    q81[:, 2:4] = f16_bytes(rng.standard_normal(q8.shape[0])).reshape(-1, 2)
    q81[:, 4:] = q8[:, 2:]
    w.add("Q8_1", "edge", "minus128", f"{q81.shape[0]} blocks (qs = -128 with extreme scales; every int8)", 1, q81, orc.for_type("Q8_1"))

    # f16 subnormal / max / negative block scales for every f16-scaled type with ggml to_float:
    # byte 0..1 of the block is `d` for Q4_0/Q4_1/Q5_0/Q5_1/Q1_0/Q2_0/IQ*; for K-quants d sits at the end.
    d_off = {"Q4_0": 0, "Q4_1": 0, "Q5_0": 0, "Q5_1": 0, "IQ4_NL": 0, "IQ4_XS": 0, "IQ2_XXS": 0, "IQ2_XS": 0,
             "IQ2_S": 0, "IQ3_XXS": 0, "IQ3_S": 0, "IQ1_S": 0, "Q1_0": 0, "Q2_0": 0,
             "Q2_K": 80, "Q3_K": 108, "Q4_K": 0, "Q5_K": 0, "Q6_K": 208, "TQ1_0": 52, "TQ2_0": 64}
    special_d = [2.0**-24, -(2.0**-24), 6.1e-5, 65504.0, -65504.0, 0.0, -0.0, 1.0]
    for name, off in d_off.items():
        _, _, size = TYPES[name]
        b = rng.integers(0, 256, size=(len(special_d), size), dtype=np.uint8)
        b[:, off : off + 2] = f16_bytes(special_d).reshape(-1, 2)
        if name in ("Q4_1", "Q5_1"):
            b[:, 2:4] = f16_bytes([0.5] * len(special_d)).reshape(-1, 2)
        if name in ("Q2_K", "Q4_K", "Q5_K"):
            moff = {"Q2_K": 82, "Q4_K": 2, "Q5_K": 2}[name]
            b[:, moff : moff + 2] = f16_bytes(special_d[::-1]).reshape(-1, 2)
        w.add(name, "edge", "extreme-d", f"{len(special_d)} blocks (subnormal, +-max, +-0 f16 scales)", 1, b, orc.for_type(name))


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    np.seterr(all="ignore")  # edge fixtures overflow to Inf on purpose
    warnings.simplefilter("ignore", RuntimeWarning)
    orc = Oracles()
    w = Writer(out)

    for name, (tid, _blk, _size) in TYPES.items():
        oracles = orc.for_type(name)
        if not oracles:
            raise SystemExit(f"no oracle for {name}")
        primary = oracles[0][1]
        for si, (shape, rows, per_row) in enumerate(SHAPES):
            rng = np.random.default_rng([SEED, tid, si])
            n = rows * per_row
            b = random_blocks(name, n, rng, primary)
            tag = shape.replace(" ", "")
            w.add(name, "random", tag, shape, rows, b, oracles)
    edge_fixtures(w, orc)

    # Coverage: every type has >= 1 fixture, and one from each oracle able to decode it.
    coverage: dict[str, dict] = {}
    for name, (tid, _blk, _size) in TYPES.items():
        labels = [lab for lab, _ in orc.for_type(name)]
        fx = [f for f in w.fixtures if f["type"] == name]
        got = sorted({f["oracle"] for f in fx})
        speaks = [lab for lab in labels if not lab.startswith("rule:") or lab == labels[0]]
        missing = [lab for lab in speaks if lab not in got]
        if not fx or missing:
            raise SystemExit(f"coverage: {name} has fixtures from {got}, missing {missing}")
        coverage[name] = {
            "type_id": tid,
            "fixture_oracles": got,
            "cross_checked_by": [lab for lab in labels if lab not in got],
            "n_fixtures": len(fx),
        }

    g = orc.ggml
    manifest = {
        "format": "gguf-dequant oracle fixtures v1",
        "generator_sha256": hashlib.sha256(open(__file__, "rb").read()).hexdigest(),
        "seed": SEED,
        "versions": {
            "libggml-python": libggml_version(),
            "gguf": importlib.metadata.version("gguf"),
            "numpy": np.__version__,
            "ml_dtypes": importlib.metadata.version("ml_dtypes"),
        },
        "libggml_base": g.path,
        "oracles": {
            "ggml": sorted(
                [NAME_BY_ID[t] for t in g.traits if g.can_decode(t)], key=lambda n: TYPES[n][0]
            ),
            "ggml_to_float": sorted([NAME_BY_ID[t] for t in g.traits if g.has_to_float(t)], key=lambda n: TYPES[n][0]),
            "ggml_no_to_float": sorted([NAME_BY_ID[t] for t in g.traits if not g.has_to_float(t)], key=lambda n: TYPES[n][0]),
            "gguf-py": sorted(GGUF_PY_TYPES, key=lambda n: TYPES[n][0]),
            "rules": {name: RULES[name][0] for name in RULES},
        },
        "coverage": coverage,
        "n_cross_checks": len(w.cross_checks),
        "fixtures": w.fixtures,
    }
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    n_or = {k: len(v) for k, v in manifest["oracles"].items() if isinstance(v, list)}
    print(
        f"fixtures: {len(w.fixtures)} for {len(coverage)} types, {w.total_bytes / 1e6:.1f} MB, "
        f"{len(w.cross_checks)} oracle cross-checks passed; oracle type counts {n_or}"
    )
    if w.total_bytes > 20e6:
        raise SystemExit("fixtures exceed 20 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
