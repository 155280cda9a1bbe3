//! The `cpu` driver: sizes and errors, ragged inputs, dtype conversion, threads.

use gguf_dequant::{cpu, DType, Error, Format};
use half::{bf16, f16};

use crate::support::codec::same;
use crate::support::rng;

/// Random blocks with every f16 scale field made finite (so f16/bf16 outputs stay comparable).
fn tame_blocks(f: Format, n_blocks: usize, seed: u64) -> Vec<u8> {
    use gguf_dequant::formats::field::FieldKind;
    let spec = f.spec();
    let mut v = rng::bytes(n_blocks * spec.bytes, seed);
    for b in v.chunks_exact_mut(spec.bytes) {
        for fl in spec.fields {
            if fl.kind == FieldKind::F16 {
                b[fl.offset + 1] &= 0x3F; // |d| < 2
            }
        }
    }
    v
}

#[test]
fn n_values_and_partial_blocks() {
    for &f in Format::ALL {
        let (e, n) = (f.block_elems(), f.block_bytes());
        assert_eq!(f.values_for(0), Some(0));
        assert_eq!(f.values_for(3 * n), Some(3 * e));
        if n > 1 {
            assert_eq!(f.values_for(3 * n + 1), None);
            match cpu::dequant_f32(f, &vec![0; 3 * n + 1]) {
                Err(Error::PartialBlock {
                    format,
                    len,
                    block_bytes,
                }) => {
                    assert_eq!((format, len, block_bytes), (f, 3 * n + 1, n))
                }
                other => panic!("{f}: expected PartialBlock, got {other:?}"),
            }
            let mut dst = vec![0.0; 3 * e];
            assert!(matches!(
                cpu::dequant_into(f, &vec![0; 3 * n + 1], &mut dst),
                Err(Error::PartialBlock { .. })
            ));
        }
    }
}

#[test]
fn destination_size_errors() {
    let f = Format::Q4_K;
    let src = vec![0u8; 2 * f.block_bytes()];
    for wrong in [0, 511, 513] {
        let mut dst = vec![0.0; wrong];
        match cpu::dequant_into(f, &src, &mut dst) {
            Err(Error::DestinationSize {
                format,
                expected,
                got,
            }) => {
                assert_eq!((format, expected, got), (f, 512, wrong))
            }
            other => panic!("expected DestinationSize, got {other:?}"),
        }
        let mut bytes = vec![0u8; wrong * 2];
        assert!(matches!(
            cpu::dequant_to_bytes(f, &src, DType::F16, &mut bytes),
            Err(Error::DestinationSize { expected: 512, .. })
        ));
    }
    // An odd byte count is never a whole number of values.
    let mut bytes = vec![0u8; 512 * 4 + 1];
    assert!(cpu::dequant_to_bytes(f, &src, DType::F32, &mut bytes).is_err());
}

#[test]
fn ragged_inputs_decode_blockwise() {
    // 1 block, odd counts, and sizes around the driver's internal chunk sizes: each equals the
    // concatenation of single-block decodes.
    for &f in Format::ALL {
        let (e, n) = (f.block_elems(), f.block_bytes());
        for blocks in [0usize, 1, 3, 7, 8191 / e + 1, 65536 / e + 3] {
            let src = rng::bytes(blocks * n, 7 + blocks as u64);
            let whole = cpu::dequant_f32(f, &src).unwrap();
            assert_eq!(whole.len(), blocks * e);
            for (k, b) in src.chunks_exact(n).enumerate() {
                let mut one = vec![0.0; e];
                cpu::dequant_into(f, b, &mut one).unwrap();
                for i in 0..e {
                    assert!(
                        same(whole[k * e + i], one[i]),
                        "{f}: {blocks} blocks, block {k} elem {i}"
                    );
                }
            }
        }
    }
}

#[test]
fn to_bytes_matches_f32_and_half_rounding() {
    for &f in Format::ALL {
        let n_blocks = 70_000 / f.block_elems() + 1; // large enough to go parallel
        let src = tame_blocks(f, n_blocks, 99 + f.id() as u64);
        let vals = cpu::dequant_f32(f, &src).unwrap();
        for dtype in DType::ALL {
            // Odd offset: an unaligned destination must work too.
            let mut buf = vec![0u8; vals.len() * dtype.size() + 1];
            let dst = &mut buf[1..];
            cpu::dequant_to_bytes(f, &src, dtype, dst).unwrap();
            let mut aligned = vec![0u8; vals.len() * dtype.size()];
            cpu::dequant_to_bytes(f, &src, dtype, &mut aligned).unwrap();
            assert_eq!(dst, &aligned[..], "{f} {dtype}: aligned vs unaligned");
            for (i, v) in vals.iter().enumerate() {
                let s = i * dtype.size();
                match dtype {
                    DType::F32 => {
                        let got = f32::from_le_bytes(dst[s..s + 4].try_into().unwrap());
                        assert!(same(got, *v), "{f} f32 [{i}]");
                    }
                    DType::F16 => {
                        let got = u16::from_le_bytes([dst[s], dst[s + 1]]);
                        let want = f16::from_f32(*v);
                        assert!(
                            got == want.to_bits()
                                || (want.is_nan() && f16::from_bits(got).is_nan()),
                            "{f} f16 [{i}]: {v}"
                        );
                    }
                    DType::BF16 => {
                        let got = u16::from_le_bytes([dst[s], dst[s + 1]]);
                        let want = bf16::from_f32(*v);
                        assert!(
                            got == want.to_bits()
                                || (want.is_nan() && bf16::from_bits(got).is_nan()),
                            "{f} bf16 [{i}]: {v}"
                        );
                    }
                }
            }
        }
    }
}

/// Blocks of bytes drawn from a few tiny and extreme values: scales of 0, 2^-24 and such (f16),
/// E8M0 exponents 0 and 1 (MXFP4's subnormal scales), NaN and infinity patterns.
fn tiny_blocks(f: Format, n_blocks: usize, seed: u64) -> Vec<u8> {
    const ALPHABET: [u8; 6] = [0x00, 0x01, 0x02, 0x80, 0x81, 0xFF];
    rng::bytes(n_blocks * f.block_bytes(), seed)
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()])
        .collect()
}

/// The f16 and bf16 rows give the rounding of the f32 row's every value (any NaN for a NaN) on
/// random bytes and on blocks of tiny scales: the check on each format's `no_subnormals` (the
/// bf16 rows skip the search for subnormal values where it holds).
#[test]
fn half_rows_round_the_f32_row_on_random_bytes() {
    for &f in Format::ALL {
        let n_blocks = 4096 / f.block_elems() + 3;
        for (what, src) in [
            (
                "random",
                rng::bytes(n_blocks * f.block_bytes(), 7 + f.id() as u64),
            ),
            ("tiny", tiny_blocks(f, 8 * n_blocks, 11 + f.id() as u64)),
        ] {
            let vals = cpu::dequant_f32_with(f, &src, Some(1)).unwrap();
            if f == Format::MXFP4 && what == "tiny" {
                assert!(
                    vals.iter().any(|v| v.is_subnormal()),
                    "{f}: no subnormal value"
                );
            }
            for dtype in [DType::F16, DType::BF16] {
                let mut out = vec![0u8; vals.len() * 2];
                cpu::dequant_to_bytes_with(f, &src, dtype, &mut out, Some(1)).unwrap();
                for (i, (v, o)) in vals.iter().zip(out.chunks_exact(2)).enumerate() {
                    let got = u16::from_le_bytes([o[0], o[1]]);
                    let (want, got_nan) = match dtype {
                        DType::F16 => (f16::from_f32(*v).to_bits(), f16::from_bits(got).is_nan()),
                        _ => (bf16::from_f32(*v).to_bits(), bf16::from_bits(got).is_nan()),
                    };
                    assert!(
                        got == want || (v.is_nan() && got_nan),
                        "{f} {dtype} {what} [{i}]: {v:e} gave {got:#06x}, want {want:#06x}"
                    );
                }
            }
        }
    }
}

#[test]
fn half_rounding_is_nearest_even() {
    // 1 + 2^-11 is halfway between two f16s: rounds to 1 (even). 1 + 3*2^-11 rounds up to 1 + 2^-9.
    let src: Vec<u8> = [
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        65520.0,
        1.0 + 2f32.powi(-8),
    ]
    .iter()
    .flat_map(|v| v.to_le_bytes())
    .collect();
    let mut out = vec![0u8; 8];
    cpu::dequant_to_bytes(Format::F32, &src, DType::F16, &mut out).unwrap();
    let h: Vec<u16> = out
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(h, [0x3C00, 0x3C02, 0x7C00, 0x3C04]);
    cpu::dequant_to_bytes(Format::F32, &src, DType::BF16, &mut out).unwrap();
    let b: Vec<u16> = out
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to even (1.0).
    assert_eq!(b[3], 0x3F80);
}

#[test]
fn thread_counts_give_identical_output() {
    for &f in Format::ALL {
        let src = rng::bytes(
            (200_000 / f.block_elems() + 5) * f.block_bytes(),
            3 + f.id() as u64,
        );
        let one = cpu::dequant_f32_with(f, &src, Some(1)).unwrap();
        let all = cpu::dequant_f32_with(f, &src, None).unwrap();
        let three = cpu::dequant_f32_with(f, &src, Some(3)).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&one), bits(&all), "{f}: 1 thread vs all");
        assert_eq!(bits(&one), bits(&three), "{f}: 1 thread vs 3");
        for dtype in [DType::F16, DType::BF16] {
            let mut a = vec![0u8; one.len() * 2];
            let mut b = vec![0u8; one.len() * 2];
            cpu::dequant_to_bytes_with(f, &src, dtype, &mut a, Some(1)).unwrap();
            cpu::dequant_to_bytes_with(f, &src, dtype, &mut b, Some(2)).unwrap();
            assert_eq!(a, b, "{f} {dtype}: 1 vs 2 threads");
        }
    }
}
