//! Scalar helpers shared by the codecs: little-endian loads and the scale encodings of spec §2.
//!
//! The names are mirrored by the WGSL helpers in `shaders/lib/` (`u16_le`, `f16_le`, `e8m0_half`,
//! `ue4m3_half`, `get_scale_min_k4`, ...), so a codec reads the same in both languages.

use half::bf16;

/// Little-endian u16 at byte `off` of `b`.
#[inline(always)]
pub fn u16_le(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

/// Little-endian u32 at byte `off` of `b` (any alignment: blocks are tightly packed, spec §1).
#[inline(always)]
pub fn u32_le(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// Little-endian f32 at byte `off` of `b`.
#[inline(always)]
pub fn f32_le(b: &[u8], off: usize) -> f32 {
    f32::from_bits(u32_le(b, off))
}

/// Shift from the f16 exponent/mantissa fields to the f32 ones (23 - 10 mantissa bits).
const F16_TO_F32_SHIFT: u32 = 13;
/// f16 exponent/mantissa bits (everything but the sign).
const F16_MAG_MASK: u32 = 0x7FFF;
/// Smallest f16 magnitude bits with exponent 31 (Inf; above it NaN).
const F16_INF_BITS: u32 = 0x7C00;
/// 2^112 = 2^(127 - 15): rebiases the exponent of `mag << 13` from f16 to f32.
const F16_REBIAS: f32 = 5.192_297e33;
/// The f32 exponent field, all ones.
const F32_EXP_MASK: u32 = 0x7F80_0000;
/// The f32 quiet-NaN bit (set as ggml's conversion does, spec §2.1).
const F32_QUIET_BIT: u32 = 0x0040_0000;

const _: () = assert!(F16_REBIAS == (1u128 << 112) as f32);

/// IEEE binary16 bits to f32, exact including subnormals (spec §2.1; NaN stays NaN, quieted).
///
/// Integer ops and one exact power-of-two multiply, as the WGSL twin does: `mag << 13` puts the
/// f16 exponent and mantissa in the f32 fields (an f16 subnormal becomes an f32 subnormal with the
/// same mantissa), and × 2^112 rebiases the exponent exactly. Exponent 31 maps to 255.
#[inline(always)]
pub fn f16_bits(bits: u16) -> f32 {
    let h = bits as u32;
    let sign = (h & 0x8000) << 16;
    let mag = h & F16_MAG_MASK;
    let shifted = mag << F16_TO_F32_SHIFT;
    // Both candidates, then a select (branch-free).
    let finite = (f32::from_bits(shifted) * F16_REBIAS).to_bits();
    let nan = if mag > F16_INF_BITS { F32_QUIET_BIT } else { 0 };
    let special = shifted | F32_EXP_MASK | nan;
    let out = if mag >= F16_INF_BITS { special } else { finite };
    f32::from_bits(out | sign)
}

/// Little-endian f16 at byte `off` of `b`, as f32 (spec §2.1).
#[inline(always)]
pub fn f16_le(b: &[u8], off: usize) -> f32 {
    f16_bits(u16_le(b, off))
}

/// Little-endian bf16 at byte `off` of `b`, as f32: the bits shifted up by 16 (spec §2.2).
#[inline(always)]
pub fn bf16_le(b: &[u8], off: usize) -> f32 {
    bf16::from_bits(u16_le(b, off)).to_f32()
}

/// Bits of the f32 2^-128 (the subnormal that E8M0 code 0 halves to).
const E8M0_HALF_SUBNORMAL_BITS: u32 = 0x0020_0000;
/// Position of the f32 exponent field.
const F32_EXP_SHIFT: u32 = 23;

/// ggml's `ggml_e8m0_to_fp32_half`: the MXFP4 scale `2^(e-128)` (spec §2.3). Codes 0 and 1 give the
/// f32 subnormals 2^-128 and 2^-127, built exactly; 255 gives 2^127 (finite, not NaN).
#[inline(always)]
pub fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        E8M0_HALF_SUBNORMAL_BITS << e
    } else {
        (e as u32 - 1) << F32_EXP_SHIFT
    };
    f32::from_bits(bits)
}

/// UE4M3 code that ggml decodes as 0 although E4M3 calls it NaN.
const UE4M3_NAN: u8 = 0x7F;
/// f32 exponent bias minus E4M3 exponent bias (127 - 7).
const E4M3_TO_F32_BIAS: u32 = 120;
/// E4M3 subnormal step, 2^-9.
const E4M3_SUBNORMAL_STEP: f32 = 1.0 / 512.0;

/// ggml's `ggml_ue4m3_to_fp32`: an NVFP4 sub-block scale, **already halved** (spec §2.5). Bit 7 is
/// ignored (not a sign); 0x00 and 0x7F give 0.
#[inline(always)]
pub fn ue4m3_half(x: u8) -> f32 {
    if x == 0 || x == UE4M3_NAN {
        return 0.0;
    }
    let e = ((x >> 3) & 0xF) as u32;
    let m = (x & 7) as u32;
    let raw = if e == 0 {
        m as f32 * E4M3_SUBNORMAL_STEP
    } else {
        f32::from_bits(((e + E4M3_TO_F32_BIAS) << F32_EXP_SHIFT) | (m << (F32_EXP_SHIFT - 3)))
    };
    raw * 0.5
}

/// OCP FP8 E4M3FN code to f32 (spec §2.6): sign bit 7, bias 7, 0x7F and 0xFF are NaN, no infinities.
pub const fn e4m3_to_f32(x: u8) -> f32 {
    let sign = if x & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((x >> 3) & 0xF) as u32;
    let m = (x & 7) as u32;
    if e == 0xF && m == 7 {
        return f32::NAN;
    }
    let mag = if e == 0 {
        m as f32 * E4M3_SUBNORMAL_STEP
    } else {
        f32::from_bits(((e + E4M3_TO_F32_BIAS) << F32_EXP_SHIFT) | (m << (F32_EXP_SHIFT - 3)))
    };
    sign * mag
}

/// ggml's `get_scale_min_k4`: the 6-bit (scale, min) of sub-block `j` (0..8) from the 12 packed
/// bytes `k` of a Q4_K / Q5_K block (spec §4.11).
#[inline(always)]
pub fn get_scale_min_k4(j: usize, k: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (k[j] & 63, k[j + 4] & 63)
    } else {
        (
            (k[j + 4] & 0xF) | ((k[j - 4] >> 6) << 4),
            (k[j + 4] >> 4) | ((k[j] >> 6) << 4),
        )
    }
}

/// The `N` bytes at `off` of `b`, copied into an array (offsets are compile-time constants in the
/// codecs, so this folds to plain loads).
#[inline(always)]
pub fn bytes_at<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&b[off..off + N]);
    a
}

/// Runs a per-block decoder over the whole blocks of `src`, writing `ELEMS` values per block into
/// `dst`. Blocks past the end of either slice are ignored; the driver (`crate::cpu`) checks sizes.
#[inline(always)]
pub fn dequant_blocks<const BYTES: usize, const ELEMS: usize>(
    src: &[u8],
    dst: &mut [f32],
    block: impl Fn(&[u8; BYTES], &mut [f32; ELEMS]),
) {
    debug_assert_eq!(src.len() / BYTES * ELEMS, dst.len());
    let (blocks, _) = src.as_chunks::<BYTES>();
    let (outs, _) = dst.as_chunks_mut::<ELEMS>();
    for (b, y) in blocks.iter().zip(outs.iter_mut()) {
        // An empty optimisation barrier keeps LLVM from vectorising *across* blocks (4 blocks
        // per lane, gathering bytes), which it otherwise does for the small formats and which is
        // ~2x slower than vectorising within a block. It costs nothing at run time.
        std::hint::black_box(());
        block(b, y);
    }
}

/// Values the half-precision rows decode at a time before rounding them: a run small enough to
/// stay in registers and L1, a multiple of every block size.
pub const HALF_RUN: usize = 256;

/// [`dequant_blocks`] for the half-precision rows whose rounding is inlined: each block decoded
/// into a local array and rounded into `dst` by `to_half` straight away. A fixed-size array per
/// block, never sliced by a run-time length, so that LLVM keeps the block's values in registers
/// however it partitions the crate (through one array of [`HALF_RUN`] values sliced per call,
/// Q6_K's f16 row went through memory in some builds: 0.76 of the f32 row's values per second,
/// not 0.95, Zen 5). `to_half`'s third argument says that `no_subnormals` holds for the block.
#[inline(always)]
pub fn half_each_block<const BYTES: usize, const ELEMS: usize>(
    src: &[u8],
    dst: &mut [[u8; 2]],
    block: impl Fn(&[u8; BYTES], &mut [f32; ELEMS]),
    no_subnormals: impl Fn(&[u8; BYTES]) -> bool,
    to_half: impl Fn(&[f32], &mut [[u8; 2]], bool),
) {
    let (blocks, _) = src.as_chunks::<BYTES>();
    let (outs, _) = dst.as_chunks_mut::<ELEMS>();
    let mut y = [0.0f32; ELEMS];
    for (b, o) in blocks.iter().zip(outs.iter_mut()) {
        // As in `dequant_blocks`: vectorise within a block, not across blocks.
        std::hint::black_box(());
        block(b, &mut y);
        to_half(&y, o, no_subnormals(b));
    }
}

/// [`dequant_blocks`] for the half-precision rows whose rounding is an out-of-line call:
/// [`HALF_RUN`] values per call (`HALF_RUN / ELEMS` blocks) decoded into a local array and rounded
/// into `dst` by `to_half`, which spreads the call's cost (NVFP4's 64-value blocks).
/// `to_half`'s third argument says that `no_subnormals` holds for every block of the call.
#[inline(always)]
pub fn half_blocks<const BYTES: usize, const ELEMS: usize>(
    src: &[u8],
    dst: &mut [[u8; 2]],
    block: impl Fn(&[u8; BYTES], &mut [f32; ELEMS]),
    no_subnormals: impl Fn(&[u8; BYTES]) -> bool,
    to_half: impl Fn(&[f32], &mut [[u8; 2]], bool),
) {
    let per_call = (HALF_RUN / ELEMS).max(1);
    let (blocks, _) = src.as_chunks::<BYTES>();
    let (outs, _) = dst.as_chunks_mut::<ELEMS>();
    let mut y = [0.0f32; HALF_RUN];
    let (y, _) = y.as_chunks_mut::<ELEMS>();
    for (blocks, outs) in blocks.chunks(per_call).zip(outs.chunks_mut(per_call)) {
        for (b, y) in blocks.iter().zip(y.iter_mut()) {
            // As in `dequant_blocks`: vectorise within a block, not across blocks.
            std::hint::black_box(());
            block(b, y);
        }
        let n = blocks.len();
        let normal = blocks.iter().all(&no_subnormals);
        to_half(y[..n].as_flattened(), outs.as_flattened_mut(), normal);
    }
}

/// Blocks per rounding call of [`half_by_code`].
const CODE_GROUP: usize = 16;

/// The half-precision rows of a format whose block takes at most `K` distinct values, one per code
/// (TQ1_0's `-d, 0 * d, d`; Q1_0's `-d, d`). `values` gives a block's `K` values as its f32 row
/// computes them; `to_half` rounds them for a group of blocks at a time; `select` writes each
/// element's rounded bits by its code (with [`pick`]). No per-value arithmetic or rounding, and
/// every output is the rounding of the f32 row's value.
#[inline(always)]
pub fn half_by_code<const BYTES: usize, const ELEMS: usize, const K: usize>(
    src: &[u8],
    dst: &mut [[u8; 2]],
    values: impl Fn(&[u8; BYTES]) -> [f32; K],
    select: impl Fn(&[u8; BYTES], &[u16; K], &mut [u16; ELEMS]),
    to_half: impl Fn(&[f32], &mut [[u8; 2]]),
) {
    let (blocks, _) = src.as_chunks::<BYTES>();
    let (outs, _) = dst.as_chunks_mut::<ELEMS>();
    let mut bits = [0u16; ELEMS];
    for (blocks, outs) in blocks.chunks(CODE_GROUP).zip(outs.chunks_mut(CODE_GROUP)) {
        let mut vals = [[0.0f32; K]; CODE_GROUP];
        for (v, b) in vals.iter_mut().zip(blocks) {
            *v = values(b);
        }
        let mut halves = [[[0u8; 2]; K]; CODE_GROUP];
        let n = blocks.len();
        to_half(vals[..n].as_flattened(), halves[..n].as_flattened_mut());
        for ((b, o), h) in blocks.iter().zip(outs.iter_mut()).zip(&halves) {
            // As in `dequant_blocks`: vectorise within a block, not across blocks.
            std::hint::black_box(());
            select(b, &h.map(u16::from_le_bytes), &mut bits);
            for (o, v) in o.iter_mut().zip(bits) {
                *o = v.to_le_bytes();
            }
        }
    }
}

/// `h[code]`, by masks rather than an index or branches (the codes are random): compares and ands
/// that vectorise. 0 for a code past `K`.
#[inline(always)]
pub fn pick<const K: usize>(code: u8, h: &[u16; K]) -> u16 {
    let mut v = 0;
    for (k, h) in h.iter().enumerate() {
        v |= h & 0u16.wrapping_sub((code as usize == k) as u16);
    }
    v
}

/// The half-precision rows of an element-wise body: runs of [`HALF_RUN`] values decoded by
/// `decode` into a local array and rounded into `dst` by `to_half` (told whether
/// `no_subnormals` holds for every block of the run).
#[inline(always)]
pub fn half_runs<const BYTES: usize, const ELEMS: usize>(
    src: &[u8],
    dst: &mut [[u8; 2]],
    decode: impl Fn(&[u8], &mut [f32]),
    no_subnormals: impl Fn(&[u8; BYTES]) -> bool,
    to_half: impl Fn(&[f32], &mut [[u8; 2]], bool),
) {
    let mut y = [0.0f32; HALF_RUN];
    let step = HALF_RUN / ELEMS * BYTES;
    for (s, o) in src.chunks(step).zip(dst.chunks_mut(HALF_RUN)) {
        let y = &mut y[..o.len()];
        decode(s, y);
        let normal = s.as_chunks::<BYTES>().0.iter().all(&no_subnormals);
        to_half(y, o, normal);
    }
}

/// `y` rounded into `o` by `cvt`, `N` values at a time; the last, partial vector is padded,
/// so that the whole stays small enough for LLVM to inline into every row.
#[inline(always)]
pub(crate) fn by_vectors<const N: usize>(
    y: &[f32],
    o: &mut [[u8; 2]],
    cvt: impl Fn([f32; N]) -> [[u8; 2]; N],
) {
    let (vs, v_rest) = y.as_chunks::<N>();
    let (os, o_rest) = o.as_chunks_mut::<N>();
    for (v, o) in vs.iter().zip(os.iter_mut()) {
        *o = cvt(*v);
    }
    if !v_rest.is_empty() {
        let mut v = [0.0; N];
        v[..v_rest.len()].copy_from_slice(v_rest);
        o_rest.copy_from_slice(&cvt(v)[..o_rest.len()]);
    }
}

/// Rounding f32 to f16 (to nearest, ties to even; `half`'s rounding, and the F16C / AVX-512
/// `vcvtps2ph` instruction's), little-endian, for the half-precision rows; one function per
/// instruction-set level, the widest the row's clone has.
pub(crate) mod f16_run {
    use super::by_vectors;
    use half::f16;

    /// Value by value, with `half` (which is the instruction-exact software rounding).
    #[inline(always)]
    pub fn soft(y: &[f32], o: &mut [[u8; 2]]) {
        for (o, v) in o.iter_mut().zip(y) {
            *o = f16::from_f32(*v).to_bits().to_le_bytes();
        }
    }

    /// 8 values per F16C `vcvtps2ph`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx,f16c")]
    #[inline]
    pub fn f16c(y: &[f32], o: &mut [[u8; 2]]) {
        use std::arch::x86_64::{__m256, _mm256_cvtps_ph, _MM_FROUND_TO_NEAREST_INT};
        by_vectors(y, o, |v: [f32; 8]| {
            let x: __m256 = bytemuck::cast(v);
            bytemuck::cast(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x))
        });
    }

    /// 16 values per AVX-512 `vcvtps2ph`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub fn avx512(y: &[f32], o: &mut [[u8; 2]]) {
        use std::arch::x86_64::{__m512, _mm512_cvtps_ph, _MM_FROUND_TO_NEAREST_INT};
        by_vectors(y, o, |v: [f32; 16]| {
            let x: __m512 = bytemuck::cast(v);
            bytemuck::cast(_mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x))
        });
    }

    /// [`avx512`], in a clone that also has AVX512-BF16 (which f16 has no use for; nor for
    /// bf16's `no_subnormals`: `vcvtps2ph` rounds subnormals exactly).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[inline]
    pub fn avx512bf16(y: &[f32], o: &mut [[u8; 2]], _no_subnormals: bool) {
        avx512(y, o)
    }

    /// The widest of the three the CPU has, picked at run time: an out-of-line call (the flag
    /// as [`avx512bf16`]'s).
    #[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx+f16c"))]
    pub fn widest(y: &[f32], o: &mut [[u8; 2]], _no_subnormals: bool) {
        multiversion::target::match_target! {
            "x86_64+avx512f" => avx512(y, o),
            "x86_64+avx+f16c" => f16c(y, o),
            _ => soft(y, o),
        }
    }
}

/// Rounding f32 to bf16 exactly as `half::bf16::from_f32` does (to nearest, ties to even; a NaN
/// keeps its sign and top mantissa bits and gets the quiet bit), little-endian: branch-free
/// integer operations (explicit AVX-512 intrinsics in the v4 clones), or AVX512-BF16's
/// `vcvtneps2bf16` where the clone has it; one function per instruction-set level, as f16's.
pub(crate) mod bf16_run {
    use super::by_vectors;

    /// One value.
    #[inline(always)]
    fn round(v: f32) -> [u8; 2] {
        let x = v.to_bits();
        let nan = (x & 0x7FFF_FFFF) > 0x7F80_0000;
        // Adding 0x7FFF and the kept part's lowest bit carries into it exactly when the dropped
        // half is above a tie, or a tie with an odd kept part (a carry out of the top needs x
        // past 0xFFFF_8000, a NaN).
        let rounded = x.wrapping_add(0x7FFF + ((x >> 16) & 1)) >> 16;
        let bits = if nan { (x >> 16) | 0x40 } else { rounded };
        (bits as u16).to_le_bytes()
    }

    /// The rounding, value by value.
    #[inline(always)]
    pub fn soft(y: &[f32], o: &mut [[u8; 2]]) {
        for (o, v) in o.iter_mut().zip(y) {
            *o = round(*v);
        }
    }

    /// [`soft`], in a clone with F16C.
    #[inline(always)]
    pub fn f16c(y: &[f32], o: &mut [[u8; 2]]) {
        soft(y, o)
    }

    /// [`soft`]'s operations on one AVX-512 vector of 16 values.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn vector(v: [f32; 16]) -> [[u8; 2]; 16] {
        use std::arch::x86_64::*;
        let x: __m512i = bytemuck::cast(v);
        let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(x), _mm512_set1_epi32(1));
        let bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF));
        let rounded = _mm512_srli_epi32::<16>(_mm512_add_epi32(x, bias));
        let abs = _mm512_and_si512(x, _mm512_set1_epi32(0x7FFF_FFFF));
        let nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7F80_0000));
        let quiet = _mm512_or_si512(_mm512_srli_epi32::<16>(x), _mm512_set1_epi32(0x40));
        let bits = _mm512_mask_blend_epi32(nan, rounded, quiet);
        bytemuck::cast(_mm512_cvtepi32_epi16(bits))
    }

    /// [`soft`] 16 values per AVX-512 vector, in integer operations (LLVM vectorises the loop
    /// of [`soft`] with a set-up and a tail that cost per block: half the f32 row's speed on
    /// Zen 4).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub fn avx512(y: &[f32], o: &mut [[u8; 2]]) {
        by_vectors(y, o, |v: [f32; 16]| vector(v))
    }

    /// [`soft`] by AVX512-BF16's `vcvtneps2bf16`, 16 values per instruction: the same rounding
    /// and NaNs (sign and top bits kept, quiet bit set), except that it flushes subnormal inputs
    /// to zero; a run holding one (AVX512-DQ's `vfpclassps`, one instruction per vector) is
    /// rounded by [`vector`] instead. The check is one branch per run, not one per vector, so
    /// that LLVM unrolls both passes over a block and keeps its values in registers (a branch
    /// per vector kept the block in memory, a store and a load per vector: TQ2_0's bf16 row ran
    /// at 0.64 of its f16 row's speed on one thread, Zen 5). `no_subnormals`: the caller knows
    /// that `y` holds none (its format's `no_subnormals` held for each block), so there is no
    /// check at all (which still cost Q6_K 15 % and MXFP4 16 % of the bf16 row's time, Zen 5).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq,avx512bf16")]
    #[inline]
    pub fn avx512bf16(y: &[f32], o: &mut [[u8; 2]], no_subnormals: bool) {
        use std::arch::x86_64::*;
        /// `vfpclassps` category: denormal.
        const DENORMAL: i32 = 0x20;
        let denormal = |v: [f32; 16]| _mm512_fpclass_ps_mask::<DENORMAL>(bytemuck::cast(v));
        if !no_subnormals {
            let (vs, rest) = y.as_chunks::<16>();
            let mut found = vs.iter().fold(0, |m, v| m | denormal(*v));
            if !rest.is_empty() {
                let mut v = [0.0; 16];
                v[..rest.len()].copy_from_slice(rest);
                found |= denormal(v);
            }
            if found != 0 {
                return by_vectors(y, o, |v: [f32; 16]| vector(v));
            }
        }
        by_vectors(y, o, |v: [f32; 16]| {
            bytemuck::cast(_mm512_cvtneps_pbh(bytemuck::cast(v)))
        })
    }

    /// [`soft`], at the widest the CPU has: an out-of-line call (`no_subnormals` as
    /// [`avx512bf16`]'s).
    #[multiversion::multiversion(targets(
        "x86_64+avx512f+avx512bw+avx512dq+avx512bf16",
        "x86_64+avx512f+avx512bw",
        "x86_64+avx2"
    ))]
    pub fn widest(y: &[f32], o: &mut [[u8; 2]], no_subnormals: bool) {
        // Only the AVX512-BF16 clone reads the flag.
        let _ = no_subnormals;
        multiversion::target::match_target! {
            "x86_64+avx512dq+avx512bf16" => avx512bf16(y, o, no_subnormals),
            "x86_64+avx512f" => avx512(y, o),
            _ => soft(y, o),
        }
    }
}

/// Defines a codec's row decoders, each compiled once per x86-64 level with the best one the CPU
/// has picked at the first call (`multiversion`, runtime detection):
///
/// * `pub fn dequant_row(src: &[u8], dst: &mut [f32])`: v3 (AVX2, FMA, F16C), v2 (SSE4.2) and the
///   baseline, and v4 (AVX-512) first with a leading `f32_rows = avx512,`, for the formats whose
///   decoder LLVM vectorises better at 512 bits (the codec says which, with the figures);
/// * `pub fn dequant_row_f16(src: &[u8], dst: &mut [[u8; 2]])` and `dequant_row_bf16`: the same
///   decode with each block's values rounded to f16 / bf16 (to nearest, ties to even, as `half`
///   rounds) and stored little-endian as soon as they are decoded, with no f32 pass over memory
///   in between; v4 (AVX-512: `vcvtps2ph` 16 values at a time), v3 (F16C, 8 at a time), v2 and
///   the baseline. `half_rows = avx2` leaves out the v4 clone, for the formats whose decoder
///   LLVM vectorises worse at 512 bits (the codec says which, with the figures); their v3 clone
///   rounds through `widest` (an out-of-line call: AVX-512 where the CPU has it), each call
///   [`HALF_RUN`] values long.
///
/// Every version performs the same IEEE operations in the same order (Rust never fuses a multiply
/// and an add), so the output is bit-identical on every CPU; only the width of the vector
/// instructions differs.
///
/// `dequant_row!(dequant_block)` runs the format's block decoder over every whole block;
/// `dequant_row!(|src, dst| { ... })` gives an element-wise body (the half rows run it on runs of
/// [`HALF_RUN`] values). Either may be followed by `, half = |src, dst, to_half| { ... }`, the half
/// rows' own body, which rounds with `to_half(&[f32], &mut [[u8; 2]])` (the f16 or the bf16
/// rounding). The options come first, in this order: `f32_lines = ROW, `, `f32_rows = avx512, `,
/// `half_rows = avx2, `, `no_subnormals = |b| EXPR, ` and `half_tables, `. `f32_lines = ROW` names
/// the format's AVX-512 row that writes a cache line per store ([`crate::formats::lines`]):
/// `dequant_row` then runs it where [`lines::wanted`](crate::formats::lines::wanted) says so, and
/// the row clones (in the module `vector`) everywhere else. `half_tables` runs the format's table
/// rows ([`crate::formats::permute`], the module `tables` that [`table_row!`] defines) for f16 and
/// bf16 where the CPU has AVX-512BW, and the row clones (in the module `clones`) elsewhere.
/// `no_subnormals` is true for a block `b: &[u8; BYTES]` none of whose f32 values is subnormal: the
/// bf16 rows then round it with AVX512-BF16's `vcvtneps2bf16` (which flushes subnormals) without
/// looking for one first. Every value computed by a few f32 multiplies and adds from f16 scales
/// (multiples of 2^-24) and small integers or eighths is zero or far above 2^-126: a product of
/// nonzero values at least 2^-30 is at least 2^-60, and a sum of multiples of 2^-k (every f32 at
/// least 2^-30 is one of 2^-53) is zero or at least 2^-k, both kept by rounding. The codec says why
/// its predicate holds; the test `half_rows_round_the_f32_row_on_random_bytes` checks it on blocks
/// of random and tiny scales.
macro_rules! dequant_row {
    (f32_lines = $lines:ident, $($rest:tt)*) => {
        /// The format's row clones, which [`dequant_row`] runs where the line row is not wanted.
        pub(crate) mod vector {
            use super::*;
            $crate::formats::common::dequant_row!($($rest)*);
        }
        pub use vector::{dequant_row_bf16, dequant_row_f16};

        /// Decodes whole blocks of `src` into `dst` (`dst.len() == src.len() / BYTES * ELEMS`):
        /// by the line row where the CPU is an Intel one with AVX-512 and `dst` starts off a
        /// cache line (`lines::wanted`), else by the row clones; the same bits either way.
        pub fn dequant_row(src: &[u8], dst: &mut [f32]) {
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            if $crate::formats::lines::wanted(dst) {
                // SAFETY: `wanted` checked that the CPU has AVX-512F and AVX-512BW.
                return unsafe { $lines(src, dst) };
            }
            vector::dequant_row(src, dst)
        }
    };
    (@entry $f32:ident, $half:ident; no_subnormals = |$b:pat_param| $normal:expr, $($rest:tt)*) => {
        $crate::formats::common::dequant_row!(@body $f32, $half, (|$b: &[u8; BYTES]| $normal); $($rest)*);
    };
    (@entry $f32:ident, $half:ident; $($rest:tt)*) => {
        $crate::formats::common::dequant_row!(@body $f32, $half, (|_: &[u8; BYTES]| false); $($rest)*);
    };
    (@body $f32:ident, $half:ident, $normal:tt; half_tables, $($rest:tt)*) => {
        /// The format's row clones, which its half rows run where the CPU lacks AVX-512BW.
        pub(crate) mod clones {
            use super::*;
            $crate::formats::common::dequant_row!(@body $f32, $half, $normal; $($rest)*);
        }
        pub use clones::dequant_row;

        /// Decodes whole blocks of `src` into little-endian f16 bits in `dst`
        /// (`dst.len() == src.len() / BYTES * ELEMS`): by the format's table row where the CPU
        /// has AVX-512BW (`formats::permute`), else by the row clones; the same bits.
        pub fn dequant_row_f16(src: &[u8], dst: &mut [[u8; 2]]) {
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            if $crate::formats::permute::wanted() {
                // SAFETY: `wanted` checked that the CPU has AVX-512F and AVX-512BW.
                return unsafe { tables::f16(src, dst) };
            }
            clones::dequant_row_f16(src, dst)
        }

        /// [`dequant_row_f16`] for bf16.
        pub fn dequant_row_bf16(src: &[u8], dst: &mut [[u8; 2]]) {
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            if $crate::formats::permute::wanted() {
                if $crate::formats::permute::bf16_instruction() {
                    // SAFETY: the CPU has AVX-512F, AVX-512BW and AVX512-BF16 (checked above).
                    return unsafe { tables::bf16_cvt(src, dst) };
                }
                // SAFETY: `wanted` checked that the CPU has AVX-512F and AVX-512BW.
                return unsafe { tables::bf16(src, dst) };
            }
            clones::dequant_row_bf16(src, dst)
        }

        /// Whether no value of block `b` is subnormal (the format's `no_subnormals`).
        #[cfg(target_arch = "x86_64")]
        #[inline(always)]
        fn no_subnormals(b: &[u8; BYTES]) -> bool {
            $normal(b)
        }
    };
    (@body $f32:ident, $half:ident, $normal:tt; $block:ident) => {
        $crate::formats::common::dequant_row!(@blocks $f32, $block, $half, $normal);
    };
    (@body $f32:ident, $half:ident, $normal:tt; |$src:ident, $dst:ident| $body:block) => {
        $crate::formats::common::dequant_row!(@runs $f32, $half, $normal, |$src, $dst| $body);
    };
    // A `half =` body rounds by its own rule (no `no_subnormals`: it is not matched here).
    (@body $f32:ident, $half:ident, (|_: &[u8; BYTES]| false); |$src:ident, $dst:ident| $body:block, half = |$hsrc:ident, $hdst:ident, $to_half:ident| $hbody:block) => {
        $crate::formats::common::dequant_row!(@own $f32, $half, |$src, $dst| $body, |$hsrc, $hdst, $to_half| $hbody);
    };
    (@body $f32:ident, $half:ident, (|_: &[u8; BYTES]| false); $block:ident, half = |$hsrc:ident, $hdst:ident, $to_half:ident| $hbody:block) => {
        $crate::formats::common::dequant_row!(
            @own $f32, $half,
            |src, dst| { $crate::formats::common::dequant_blocks(src, dst, |b, y| $block(b, y)) },
            |$hsrc, $hdst, $to_half| $hbody
        );
    };
    (@own $f32:ident, $levels:ident, |$src:ident, $dst:ident| $body:block, |$hsrc:ident, $hdst:ident, $to_half:ident| $hbody:block) => {
        $crate::formats::common::dequant_row!(@f32 $f32, |$src, $dst| $body);
        $crate::formats::common::dequant_row!(@half $levels, dequant_row_f16, f16_run, |$hsrc, $hdst, rounding| {
            let $to_half = |y: &[f32], o: &mut [[u8; 2]]| rounding(y, o, false);
            $hbody
        });
        $crate::formats::common::dequant_row!(@half $levels, dequant_row_bf16, bf16_run, |$hsrc, $hdst, rounding| {
            let $to_half = |y: &[f32], o: &mut [[u8; 2]]| rounding(y, o, false);
            $hbody
        });
    };
    (@blocks $f32:ident, $block:ident, $levels:ident, $normal:tt) => {
        // A closure, not the fn item itself: each clone then gets its own closure, which LLVM
        // inlines; a fn item would go through one `Fn::call` shim shared by all clones, called
        // out of line per block.
        $crate::formats::common::dequant_row!(@f32 $f32, |src, dst| {
            $crate::formats::common::dequant_blocks(src, dst, |b, y| $block(b, y))
        });
        $crate::formats::common::dequant_row!(@half $levels, dequant_row_f16, f16_run, |src, dst, to_half| {
            $crate::formats::common::dequant_row!(@half_blocks $levels)(src, dst, |b, y| $block(b, y), $normal, to_half)
        });
        $crate::formats::common::dequant_row!(@half $levels, dequant_row_bf16, bf16_run, |src, dst, to_half| {
            $crate::formats::common::dequant_row!(@half_blocks $levels)(src, dst, |b, y| $block(b, y), $normal, to_half)
        });
    };
    (@runs $f32:ident, $levels:ident, $normal:tt, |$src:ident, $dst:ident| $body:block) => {
        $crate::formats::common::dequant_row!(@f32 $f32, |$src, $dst| $body);
        $crate::formats::common::dequant_row!(@half $levels, dequant_row_f16, f16_run, |src, dst, to_half| {
            $crate::formats::common::half_runs::<BYTES, ELEMS>(
                src,
                dst,
                |$src: &[u8], $dst: &mut [f32]| $body,
                $normal,
                to_half,
            )
        });
        $crate::formats::common::dequant_row!(@half $levels, dequant_row_bf16, bf16_run, |src, dst, to_half| {
            $crate::formats::common::half_runs::<BYTES, ELEMS>(
                src,
                dst,
                |$src: &[u8], $dst: &mut [f32]| $body,
                $normal,
                to_half,
            )
        });
    };
    (@f32 wide, |$src:ident, $dst:ident| $body:block) => {
        /// Decodes whole blocks of `src` into `dst` (`dst.len() == src.len() / BYTES * ELEMS`).
        #[multiversion::multiversion(targets(
            "x86_64+avx+avx2+avx512f+avx512bw+avx512vl+bmi1+bmi2+f16c+fma+lzcnt+movbe+popcnt+sse3+sse4.1+sse4.2+ssse3",
            "x86_64+avx+avx2+bmi1+bmi2+f16c+fma+lzcnt+movbe+popcnt+sse3+sse4.1+sse4.2+ssse3",
            "x86_64+popcnt+sse3+sse4.1+sse4.2+ssse3",
        ))]
        pub fn dequant_row($src: &[u8], $dst: &mut [f32]) $body
    };
    (@f32 avx2, |$src:ident, $dst:ident| $body:block) => {
        /// Decodes whole blocks of `src` into `dst` (`dst.len() == src.len() / BYTES * ELEMS`).
        #[multiversion::multiversion(targets(
            "x86_64+avx+avx2+bmi1+bmi2+f16c+fma+lzcnt+movbe+popcnt+sse3+sse4.1+sse4.2+ssse3",
            "x86_64+popcnt+sse3+sse4.1+sse4.2+ssse3",
        ))]
        pub fn dequant_row($src: &[u8], $dst: &mut [f32]) $body
    };
    (@half wide, $name:ident, $run:ident, |$src:ident, $dst:ident, $to_half:ident| $body:block) => {
        /// Decodes whole blocks of `src` into little-endian half-precision bits in `dst`
        /// (`dst.len() == src.len() / BYTES * ELEMS`), rounding each value as it is decoded.
        #[multiversion::multiversion(targets(
            "x86_64+avx+avx2+avx512f+avx512bw+avx512dq+avx512vl+avx512bf16+bmi1+bmi2+f16c+fma+lzcnt+movbe+popcnt+sse3+sse4.1+sse4.2+ssse3",
            "x86_64+avx+avx2+avx512f+avx512bw+avx512vl+bmi1+bmi2+f16c+fma+lzcnt+movbe+popcnt+sse3+sse4.1+sse4.2+ssse3",
            "x86_64+avx+avx2+bmi1+bmi2+f16c+fma+lzcnt+movbe+popcnt+sse3+sse4.1+sse4.2+ssse3",
            "x86_64+popcnt+sse3+sse4.1+sse4.2+ssse3",
        ))]
        pub fn $name($src: &[u8], $dst: &mut [[u8; 2]]) {
            $crate::formats::common::dequant_row!(@to_half $run, $to_half);
            $body
        }
    };
    (@half avx2, $name:ident, $run:ident, |$src:ident, $dst:ident, $to_half:ident| $body:block) => {
        /// Decodes whole blocks of `src` into little-endian half-precision bits in `dst`
        /// (`dst.len() == src.len() / BYTES * ELEMS`), rounding each value as it is decoded.
        #[multiversion::multiversion(targets(
            "x86_64+avx+avx2+bmi1+bmi2+f16c+fma+lzcnt+movbe+popcnt+sse3+sse4.1+sse4.2+ssse3",
            "x86_64+popcnt+sse3+sse4.1+sse4.2+ssse3",
        ))]
        pub fn $name($src: &[u8], $dst: &mut [[u8; 2]]) {
            let $to_half = |y: &[f32], o: &mut [[u8; 2]], no_subnormals: bool| {
                $crate::formats::common::$run::widest(y, o, no_subnormals)
            };
            $body
        }
    };
    (@half_blocks wide) => {
        $crate::formats::common::half_each_block
    };
    (@half_blocks avx2) => {
        $crate::formats::common::half_blocks
    };
    (@to_half $run:ident, $to_half:ident) => {
        let $to_half = |y: &[f32], o: &mut [[u8; 2]], _no_subnormals: bool| {
            multiversion::target::match_target! {
                "x86_64+avx512dq+avx512bf16" => $crate::formats::common::$run::avx512bf16(y, o, _no_subnormals),
                "x86_64+avx512f" => $crate::formats::common::$run::avx512(y, o),
                "x86_64+avx+f16c" => $crate::formats::common::$run::f16c(y, o),
                _ => $crate::formats::common::$run::soft(y, o),
            }
        };
    };
    (f32_rows = avx512, half_rows = avx2, $($rest:tt)*) => {
        $crate::formats::common::dequant_row!(@entry wide, avx2; $($rest)*);
    };
    (f32_rows = avx512, $($rest:tt)*) => {
        $crate::formats::common::dequant_row!(@entry wide, wide; $($rest)*);
    };
    (half_rows = avx2, $($rest:tt)*) => {
        $crate::formats::common::dequant_row!(@entry avx2, avx2; $($rest)*);
    };
    ($($rest:tt)*) => {
        $crate::formats::common::dequant_row!(@entry avx2, wide; $($rest)*);
    };
}
pub(crate) use dequant_row;

/// Defines `dequant_row_lines`, a format's f32 row in AVX-512 vectors written a cache line per
/// store ([`crate::formats::lines`]), from a body run on each block `b` that pushes the block's
/// values to `out` 16 at a time, in order, by the block decoder's operations in the same order
/// (so the same bits). `dequant_row!(f32_lines = dequant_row_lines, …)` dispatches to it.
macro_rules! line_row {
    (|$b:ident, $out:ident| $body:block) => {
        /// [`dequant_row`]'s decode in AVX-512 vectors, a cache line per store.
        ///
        /// # Safety
        /// The CPU must have AVX-512F and AVX-512BW.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512bw")]
        #[allow(unsafe_code)]
        pub(crate) unsafe fn dequant_row_lines(src: &[u8], dst: &mut [f32]) {
            use std::arch::x86_64::*;
            let mut $out = $crate::formats::lines::Lines::new(dst);
            for $b in src.as_chunks::<BYTES>().0 $body
            $out.finish();
        }
    };
}
pub(crate) use line_row;

/// Defines the module `tables`: a format's f16 and bf16 rows by a table of rounded values per
/// block ([`crate::formats::permute`]), from a body run on each block `b` with `round` (16 f32
/// values in a `__m512` to 16 halves in a `__m256i`: the row's rounding) and `out`, the block's
/// `ELEMS` outputs. The body computes the block's distinct values by the block decoder's
/// operations, rounds them with `round`, and writes each element's with
/// [`permute::pick`](crate::formats::permute::pick). `dequant_row!(…, half_tables, …)` dispatches
/// to it.
macro_rules! table_row {
    (|$b:ident, $round:ident, $out:ident| $body:block) => {
        /// The half rows by a table per block ([`crate::formats::permute`]).
        #[cfg(target_arch = "x86_64")]
        pub(crate) mod tables {
            use super::*;
            use std::arch::x86_64::*;
            use $crate::formats::permute;

            /// The f16 row.
            /// (The CPU must have AVX-512F and AVX-512BW.)
            #[target_feature(enable = "avx512f,avx512bw")]
            pub(crate) fn f16(src: &[u8], dst: &mut [[u8; 2]]) {
                permute::rows::<BYTES, ELEMS>(src, dst, |$b, $out| {
                    let $round = |v: __m512| permute::f16(v);
                    $body
                })
            }

            /// The bf16 row by integer rounding.
            /// (The CPU must have AVX-512F and AVX-512BW.)
            #[target_feature(enable = "avx512f,avx512bw")]
            pub(crate) fn bf16(src: &[u8], dst: &mut [[u8; 2]]) {
                permute::rows::<BYTES, ELEMS>(src, dst, |$b, $out| {
                    let $round = |v: __m512| permute::bf16(v);
                    $body
                })
            }

            /// The bf16 row by `vcvtneps2bf16` for the blocks that hold no subnormal value,
            /// by integer rounding for the others.
            /// (The CPU must have AVX-512F, AVX-512BW and AVX512-BF16.)
            #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
            pub(crate) fn bf16_cvt(src: &[u8], dst: &mut [[u8; 2]]) {
                permute::rows::<BYTES, ELEMS>(src, dst, |$b, $out| {
                    if no_subnormals($b) {
                        let $round = |v: __m512| permute::bf16_normal(v);
                        $body
                    } else {
                        let $round = |v: __m512| permute::bf16(v);
                        $body
                    }
                })
            }
        }
    };
}
pub(crate) use table_row;

#[cfg(test)]
mod tests {
    use super::bf16_run;

    /// Values of every class near bf16's rounding boundaries: zeros, subnormals, ties (odd and
    /// even kept parts), infinities, quiet and signalling NaNs with payloads, both signs, and a
    /// stride through all 2³² patterns.
    fn classes() -> Vec<f32> {
        let mut bits: Vec<u32> = (0..=u32::MAX).step_by(65_537).collect();
        for base in [
            0u32,
            0x0000_7FFF,
            0x0000_8000,
            0x007F_8000,
            0x0080_0000,
            0x3F80_8000,
        ] {
            bits.extend(base..base + 3);
        }
        bits.extend([
            0x3F81_8000,
            0x7F7F_8000,
            0x7F80_0000,
            0x7F80_0001,
            0x7FC1_2345,
            0x7FFF_FFFF,
        ]);
        let neg: Vec<u32> = bits.iter().map(|b| b ^ 0x8000_0000).collect();
        bits.extend(neg);
        bits.into_iter().map(f32::from_bits).collect()
    }

    /// Every bf16 rounding the rows can use, on every run length up to 33, gives `half`'s bits:
    /// the integer AVX-512 one on every machine with AVX-512F, the BF16 instruction (with its
    /// subnormal fallback, and without it on runs that hold no subnormal) where the CPU has it.
    #[test]
    fn bf16_roundings_equal_half() {
        type Round = fn(&[f32], &mut [[u8; 2]]);
        // (name, rounding, whether it is given subnormal values)
        let mut roundings: Vec<(&str, Round, bool)> = vec![
            ("soft", bf16_run::soft, true),
            ("widest", |y, o| bf16_run::widest(y, o, false), true),
            (
                "widest unchecked",
                |y, o| bf16_run::widest(y, o, true),
                false,
            ),
        ];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has the features each function enables.
                #[allow(unsafe_code)]
                roundings.push(("avx512", |y, o| unsafe { bf16_run::avx512(y, o) }, true));
            }
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512dq")
                && is_x86_feature_detected!("avx512bf16")
            {
                #[allow(unsafe_code)]
                roundings.push((
                    "avx512bf16",
                    |y, o| unsafe { bf16_run::avx512bf16(y, o, false) },
                    true,
                ));
                #[allow(unsafe_code)]
                roundings.push((
                    "avx512bf16 unchecked",
                    |y, o| unsafe { bf16_run::avx512bf16(y, o, true) },
                    false,
                ));
            }
        }
        for (name, round, subnormals) in roundings {
            let vals: Vec<f32> = classes()
                .into_iter()
                .filter(|x| subnormals || !x.is_subnormal())
                .collect();
            let want: Vec<[u8; 2]> = vals
                .iter()
                .map(|&x| half::bf16::from_f32(x).to_bits().to_le_bytes())
                .collect();
            for len in 1..=33 {
                for (y, w) in vals.chunks(len).zip(want.chunks(len)) {
                    let mut o = vec![[0u8; 2]; y.len()];
                    round(y, &mut o);
                    for (i, (g, w)) in o.iter().zip(w).enumerate() {
                        assert_eq!(g, w, "{name} run {len}: {:#010x}", y[i].to_bits());
                    }
                }
            }
        }
    }
}
