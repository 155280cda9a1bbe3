//! The CPU driver: runs the per-format reference codecs ([`crate::formats`]) over whole tensors.
//!
//! [`dequant_into`] decodes on the calling thread with no allocation. [`dequant_to_bytes`] and
//! [`dequant_f32`] split the tensor on block boundaries across rayon's threads. The byte variant
//! writes f16 and bf16 through the codecs' fused half-precision rows (each block rounded as it is
//! decoded, `FormatSpec::dequant_row_f16` / `dequant_row_bf16`), and f32 into a byte buffer not
//! aligned for f32 through a small stack scratch buffer, so its extra memory is bounded (a few
//! tens of KiB per thread) whatever the tensor size.

use rayon::prelude::*;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::formats::Format;

/// Values decoded per step into the stack scratch buffer (32 KiB of f32). A multiple of every
/// block size (1, 32, 64, 128, 256 elements), so steps end on block boundaries.
const SCRATCH_VALUES: usize = 8192;
/// Values per parallel task: large enough to amortise scheduling, small enough to balance work.
const TASK_VALUES: usize = 1 << 16;
/// Below this many values, the parallel entry points stay on the calling thread.
const PARALLEL_MIN_VALUES: usize = 1 << 16;

const _: () =
    assert!(SCRATCH_VALUES.is_multiple_of(256) && TASK_VALUES.is_multiple_of(SCRATCH_VALUES));

/// [`Format::values_for`], or [`Error::PartialBlock`] when `n_bytes` is not a whole number of
/// blocks.
pub(crate) fn n_values(format: Format, n_bytes: usize) -> Result<usize> {
    format
        .values_for(n_bytes)
        .ok_or_else(|| Error::partial_block(format, n_bytes))
}

/// Decode whole blocks into a caller's slice; no allocation; single thread.
///
/// Errors: [`Error::PartialBlock`] if `src` is not a whole number of blocks,
/// [`Error::DestinationSize`] if `dst.len()` is not the number of values `src` decodes to.
pub fn dequant_into(format: Format, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let n = n_values(format, src.len())?;
    if dst.len() != n {
        return Err(Error::DestinationSize {
            format,
            expected: n,
            got: dst.len(),
        });
    }
    (format.spec().dequant_row)(src, dst);
    Ok(())
}

/// [`dequant_into`] on several threads: `None` uses rayon's current pool (all cores by default),
/// `Some(1)` runs on the calling thread, `Some(n)` runs in a fresh pool of `n` threads. The output
/// is identical whatever the thread count.
pub fn dequant_into_with(
    format: Format,
    src: &[u8],
    dst: &mut [f32],
    threads: Option<usize>,
) -> Result<()> {
    let n = n_values(format, src.len())?;
    if dst.len() != n {
        return Err(Error::DestinationSize {
            format,
            expected: n,
            got: dst.len(),
        });
    }
    let spec = format.spec();
    let task_src = TASK_VALUES / spec.elems * spec.bytes;
    let row = spec.dequant_row;
    let par = |dst: &mut [f32]| {
        src.par_chunks(task_src)
            .zip(dst.par_chunks_mut(TASK_VALUES))
            .for_each(|(s, d)| row(s, d))
    };
    match Mode::new(threads, n) {
        Mode::Here => row(src, dst),
        Mode::Global => par(dst),
        Mode::Pool(pool) => pool.install(|| par(dst)),
    }
    Ok(())
}

/// Decode a whole tensor on all cores into bytes of `dtype`: little-endian f32, f16 or bf16, the
/// f16/bf16 values being the round-to-nearest-even of the f32 result.
///
/// `dst.len()` must be `format.values_for(src.len()) * dtype.size()`; otherwise
/// [`Error::DestinationSize`] reports the values `dst` holds (`dst.len() / dtype.size()`).
pub fn dequant_to_bytes(format: Format, src: &[u8], dtype: DType, dst: &mut [u8]) -> Result<()> {
    dequant_to_bytes_with(format, src, dtype, dst, None)
}

/// [`dequant_to_bytes`] with a thread count: `None` uses rayon's current pool (all cores by
/// default), `Some(1)` runs on the calling thread, `Some(n)` runs in a fresh pool of `n` threads.
pub fn dequant_to_bytes_with(
    format: Format,
    src: &[u8],
    dtype: DType,
    dst: &mut [u8],
    threads: Option<usize>,
) -> Result<()> {
    let n = n_values(format, src.len())?;
    let size = dtype.size();
    if n.checked_mul(size) != Some(dst.len()) {
        return Err(Error::DestinationSize {
            format,
            expected: n,
            got: dst.len() / size,
        });
    }
    // f32 output into an f32-aligned buffer on a little-endian machine: decode in place, no copy.
    #[cfg(target_endian = "little")]
    if dtype == DType::F32 {
        if let Ok(words) = bytemuck::try_cast_slice_mut::<u8, f32>(dst) {
            return dequant_into_with(format, src, words, threads);
        }
    }
    let spec = format.spec();
    let task_src = TASK_VALUES / spec.elems * spec.bytes;
    let task = |(s, d): (&[u8], &mut [u8])| decode_bytes(format, s, dtype, d);
    let par = |dst: &mut [u8]| {
        src.par_chunks(task_src)
            .zip(dst.par_chunks_mut(TASK_VALUES * size))
            .for_each(task)
    };
    match Mode::new(threads, n) {
        Mode::Here => decode_bytes(format, src, dtype, dst),
        Mode::Global => par(dst),
        Mode::Pool(pool) => pool.install(|| par(dst)),
    }
    Ok(())
}

/// Decode a whole tensor to a new `Vec<f32>`, on all cores.
pub fn dequant_f32(format: Format, src: &[u8]) -> Result<Vec<f32>> {
    dequant_f32_with(format, src, None)
}

/// [`dequant_f32`] with a thread count, as in [`dequant_into_with`].
pub fn dequant_f32_with(format: Format, src: &[u8], threads: Option<usize>) -> Result<Vec<f32>> {
    let mut dst = vec![0.0f32; n_values(format, src.len())?];
    dequant_into_with(format, src, &mut dst, threads)?;
    Ok(dst)
}

/// Where a call runs.
enum Mode {
    /// On the calling thread (one thread asked for, or too little work to split).
    Here,
    /// In rayon's current pool.
    Global,
    /// In a pool of the requested size.
    Pool(rayon::ThreadPool),
}

impl Mode {
    fn new(threads: Option<usize>, n_values: usize) -> Mode {
        match threads {
            Some(1) => Mode::Here,
            _ if n_values < PARALLEL_MIN_VALUES => Mode::Here,
            None => Mode::Global,
            Some(t) => match rayon::ThreadPoolBuilder::new().num_threads(t).build() {
                Ok(pool) => Mode::Pool(pool),
                // No threads to be had: decoding here gives the same bytes.
                Err(_) => Mode::Here,
            },
        }
    }
}

/// Decodes `src` (whole blocks) into `dst` bytes of `dtype`: f16 and bf16 by the codec's fused
/// half-precision rows, f32 through a stack scratch buffer (for a `dst` not aligned for f32).
fn decode_bytes(format: Format, src: &[u8], dtype: DType, dst: &mut [u8]) {
    let spec = format.spec();
    match dtype {
        DType::F16 => (spec.dequant_row_f16)(src, dst.as_chunks_mut::<2>().0),
        DType::BF16 => (spec.dequant_row_bf16)(src, dst.as_chunks_mut::<2>().0),
        DType::F32 => {
            let step_src = SCRATCH_VALUES / spec.elems * spec.bytes;
            let mut scratch = [0.0f32; SCRATCH_VALUES];
            for (s, d) in src.chunks(step_src).zip(dst.chunks_mut(SCRATCH_VALUES * 4)) {
                let vals = &mut scratch[..d.len() / 4];
                (spec.dequant_row)(s, vals);
                let (words, _) = d.as_chunks_mut::<4>();
                for (w, v) in words.iter_mut().zip(vals.iter()) {
                    *w = v.to_le_bytes();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::sample::{normal_blocks, Rng};
    use half::{bf16, f16};

    /// The fused rows of `format` on `src` give exactly `half`'s rounding of the f32 row.
    fn check_half_rows(format: Format, src: &[u8]) {
        let spec = format.spec();
        let n = src.len() / spec.bytes * spec.elems;
        let mut f32s = vec![0.0f32; n];
        (spec.dequant_row)(src, &mut f32s);
        let mut out = vec![[0u8; 2]; n];
        type Round = fn(f32) -> u16;
        let rows: [(&str, Rowfn, Round); 2] = [
            ("f16", spec.dequant_row_f16, |x| f16::from_f32(x).to_bits()),
            ("bf16", spec.dequant_row_bf16, |x| {
                bf16::from_f32(x).to_bits()
            }),
        ];
        for (dtype, row, round) in rows {
            row(src, &mut out);
            for (i, (x, o)) in f32s.iter().zip(&out).enumerate() {
                let bits = x.to_bits();
                let got = u16::from_le_bytes(*o);
                assert_eq!(got, round(*x), "{format} {dtype} #{i}: {bits:#x}");
            }
        }
    }

    /// A fused half-precision row.
    type Rowfn = fn(&[u8], &mut [[u8; 2]]);

    /// F32's fused rows on every exponent, sign and NaN payload class (a stride through all 2³²
    /// patterns, and every pattern near each rounding boundary), in runs of every length up to
    /// 17 (the vector bodies and each remainder): `half`'s bits.
    #[test]
    fn half_rows_round_every_f32_class_like_half() {
        let mut vals: Vec<u32> = (0..=u32::MAX).step_by(4093).collect();
        for base in [
            0x3380_0000u32,
            0x3880_0000,
            0x477F_E000,
            0x7F80_0000,
            0x0000_8000,
        ] {
            for d in 0..0x2_0000u32 {
                vals.push(base.wrapping_add(d));
                vals.push((base | 0x8000_0000).wrapping_add(d));
            }
        }
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        for len in [vals.len(), 1, 7, 8, 9, 16, 17, 300] {
            check_half_rows(Format::F32, &bytes[..4 * len]);
        }
    }

    /// Every format's fused rows equal the rounded f32 row, on random bytes (NaN and Inf scales
    /// included) and on blocks with finite normal scales; the count (8 to 2069 blocks) ends in a
    /// partial group or run for every way the rows group blocks.
    #[test]
    fn half_rows_of_every_format_equal_the_rounded_f32_row() {
        for &format in Format::ALL {
            let spec = format.spec();
            let blocks = 2048 / spec.elems + 21;
            let mut raw = vec![0u8; blocks * spec.bytes];
            Rng::new(format.id().into()).fill(&mut raw);
            check_half_rows(format, &raw);
            check_half_rows(format, &normal_blocks(format, blocks, 7));
        }
    }
}
