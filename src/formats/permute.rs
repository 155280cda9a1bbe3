//! f16 and bf16 rows that round a block's few distinct values once and pick each element's bits
//! from them with one 16-bit permute, for the formats whose block takes at most 32 values.
//!
//! The row clones of [`common::dequant_row!`](crate::formats::common::dequant_row) decode every
//! element to f32 and round it: on Zen 5 `vcvtps2ph` costs about as much as the rest of Q5_0's
//! decode, and its f16 row ran at 0.80 of the f32 row's values per second. A Q5_0 block takes at
//! most 32 values, `(k - 16) · d` for the 32 codes `k`: rounded once into one vector of 32
//! halves, the block's 32 elements are one `vpermw` of it by their codes (1.12–1.15 of the f32
//! row's values per second, one thread; MXFP4's, IQ4_NL's and Q2_0's 16 or 4 values a block
//! give 3.9, 3.5 and 4.4 where the clones gave 0.81–1.06, Zen 5). The table entries are the f32 row's values, by the same
//! operations, so each element gets the rounding of its f32 value: the same bits as the clones.
//!
//! A format with such rows writes them with [`table_row!`](crate::formats::common::table_row)
//! and puts `half_tables,` last among its `dequant_row!` options; its half rows then run them
//! where [`wanted`] says so, and the clones elsewhere.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    __m256i, __m512, __m512i, _mm256_and_si256, _mm256_cvtepu8_epi16, _mm256_set1_epi16,
    _mm256_srli_epi16, _mm512_castsi256_si512, _mm512_cvtneps_pbh, _mm512_cvtps_ph,
    _mm512_inserti64x4, _mm512_permutexvar_epi16, _MM_FROUND_TO_NEAREST_INT,
};

#[cfg(target_arch = "x86_64")]
use crate::formats::common::bytes_at;

/// Whether the CPU has what the table rows need: AVX-512F and AVX-512BW (std caches the
/// detection).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn wanted() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
}

/// Whether the CPU also has AVX512-BF16, whose `vcvtneps2bf16` rounds a table of values none of
/// which is subnormal.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn bf16_instruction() -> bool {
    std::arch::is_x86_feature_detected!("avx512bf16")
}

/// Runs `block` on each whole block of `src` and its `ELEMS` outputs in `dst`.
#[inline(always)]
pub(crate) fn rows<const BYTES: usize, const ELEMS: usize>(
    src: &[u8],
    dst: &mut [[u8; 2]],
    mut block: impl FnMut(&[u8; BYTES], &mut [[u8; 2]; ELEMS]),
) {
    let (blocks, _) = src.as_chunks::<BYTES>();
    let (outs, _) = dst.as_chunks_mut::<ELEMS>();
    for (b, o) in blocks.iter().zip(outs) {
        block(b, o);
    }
}

/// 16 values rounded to f16 (`vcvtps2ph`, to nearest even: `half`'s rounding).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn f16(v: __m512) -> __m256i {
    _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v)
}

/// 16 values rounded to bf16 as `half` rounds, subnormals included (integer operations).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn bf16(v: __m512) -> __m256i {
    bytemuck::cast(crate::formats::common::bf16_run::vector(bytemuck::cast(v)))
}

/// 16 values none of which is subnormal rounded to bf16 as `half` rounds (`vcvtneps2bf16`, which
/// flushes subnormals).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
#[inline]
pub(crate) fn bf16_normal(v: __m512) -> __m256i {
    bytemuck::cast(_mm512_cvtneps_pbh(v))
}

/// One vector of 32 halves: `lo`'s 16, then `hi`'s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// The 16 bytes of `b` at `off` as 32 4-bit codes, one per 16-bit lane: the low nibbles, then
/// the high nibbles (the legacy formats' `qs`: elements 0..16, then 16..32).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
pub(crate) fn nibble_codes(b: &[u8], off: usize) -> __m512i {
    let q = _mm256_cvtepu8_epi16(bytemuck::cast(bytes_at::<16>(b, off)));
    join(
        _mm256_and_si256(q, _mm256_set1_epi16(0xF)),
        _mm256_srli_epi16::<4>(q),
    )
}

/// Lane `i` of the result is lane `codes[i] % 32` of `table` (`vpermw`), written to `out`'s 32
/// halves.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
pub(crate) fn pick(table: __m512i, codes: __m512i, out: &mut [[u8; 2]; 32]) {
    *out = bytemuck::cast(_mm512_permutexvar_epi16(codes, table));
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use crate::formats::fp4::mxfp4;
    use crate::formats::iquant::iq4_nl;
    use crate::formats::legacy::{q2_0, q5_0};
    use crate::formats::sample::{normal_blocks, Rng};
    use crate::formats::Format;

    type Row = fn(&[u8], &mut [[u8; 2]]);

    /// Every format with table rows: each of its table rows the CPU can run (f16, bf16 by
    /// integer rounding, bf16 by `vcvtneps2bf16`) equals its row clones bit for bit over 0 to 9
    /// blocks and more, on random bytes, blocks of tiny and extreme bytes and normal blocks.
    #[test]
    fn table_rows_equal_the_row_clones() {
        if !super::wanted() {
            return;
        }
        let bf16_cvt = super::bf16_instruction();
        let mut rows: Vec<(Format, &str, Row, Row)> = Vec::new();
        macro_rules! formats {
            ($($format:ident: $codec:ident),*) => {$(
                // SAFETY (each closure): `wanted` (and `bf16_instruction` for `bf16_cvt`)
                // checked that the CPU has what the row needs.
                #[allow(unsafe_code)]
                rows.extend([
                    (
                        Format::$format,
                        "f16",
                        $codec::clones::dequant_row_f16 as Row,
                        (|s, d| unsafe { $codec::tables::f16(s, d) }) as Row,
                    ),
                    (
                        Format::$format,
                        "bf16",
                        $codec::clones::dequant_row_bf16,
                        |s, d| unsafe { $codec::tables::bf16(s, d) },
                    ),
                ]);
                if bf16_cvt {
                    #[allow(unsafe_code)]
                    rows.push((
                        Format::$format,
                        "bf16 cvt",
                        $codec::clones::dequant_row_bf16,
                        |s, d| unsafe { $codec::tables::bf16_cvt(s, d) },
                    ));
                }
            )*};
        }
        formats!(Q5_0: q5_0, MXFP4: mxfp4, IQ4_NL: iq4_nl, Q2_0: q2_0);
        for (format, what, clones, table) in rows {
            let spec = format.spec();
            for blocks in (0..10).chain([4096 / spec.elems + 3]) {
                let mut raw = vec![0u8; blocks * spec.bytes];
                Rng::new(format.id().into()).fill(&mut raw);
                const TINY: [u8; 6] = [0x00, 0x01, 0x02, 0x80, 0x81, 0xFF];
                let tiny: Vec<u8> = raw.iter().map(|b| TINY[*b as usize % 6]).collect();
                for src in [raw, tiny, normal_blocks(format, blocks, 5)] {
                    let n = blocks * spec.elems;
                    let mut want = vec![[0u8; 2]; n];
                    clones(&src, &mut want);
                    let mut got = vec![[7u8; 2]; n];
                    table(&src, &mut got);
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert_eq!(g, w, "{format} {what}, {blocks} blocks, #{i}");
                    }
                }
            }
        }
    }
}
