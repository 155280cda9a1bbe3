//! Fuzz target: the `.npy` reader (`gguf_dequant::npy`, the command line's `apply --input`) on
//! whole-file bytes.
//!
//! `Npy::parse` must never panic, and its errors must be one printable line. An accepted file must
//! keep the promises the module documents: at most `MAX_DIMS` dims; the data is the input's tail;
//! `check_data` accepts exactly when the element size is known and the data is `count × size`
//! bytes; `f32_values` and `int_values` return exactly `count` values in C order when the dtype
//! is theirs and the data checks, nothing otherwise, and those values are the data's, decoded and
//! reordered here independently.
#![no_main]

use gguf_dequant::npy::{Npy, MAX_DIMS};
use libfuzzer_sys::fuzz_target;

/// Above this many values the element-by-element comparison is skipped (it costs dims × values).
const COMPARE_MAX: usize = 1 << 14;

fn printable(msg: &str) {
    assert!(
        !msg.chars().any(char::is_control),
        "control character in {msg:?}"
    );
}

/// The file offset of each element in C order: element `i`'s multi-index, last dim fastest, and
/// the offset in Fortran order (first dim fastest) when `fortran`.
fn file_offsets(shape: &[usize], fortran: bool, n: usize) -> Vec<usize> {
    if !fortran {
        return (0..n).collect();
    }
    let mut strides = Vec::with_capacity(shape.len());
    let mut step = 1;
    for &d in shape {
        strides.push(step);
        step *= d;
    }
    (0..n)
        .map(|i| {
            let (mut rest, mut offset) = (i, 0);
            for (k, &d) in shape.iter().enumerate().rev() {
                offset += (rest % d) * strides[k];
                rest /= d;
            }
            offset
        })
        .collect()
}

fn int_of(c: &[u8], signed: bool, big: bool) -> i128 {
    macro_rules! read {
        ($t:ty) => {{
            let b = c.try_into().unwrap();
            (if big {
                <$t>::from_be_bytes(b)
            } else {
                <$t>::from_le_bytes(b)
            }) as i128
        }};
    }
    match (c.len(), signed) {
        (1, true) => read!(i8),
        (1, false) => read!(u8),
        (2, true) => read!(i16),
        (2, false) => read!(u16),
        (4, true) => read!(i32),
        (4, false) => read!(u32),
        (8, true) => read!(i64),
        (8, false) => read!(u64),
        _ => unreachable!("integer of {} bytes", c.len()),
    }
}

fuzz_target!(|bytes: &[u8]| {
    let npy = match Npy::parse(bytes) {
        Ok(n) => n,
        Err(e) => {
            assert!(!e.is_empty());
            printable(&e);
            return;
        }
    };
    let descr = &npy.descr;
    assert!(npy.shape.len() <= MAX_DIMS, "{:?}", npy.shape);
    assert!(!descr.text.is_empty());
    let data = npy.data();
    // The data is what follows the header: the input's tail, after at least the 10-byte preamble.
    assert!(data.len() + 10 <= bytes.len());
    assert!(bytes.ends_with(data));
    let name = descr.numpy_name();
    assert!(!name.is_empty());
    if descr.is_integer() {
        assert!(matches!(descr.size, 1 | 2 | 4 | 8) && matches!(descr.kind, 'i' | 'u'));
    }
    if descr.is_f32() {
        assert!(descr.size == 4 && descr.kind == 'f');
    }

    let count = npy.count();
    assert_eq!(
        count,
        npy.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)),
    );
    let fits = descr.size > 0
        && count.and_then(|n| n.checked_mul(descr.size as u64)) == Some(data.len() as u64);
    let checked = npy.check_data();
    match &checked {
        Ok(()) => assert!(fits),
        Err(e) => {
            assert!(!fits, "check_data refused {e:?}");
            printable(e);
        }
    }

    let f32s = npy.f32_values();
    let ints = npy.int_values();
    if !(checked.is_ok() && descr.is_f32()) {
        assert!(
            f32s.is_empty(),
            "{} f32 values from {:?}",
            f32s.len(),
            descr
        );
    }
    if !(checked.is_ok() && descr.is_integer()) {
        assert!(
            ints.is_empty(),
            "{} int values from {:?}",
            ints.len(),
            descr
        );
    }
    if checked.is_err() {
        return;
    }
    // Checked: the count is at most the data's length, so it and every dim fit a usize.
    let n = count.unwrap() as usize;
    assert!(n <= data.len());
    assert_eq!(f32s.len(), if descr.is_f32() { n } else { 0 });
    assert_eq!(ints.len(), if descr.is_integer() { n } else { 0 });
    if n > COMPARE_MAX || !(descr.is_f32() || descr.is_integer()) {
        return;
    }
    let shape: Vec<usize> = npy.shape.iter().map(|&d| d as usize).collect();
    let offsets = file_offsets(&shape, npy.fortran, n);
    let size = descr.size;
    let element = |k: usize| &data[offsets[k] * size..][..size];
    if descr.is_f32() {
        for (k, v) in f32s.iter().enumerate() {
            let b: [u8; 4] = element(k).try_into().unwrap();
            let want = if descr.big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            };
            assert_eq!(v.to_bits(), want, "value {k} of {:?}", npy.shape);
        }
    } else if descr.is_integer() {
        for (k, &v) in ints.iter().enumerate() {
            let want = int_of(element(k), descr.kind == 'i', descr.big_endian);
            assert_eq!(v, want, "value {k} of {:?} {:?}", npy.shape, descr);
        }
    }
});
