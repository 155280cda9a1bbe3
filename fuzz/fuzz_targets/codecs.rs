//! Fuzz target: every CPU codec on arbitrary bytes.
//!
//! Byte 0 picks the format (`Format::ALL[b % len]`); the rest is taken as blocks. Every entry point
//! must not panic: whole blocks decode through `dequant_into`, `dequant_f32` and `dequant_to_bytes`
//! for each output dtype, and all of them agree bit for bit; a partial block or a wrong destination
//! size is an error, never a panic or an out-of-bounds write.
#![no_main]

use gguf_dequant::{cpu, DType, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let format = Format::ALL[pick as usize % Format::ALL.len()];
    let spec = format.spec();

    // The raw tail, partial block and all: must be an error exactly when it is not whole blocks.
    let whole = rest.len() % spec.bytes == 0;
    assert_eq!(format.values_for(rest.len()).is_some(), whole);
    assert_eq!(cpu::dequant_f32_with(format, rest, Some(1)).is_ok(), whole);

    // Whole blocks.
    let src = &rest[..rest.len() - rest.len() % spec.bytes];
    let n = src.len() / spec.bytes * spec.elems;
    assert_eq!(format.values_for(src.len()), Some(n));

    let mut into = vec![0f32; n];
    cpu::dequant_into(format, src, &mut into).expect("dequant_into");
    let f32s = cpu::dequant_f32_with(format, src, Some(1)).expect("dequant_f32");
    assert_eq!(
        bits(&into),
        bits(&f32s),
        "{format:?}: dequant_into vs dequant_f32"
    );

    for dtype in DType::ALL {
        let mut out = vec![0u8; n * dtype.size()];
        cpu::dequant_to_bytes_with(format, src, dtype, &mut out, Some(1)).expect("to_bytes");
        if dtype == DType::F32 {
            let le: Vec<u8> = into.iter().flat_map(|v| v.to_le_bytes()).collect();
            assert_eq!(out, le, "{format:?}: dequant_to_bytes f32 vs dequant_into");
        }
        // A destination one value short or one byte long is refused, not written past.
        if !out.is_empty() {
            let short = out.len() - dtype.size();
            assert!(
                cpu::dequant_to_bytes_with(format, src, dtype, &mut out[..short], Some(1)).is_err()
            );
        }
        let mut long = vec![0u8; n * dtype.size() + 1];
        assert!(cpu::dequant_to_bytes_with(format, src, dtype, &mut long, Some(1)).is_err());
    }
    let mut wrong = vec![0f32; n + 1];
    assert!(cpu::dequant_into(format, src, &mut wrong).is_err());
});

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}
