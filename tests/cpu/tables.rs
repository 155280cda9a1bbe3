//! The generated `src/formats/tables.rs` equals `spec/tables.json` (the spec's tables), entry for entry.

use gguf_dequant::formats::tables::*;
use serde_json::Value;

fn tables_json() -> Value {
    crate::support::spec_tables()
}

/// The JSON array `key` as exact integers (u64 grids stay exact: serde_json keeps u64).
fn ints(t: &Value, key: &str) -> Vec<i128> {
    t[key]
        .as_array()
        .unwrap_or_else(|| panic!("tables.json has no array `{key}`"))
        .iter()
        .map(|v| {
            v.as_u64()
                .map(i128::from)
                .or_else(|| v.as_i64().map(i128::from))
                .unwrap_or_else(|| panic!("`{key}` holds a non-integer {v}"))
        })
        .collect()
}

fn check<T: Copy + Into<i128>>(t: &Value, key: &str, rust: &[T]) {
    let json = ints(t, key);
    let rust: Vec<i128> = rust.iter().map(|&x| x.into()).collect();
    assert_eq!(json.len(), rust.len(), "{key}: length");
    for (i, (a, b)) in json.iter().zip(&rust).enumerate() {
        assert_eq!(a, b, "{key}[{i}]");
    }
}

#[test]
fn grids_equal_json() {
    let t = tables_json();
    check(&t, "iq2xxs_grid", &IQ2XXS_GRID);
    check(&t, "iq2xs_grid", &IQ2XS_GRID);
    check(&t, "iq2s_grid", &IQ2S_GRID);
    check(&t, "iq3xxs_grid", &IQ3XXS_GRID);
    check(&t, "iq3s_grid", &IQ3S_GRID);
    check(&t, "iq1s_grid", &IQ1S_GRID);
}

#[test]
fn small_tables_equal_json() {
    let t = tables_json();
    check(&t, "ksigns_iq2xs", &KSIGNS_IQ2XS);
    check(&t, "kvalues_iq4nl", &KVALUES_IQ4NL);
    check(&t, "kvalues_fp4", &KVALUES_FP4);
    check(&t, "kvalues_mxfp4", &KVALUES_FP4);
}

#[test]
fn grid_bytes_equal_json_byte_expansion() {
    let t = tables_json();
    let bytes = |key: &str| ints(&t["_bytes"], key);
    let flat64 = |g: &[u64]| -> Vec<i128> {
        g.iter()
            .flat_map(|e| e.to_le_bytes())
            .map(i128::from)
            .collect()
    };
    assert_eq!(bytes("iq2xxs_grid"), flat64(&IQ2XXS_GRID));
    assert_eq!(bytes("iq2xs_grid"), flat64(&IQ2XS_GRID));
    assert_eq!(bytes("iq2s_grid"), flat64(&IQ2S_GRID));
    let flat32 = |g: &[u32]| -> Vec<i128> {
        g.iter()
            .flat_map(|e| e.to_le_bytes())
            .map(i128::from)
            .collect()
    };
    assert_eq!(bytes("iq3xxs_grid"), flat32(&IQ3XXS_GRID));
    assert_eq!(bytes("iq3s_grid"), flat32(&IQ3S_GRID));
    // iq1s_grid bytes are given as int8.
    let iq1: Vec<i128> = IQ1S_GRID
        .iter()
        .flat_map(|e| e.to_le_bytes())
        .map(|b| i128::from(b as i8))
        .collect();
    assert_eq!(bytes("iq1s_grid"), iq1);
}

#[test]
fn ksigns_is_the_parity_rule() {
    for (k, &s) in KSIGNS_IQ2XS.iter().enumerate() {
        let parity = (k as u8).count_ones() % 2;
        assert_eq!(s, k as u8 | ((parity as u8) << 7), "ksigns_iq2xs[{k}]");
        assert_eq!(
            s.count_ones() % 2,
            0,
            "ksigns_iq2xs[{k}] has an odd number of signs"
        );
    }
}

#[test]
fn grid_values_are_in_their_documented_sets() {
    let in_set = |g: &[u8], set: &[u8], name: &str| {
        for &b in g {
            assert!(set.contains(&b), "{name}: byte {b} not in {set:?}");
        }
    };
    let b64 = |g: &[u64]| g.iter().flat_map(|e| e.to_le_bytes()).collect::<Vec<u8>>();
    let b32 = |g: &[u32]| g.iter().flat_map(|e| e.to_le_bytes()).collect::<Vec<u8>>();
    in_set(&b64(&IQ2XXS_GRID), &[8, 25, 43], "iq2xxs_grid");
    in_set(&b64(&IQ2XS_GRID), &[8, 25, 43], "iq2xs_grid");
    in_set(&b64(&IQ2S_GRID), &[8, 25, 43], "iq2s_grid");
    in_set(
        &b32(&IQ3XXS_GRID),
        &[4, 12, 20, 28, 36, 44, 52, 62],
        "iq3xxs_grid",
    );
    in_set(&b32(&IQ3S_GRID), &[1, 3, 5, 7, 9, 11, 13, 15], "iq3s_grid");
    in_set(&b64(&IQ1S_GRID), &[0xFF, 0, 1], "iq1s_grid");
}
