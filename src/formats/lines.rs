//! f32 rows whose every store fills part of one cache line only, for the formats whose decode is
//! bound by stores.
//!
//! The row clones of [`common::dequant_row!`](crate::formats::common::dequant_row) store 32 or
//! 64 bytes at a time wherever the destination lies, and a large buffer from glibc lies 16 bytes
//! past a line (its chunk header), so that half or all of those stores cross a line boundary. On
//! the Intel Xeon (Sapphire Rapids class, KVM guest) decoding Q4_0, Q4_K or TQ2_0 into a 16 MiB
//! destination runs at 20–21 GB/s one thread with the destination 16 bytes past a line and at
//! 22–25 GB/s on the line (`examples/cpu_throughput align`); ggml's SSE2 decoders, whose 16-byte
//! stores never cross a line, reach 21–24. A plain fill of 16 MiB there: 24.8 GB/s in 64-byte
//! stores on the line, 19.5–23.8 at 16 bytes past it.
//!
//! [`Lines`] takes a row's values in 16-value vectors, in order, and writes each 64-byte line of
//! the destination with one aligned store: two consecutive vectors joined by one `vpermt2ps`,
//! masked stores at the two ends. The formats with a row here decode straight into vectors with
//! AVX-512 (the same IEEE operations, in the same order, as their block decoder, so the bits are
//! the same) and take it when [`wanted`] says so: the CPU is an Intel one with AVX-512F/BW and
//! the destination does not start on a line. On the line, the row clones' stores already fill
//! whole lines.
//!
//! On AMD's Zen 5 (EPYC, KVM guest) split stores cost little and the line rows are no faster,
//! some slower: `examples/cpu_throughput align`, one thread, the destination 16/32/48 bytes past
//! a line, line row against row clone, three alternated rounds: Q5_K 49–51 against 61–64 GB/s,
//! Q4_K 65–69 against 68–72, Q4_0, Q4_1, Q8_0 and TQ2_0 level within the noise. So the rule is
//! the vendor's, read once from CPUID: Intel takes the line rows, every other CPU the row clones
//! (the tests run the line rows on any CPU with AVX-512F/BW, whichever the rule picks).
//!
//! Stores are the only `unsafe` here: each `SAFETY` comment says why the lanes written lie in
//! the destination slice.
#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m128i, __m512, __m512i, _mm512_add_epi32, _mm512_and_si512, _mm512_cvtepu8_epi32,
    _mm512_mask_storeu_ps, _mm512_permutex2var_ps, _mm512_set1_epi32, _mm512_setr_epi32,
    _mm512_setzero_ps, _mm512_srli_epi32, _mm512_store_ps,
};

use crate::formats::common::bytes_at;
use std::marker::PhantomData;

/// Bytes per cache line.
const LINE: usize = 64;
/// f32 values per line (and per vector).
const LANES: usize = LINE / 4;

/// Whether a row into `dst` should go through [`Lines`]: `dst` does not start on a cache line
/// and the CPU is an Intel one with AVX-512F and AVX-512BW (read once, then cached).
#[inline]
pub(crate) fn wanted(dst: &[f32]) -> bool {
    static SPLIT_STORES_COST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    !(dst.as_ptr() as usize).is_multiple_of(LINE)
        && *SPLIT_STORES_COST.get_or_init(|| {
            intel()
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
        })
}

/// Whether CPUID's vendor string is `GenuineIntel`.
fn intel() -> bool {
    let id = std::arch::x86_64::__cpuid(0);
    [id.ebx, id.edx, id.ecx] == [0x756e_6547, 0x4965_6e69, 0x6c65_746e]
}

/// The 16 bytes of `b` at `off`, each widened to a 32-bit lane.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn widen(b: &[u8], off: usize) -> __m512i {
    let x: __m128i = bytemuck::cast(bytes_at::<16>(b, off));
    _mm512_cvtepu8_epi32(x)
}

/// The 16 bytes of `b` at `off` as 4-bit codes: the low nibbles, then the high nibbles, one per
/// 32-bit lane (the legacy formats' `qs`: values 0..16, then 16..32).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn nibbles(b: &[u8], off: usize) -> [__m512i; 2] {
    let q = widen(b, off);
    let low = _mm512_set1_epi32(0xF);
    [_mm512_and_si512(q, low), _mm512_srli_epi32::<4>(q)]
}

/// `a + b` with `a` as the first source operand of `vaddps`, so that where both are NaN the result
/// is `a`'s (quieted), as in the row clones' `q·d + m`. LLVM's `fadd` is commutative and swapped
/// the operands of `_mm512_add_ps` here, which gave `m`'s NaN where `d` and `m` both are.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn add_first(a: __m512, b: __m512) -> __m512 {
    let sum;
    // SAFETY: a register-only AVX-512F instruction (this function is compiled with AVX-512F).
    unsafe {
        std::arch::asm!(
            "vaddps {sum}, {a}, {b}",
            sum = lateout(zmm_reg) sum,
            a = in(zmm_reg) a,
            b = in(zmm_reg) b,
            options(pure, nomem, nostack),
        )
    };
    sum
}

/// The writer: [`push`](Lines::push) the row's values 16 at a time, then
/// [`finish`](Lines::finish). Exactly `dst.len() / 16` pushes must be made (every row here
/// decodes blocks of 32 or 256 values); the methods are `#[inline(always)]`, for rows compiled
/// with AVX-512F.
pub(crate) struct Lines<'a> {
    /// The destination's first value.
    dst: *mut f32,
    /// Values from `dst` back to the start of its line (0..16).
    skew: usize,
    /// Vectors pushed so far.
    pushed: usize,
    /// The number of vectors the destination holds.
    vectors: usize,
    /// Lane L of a line takes value `16 - skew + L` of `(previous vector, this vector)`.
    join: __m512i,
    /// The last vector pushed.
    prev: __m512,
    _dst: PhantomData<&'a mut [f32]>,
}

impl<'a> Lines<'a> {
    /// A writer over `dst`, whose length must be a multiple of 16.
    #[inline(always)]
    pub(crate) fn new(dst: &'a mut [f32]) -> Lines<'a> {
        assert!(dst.len().is_multiple_of(LANES));
        let skew = (dst.as_ptr() as usize % LINE) / 4;
        // SAFETY: AVX-512F, as every caller is compiled with (an `#[inline(always)]` method,
        // inlined into a `#[target_feature(enable = "avx512f,…")]` row).
        let (join, prev) = unsafe {
            let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            (
                _mm512_add_epi32(lanes, _mm512_set1_epi32((LANES - skew) as i32)),
                _mm512_setzero_ps(),
            )
        };
        Lines {
            dst: dst.as_mut_ptr(),
            skew,
            pushed: 0,
            vectors: dst.len() / LANES,
            join,
            prev,
            _dst: PhantomData,
        }
    }

    /// The row's next 16 values.
    #[inline(always)]
    pub(crate) fn push(&mut self, v: __m512) {
        assert!(self.pushed < self.vectors);
        if self.pushed == 0 {
            // Values 0..16-skew: the rest of the first line.
            let head = ((1u32 << (LANES - self.skew)) - 1) as u16;
            // SAFETY: the lanes written are values 0..16-skew of `dst`, which holds at least 16.
            unsafe { _mm512_mask_storeu_ps(self.dst, head, v) };
        } else {
            // Line `pushed`: values 16·pushed - skew .. 16·pushed + 16 - skew, the last `skew`
            // of the previous vector and the first 16 - skew of this one.
            // SAFETY: those values lie in `dst` (pushed < vectors), and their address is
            // 16·pushed - skew values past `dst`, which is `skew` values past a line: the store
            // starts on a line, as `_mm512_store_ps` requires.
            unsafe {
                _mm512_store_ps(
                    self.dst.add(LANES * self.pushed - self.skew),
                    _mm512_permutex2var_ps(self.prev, self.join, v),
                )
            };
        }
        self.prev = v;
        self.pushed += 1;
    }

    /// Writes the last `skew` values (the start of the line after the last whole one).
    #[inline(always)]
    pub(crate) fn finish(self) {
        assert_eq!(self.pushed, self.vectors);
        if self.pushed > 0 && self.skew > 0 {
            let tail = ((1u32 << self.skew) - 1) as u16;
            // SAFETY: the lanes written are the last `skew` values of `dst`
            // (16·vectors - skew .. 16·vectors).
            unsafe {
                let zero = _mm512_setzero_ps();
                _mm512_mask_storeu_ps(
                    self.dst.add(LANES * self.pushed - self.skew),
                    tail,
                    _mm512_permutex2var_ps(self.prev, self.join, zero),
                )
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::formats::kquant::{q4_k, q5_k};
    use crate::formats::legacy::{q4_0, q4_1, q8_0};
    use crate::formats::sample::{normal_blocks, Rng};
    use crate::formats::ternary::tq2_0;
    use crate::formats::Format;

    /// The vendor rule reads CPUID as the kernel does: Intel exactly where `/proc/cpuinfo` says
    /// `GenuineIntel`.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_vendor_is_read_as_the_kernel_reads_it() {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("Linux reports its CPUs");
        let vendor = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("vendor_id"))
            .expect("/proc/cpuinfo names the vendor");
        let vendor = vendor.trim_start_matches([' ', '\t', ':']);
        assert_eq!(
            super::intel(),
            vendor == "GenuineIntel",
            "vendor {vendor:?}"
        );
    }

    type Row = fn(&[u8], &mut [f32]);
    /// A line row (AVX-512F/BW only).
    type LineRow = unsafe fn(&[u8], &mut [f32]);

    /// Every format with a line row: its line row (where the CPU has AVX-512F/BW) and its
    /// dispatching row, at every 4-byte offset of the destination within a line, over 0 to 9
    /// blocks and a count past a parallel task, equal the row clones' output bit for bit (random
    /// bytes, NaN scales included, blocks whose first two f16 fields are different NaNs, and
    /// normal blocks) and write nothing outside the destination.
    #[test]
    fn line_rows_equal_the_vector_rows_at_every_offset() {
        let rows: [(Format, Row, LineRow); 6] = [
            (
                Format::Q4_0,
                q4_0::vector::dequant_row,
                q4_0::dequant_row_lines,
            ),
            (
                Format::Q4_1,
                q4_1::vector::dequant_row,
                q4_1::dequant_row_lines,
            ),
            (
                Format::Q8_0,
                q8_0::vector::dequant_row,
                q8_0::dequant_row_lines,
            ),
            (
                Format::Q4_K,
                q4_k::vector::dequant_row,
                q4_k::dequant_row_lines,
            ),
            (
                Format::Q5_K,
                q5_k::vector::dequant_row,
                q5_k::dequant_row_lines,
            ),
            (
                Format::TQ2_0,
                tq2_0::vector::dequant_row,
                tq2_0::dequant_row_lines,
            ),
        ];
        let avx512 = std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw");
        for (format, vector, lines) in rows {
            let spec = format.spec();
            for blocks in (0..10).chain([2048 / spec.elems + 3]) {
                let mut raw = vec![0u8; blocks * spec.bytes];
                Rng::new(format.id().into()).fill(&mut raw);
                // The first two f16 fields (Q4_1's d and m, the k-quants' d and dmin) set to two
                // NaNs of different payloads, so that an operation on both shows which it keeps.
                let mut nans = raw.clone();
                for b in nans.chunks_mut(spec.bytes) {
                    b[..4].copy_from_slice(&[0x0d, 0xfd, 0x46, 0x7d]);
                }
                for src in [raw, nans, normal_blocks(format, blocks, 3)] {
                    let n = blocks * spec.elems;
                    let mut want = vec![0.0f32; n];
                    vector(&src, &mut want);
                    let mut buf = vec![-7.0f32; n + 32];
                    let line = (0..16)
                        .find(|i| (buf.as_ptr() as usize + 4 * i).is_multiple_of(64))
                        .expect("an f32 buffer is 4-byte aligned");
                    for skew in 0..16 {
                        let at = line + skew;
                        let mut check = |how: &str, row: &dyn Fn(&mut [f32])| {
                            buf.fill(-7.0);
                            row(&mut buf[at..at + n]);
                            for (i, (got, want)) in buf[at..at + n].iter().zip(&want).enumerate() {
                                let (got, want) = (got.to_bits(), want.to_bits());
                                assert_eq!(
                                    got, want,
                                    "{format} {how}, {blocks} blocks, skew {skew}, #{i}"
                                );
                            }
                            let mut outside = buf[..at].iter().chain(&buf[at + n..]);
                            assert!(
                                outside.all(|v| *v == -7.0),
                                "{format} {how}, skew {skew}: wrote outside"
                            );
                        };
                        check("dispatch", &|d| (spec.dequant_row)(&src, d));
                        if avx512 {
                            // SAFETY: the CPU has AVX-512F and AVX-512BW (checked above).
                            check("lines", &|d| unsafe { lines(&src, d) });
                        }
                    }
                }
            }
        }
    }
}
