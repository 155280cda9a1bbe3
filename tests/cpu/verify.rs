//! The GPU-vs-CPU comparison that `verify` and `selftest` report: bit equality (any two NaNs equal),
//! absolute difference and distance in ulps, for each output dtype.

use gguf_dequant::verify::compare;
use gguf_dequant::DType;

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f16s(v: &[u16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn identical_and_nan_payloads_are_equal() {
    let a = f32s(&[1.0, -0.0, f32::from_bits(0x7FC0_0001), f32::INFINITY]);
    let b = f32s(&[1.0, -0.0, f32::from_bits(0x7FC0_0002), f32::INFINITY]);
    let c = compare(DType::F32, &a, &b);
    assert!(c.ok(), "{c:?}");
    assert_eq!(c.n_values, 4);
}

#[test]
fn differences_are_counted_and_measured() {
    let one_up = f32::from_bits(1.0f32.to_bits() + 3);
    let got = f32s(&[1.0, one_up, 0.0, f32::NAN, 2.0]);
    let want = f32s(&[1.0, 1.0, -0.0, 5.0, 2.0]);
    let c = compare(DType::F32, &got, &want);
    assert_eq!(c.mismatches, 3);
    assert_eq!(c.first_mismatch, Some(1));
    assert_eq!(c.max_ulp, 3);
    assert_eq!(c.max_abs_diff, (one_up - 1.0) as f64);
}

#[test]
fn ulps_cross_zero_and_work_for_16_bit_dtypes() {
    // +smallest subnormal against -smallest subnormal: two steps apart through ±0.
    let c = compare(
        DType::F32,
        &f32s(&[f32::from_bits(1)]),
        &f32s(&[f32::from_bits(0x8000_0001)]),
    );
    assert_eq!(c.max_ulp, 2);
    // f16 1.0 (0x3C00) against 0x3C05.
    let c = compare(DType::F16, &f16s(&[0x3C05]), &f16s(&[0x3C00]));
    assert_eq!((c.mismatches, c.max_ulp), (1, 5));
    // bf16 1.0 (0x3F80) against 0x3F81: 2^-7 apart.
    let c = compare(DType::BF16, &f16s(&[0x3F81]), &f16s(&[0x3F80]));
    assert_eq!(
        (c.mismatches, c.max_ulp, c.max_abs_diff),
        (1, 1, 1.0 / 128.0)
    );
}
