//! The CPU reference of the inference kernels (`gguf_dequant::ops`) against naive f64 loops over
//! `cpu::dequant_f32`, for every format: `mul_mat` (ragged K, N and batch), `get_rows`,
//! `mul_mat_id` in both x modes; NaN and Inf in x; the accuracy contract against an f32 loop; and
//! every error path.

use gguf_dequant::formats::sample::normal_blocks;
use gguf_dequant::ops::{self, Sums};
use gguf_dequant::{cpu, Error, Format};

use crate::support::codec::same;
use crate::support::rng::{random_blocks, Rng};

/// Equal bits, or both NaN.
fn same64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// `n` activations in [-2, 2) from `seed`, with exact zeros and ones among them.
fn xs(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| match i % 11 {
            5 => 0.0,
            7 => 1.0,
            _ => (rng.next_u64() >> 40) as f32 / (1u32 << 22) as f32 - 2.0,
        })
        .collect()
}

/// Σ_k f64(w[row][k]) · f64(x[xrow][k]) and Σ|·|, the naive loop.
fn naive_dot(w: &[f32], row: usize, x: &[f32], xrow: usize, k: usize) -> (f64, f64) {
    let (mut s, mut a) = (0.0f64, 0.0f64);
    for i in 0..k {
        let p = f64::from(w[row * k + i]) * f64::from(x[xrow * k + i]);
        s += p;
        a += p.abs();
    }
    (s, a)
}

/// The naive [batch, N] sums of a [K, N] weight.
fn naive_mul_mat(f: Format, blocks: &[u8], k: usize, x: &[f32], batch: usize) -> Sums {
    let w = cpu::dequant_f32(f, blocks).unwrap();
    let n = w.len() / k;
    let (mut y, mut abs) = (vec![], vec![]);
    for b in 0..batch {
        for r in 0..n {
            let (s, a) = naive_dot(&w, r, x, b, k);
            y.push(s);
            abs.push(a);
        }
    }
    Sums {
        y,
        abs,
        k,
        slack: Vec::new(),
    }
}

/// Bit-for-bit equality of two [`Sums`] (any NaN equals any NaN).
fn assert_same(got: &Sums, want: &Sums, what: &str) {
    assert_eq!(got.k, want.k, "{what}: k");
    assert_eq!(got.y.len(), want.y.len(), "{what}: y.len()");
    assert_eq!(got.abs.len(), want.abs.len(), "{what}: abs.len()");
    for i in 0..want.y.len() {
        assert!(
            same64(got.y[i], want.y[i]),
            "{what}: y[{i}] = {} want {}",
            got.y[i],
            want.y[i]
        );
        assert!(
            same64(got.abs[i], want.abs[i]),
            "{what}: abs[{i}] = {} want {}",
            got.abs[i],
            want.abs[i]
        );
    }
}

#[test]
fn mul_mat_equals_naive_f64_loop_for_every_format() {
    for (fi, &f) in Format::ALL.iter().enumerate() {
        for k_blocks in [1, 3] {
            let k = k_blocks * f.block_elems();
            for n in [1, 3] {
                let blocks = random_blocks(f, k_blocks * n, (fi * 100 + k_blocks * 10 + n) as u64);
                for batch in [1, 3, 17] {
                    let x = xs(batch * k, (fi * 1000 + batch) as u64);
                    let got = ops::mul_mat(f, &blocks, k, &x, batch).unwrap();
                    let what = format!("{f} K={k} N={n} batch={batch}");
                    assert_same(&got, &naive_mul_mat(f, &blocks, k, &x, batch), &what);
                }
            }
        }
    }
}

#[test]
fn mul_mat_many_rows_in_parallel_equals_naive() {
    let f = Format::Q4_K;
    let (k, n, batch) = (2 * f.block_elems(), 300, 4);
    let blocks = random_blocks(f, 2 * n, 41);
    let x = xs(batch * k, 42);
    let got = ops::mul_mat(f, &blocks, k, &x, batch).unwrap();
    assert_same(&got, &naive_mul_mat(f, &blocks, k, &x, batch), "Q4_K N=300");
    assert_eq!(got, ops::mul_mat(f, &blocks, k, &x, batch).unwrap());
}

#[test]
fn batched_columns_equal_single_columns() {
    let f = Format::Q6_K;
    let (k, n, batch) = (f.block_elems(), 3, 5);
    let blocks = random_blocks(f, n, 3);
    let x = xs(batch * k, 4);
    let all = ops::mul_mat(f, &blocks, k, &x, batch).unwrap();
    for b in 0..batch {
        let one = ops::mul_mat(f, &blocks, k, &x[b * k..(b + 1) * k], 1).unwrap();
        assert_eq!(one.y, all.y[b * n..(b + 1) * n], "column {b}");
        assert_eq!(one.abs, all.abs[b * n..(b + 1) * n], "column {b}");
    }
}

#[test]
fn get_rows_equal_the_dequantised_rows() {
    for (fi, &f) in Format::ALL.iter().enumerate() {
        let (k, n) = (2 * f.block_elems(), 3);
        let blocks = random_blocks(f, 2 * n, 500 + fi as u64);
        let w = cpu::dequant_f32(f, &blocks).unwrap();
        let ids = [0, n as u32 - 1, 1, 0];
        let got = ops::get_rows(f, &blocks, k, &ids).unwrap();
        assert_eq!(got.len(), ids.len() * k, "{f}");
        for (pos, &id) in ids.iter().enumerate() {
            let want = &w[id as usize * k..(id as usize + 1) * k];
            for (i, (&g, &c)) in got[pos * k..(pos + 1) * k].iter().zip(want).enumerate() {
                assert!(
                    same(g, c),
                    "{f}: ids[{pos}] = {id}, value {i}: {g} want {c}"
                );
            }
        }
        assert!(ops::get_rows(f, &blocks, k, &[]).unwrap().is_empty(), "{f}");
    }
}

#[test]
fn mul_mat_id_equals_naive_in_both_x_modes() {
    let (n, experts, slots) = (2, 3, 2);
    let ids = [2u32, 0, 1, 1, 0, 2];
    let tokens = ids.len() / slots;
    for (fi, &f) in Format::ALL.iter().enumerate() {
        let k = f.block_elems();
        let blocks = random_blocks(f, n * experts, 900 + fi as u64);
        let w = cpu::dequant_f32(f, &blocks).unwrap();
        for x_per_slot in [false, true] {
            let rows = if x_per_slot { ids.len() } else { tokens };
            let x = xs(rows * k, 950 + fi as u64);
            let got = ops::mul_mat_id(f, &blocks, k, n, &x, x_per_slot, &ids, slots).unwrap();
            let (mut y, mut abs) = (vec![], vec![]);
            for t in 0..tokens {
                for s in 0..slots {
                    let p = t * slots + s;
                    let xrow = if x_per_slot { p } else { t };
                    for r in 0..n {
                        let (a, b) = naive_dot(&w, ids[p] as usize * n + r, &x, xrow, k);
                        y.push(a);
                        abs.push(b);
                    }
                }
            }
            let what = format!("{f} x_per_slot={x_per_slot}");
            assert_same(
                &got,
                &Sums {
                    y,
                    abs,
                    k,
                    slack: Vec::new(),
                },
                &what,
            );
        }
    }
}

#[test]
fn mul_mat_id_with_one_expert_and_slot_is_mul_mat() {
    let f = Format::IQ4_XS;
    let (k, n, tokens) = (f.block_elems(), 3, 4);
    let blocks = random_blocks(f, n, 77);
    let x = xs(tokens * k, 78);
    let ids = vec![0u32; tokens];
    for x_per_slot in [false, true] {
        let id = ops::mul_mat_id(f, &blocks, k, n, &x, x_per_slot, &ids, 1).unwrap();
        assert_eq!(id, ops::mul_mat(f, &blocks, k, &x, tokens).unwrap());
    }
}

#[test]
fn nan_and_inf_in_x_propagate() {
    for (fi, &f) in Format::ALL.iter().enumerate() {
        let (k, n) = (f.block_elems(), 3);
        let blocks = random_blocks(f, n, 1300 + fi as u64);
        let mut x = xs(2 * k, 1400 + fi as u64);
        x[0] = f32::NAN;
        x[k + k / 2] = f32::INFINITY;
        let got = ops::mul_mat(f, &blocks, k, &x, 2).unwrap();
        for r in 0..n {
            assert!(got.y[r].is_nan(), "{f}: NaN in x, y[{r}] = {}", got.y[r]);
            let yi = got.y[n + r];
            assert!(!yi.is_finite(), "{f}: Inf in x, y[{}] = {yi}", n + r);
        }
        let id = ops::mul_mat_id(f, &blocks, k, n, &x, true, &[0, 0], 1).unwrap();
        assert_same(&id, &got, &format!("{f} mul_mat_id"));
    }
    // Positive weights: +Inf in x is +Inf in y, and only +Inf passes the contract.
    let w: Vec<u8> = [1.0f32, 2.0, 0.5, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let got = ops::mul_mat(Format::F32, &w, 2, &[f32::INFINITY, 1.0], 1).unwrap();
    assert_eq!(got.y, [f64::INFINITY, f64::INFINITY]);
    assert_eq!(got.abs, [f64::INFINITY, f64::INFINITY]);
    assert_eq!(got.to_f32(), [f32::INFINITY, f32::INFINITY]);
    assert_eq!(got.fraction(0, f32::INFINITY), 0.0);
    assert_eq!(got.fraction(0, f32::NEG_INFINITY), f64::INFINITY);
    assert_eq!(got.fraction(0, f32::MAX), f64::INFINITY);
    assert_eq!(got.fraction(0, f32::NAN), f64::INFINITY);
    let got = ops::mul_mat(Format::F32, &w, 2, &[1.0, f32::NAN], 1).unwrap();
    assert!(got.y.iter().all(|y| y.is_nan()), "{:?}", got.y);
    assert_eq!(got.fraction(1, f32::NAN), 0.0);
    assert_eq!(got.fraction(1, 1.0), f64::INFINITY);
}

/// Blocks whose values are finite, normal and far from overflow ([`normal_blocks`], which keeps
/// F64's random bit patterns: those are replaced by activations here).
fn normal_weights(f: Format, n_blocks: usize, seed: u64) -> Vec<u8> {
    match f {
        Format::F64 => xs(n_blocks, seed)
            .iter()
            .flat_map(|&v| f64::from(v).to_le_bytes())
            .collect(),
        _ => normal_blocks(f, n_blocks, seed),
    }
}

#[test]
fn f32_accumulation_is_within_the_bound_and_a_wrong_value_is_not() {
    for (fi, &f) in Format::ALL.iter().enumerate() {
        let (k, n, batch) = (4 * f.block_elems(), 3, 2);
        let blocks = normal_weights(f, 4 * n, 1700 + fi as u64);
        let x = xs(batch * k, 1800 + fi as u64);
        let sums = ops::mul_mat(f, &blocks, k, &x, batch).unwrap();
        assert_eq!(sums.max_fraction(&sums.to_f32()).unwrap(), 0.0, "{f}");
        // A kernel that sums f32 products in f32, in k order.
        let w = cpu::dequant_f32(f, &blocks).unwrap();
        let mut f32_sums = vec![];
        for b in 0..batch {
            for r in 0..n {
                let s: f32 = (0..k).map(|i| w[r * k + i] * x[b * k + i]).sum();
                f32_sums.push(s);
            }
        }
        let worst = sums.max_fraction(&f32_sums).unwrap();
        assert!(
            worst <= 1.0,
            "{f}: f32 accumulation at {worst} of the bound"
        );
        // Off by twice the bound fails.
        let i = (0..sums.y.len())
            .max_by(|&a, &b| sums.abs[a].total_cmp(&sums.abs[b]))
            .unwrap();
        let mut bad = sums.to_f32();
        bad[i] = (sums.y[i] + 2.0 * sums.bound(i)) as f32;
        assert!(sums.max_fraction(&bad).unwrap() > 1.0, "{f}");
    }
}

/// `r` is an [`Error::InvalidShape`] (or [`Error::PartialBlock`]) whose message contains
/// `needle`.
#[track_caller]
fn assert_err<T: std::fmt::Debug>(r: gguf_dequant::Result<T>, needle: &str) {
    let e = r.expect_err(needle);
    let msg = e.to_string();
    assert!(
        matches!(e, Error::InvalidShape(_) | Error::PartialBlock { .. }),
        "{needle}: {e:?}"
    );
    assert!(msg.contains(needle), "`{msg}` does not name `{needle}`");
}

#[test]
fn every_error_path_names_the_problem() {
    let q = Format::Q4_0; // 32 values in 18 bytes
    let w = random_blocks(q, 6, 1); // K = 64: 3 rows; K = 32, N = 2: 3 experts
    let x64 = xs(64, 2);

    // K.
    assert_err(
        ops::get_rows(q, &w, 0, &[0]),
        "K = 0 is not a positive multiple of Q4_0's block of 32 values",
    );
    assert_err(ops::mul_mat(q, &w, 48, &x64, 1), "K = 48 is not a positive");
    assert_err(
        ops::mul_mat_id(q, &w, 16, 2, &x64, false, &[0], 1),
        "K = 16 is not a positive",
    );
    assert_err(
        ops::get_rows(Format::F64, &[0; 8], usize::MAX, &[0]),
        "overflows usize",
    );

    // Blocks.
    assert_err(
        ops::mul_mat(q, &w[..17], 32, &x64[..32], 1),
        "17 bytes is not a whole number of 18-byte blocks",
    );
    assert_err(
        ops::get_rows(q, &w[..54], 64, &[0]),
        "54 bytes of Q4_0 is not a positive whole number of rows (36 bytes each at K = 64)",
    );
    assert_err(ops::mul_mat(q, &[], 32, &x64[..32], 1), "0 bytes of Q4_0");
    assert_err(
        ops::mul_mat_id(q, &w[..90], 32, 2, &x64[..32], false, &[0], 1),
        "90 bytes of Q4_0 is not a positive whole number of experts (36 bytes each",
    );

    // ids.
    assert_err(
        ops::get_rows(q, &w, 64, &[0, 2, 3]),
        "ids[2] = 3 is not below N = 3",
    );
    assert_err(
        ops::get_rows(q, &w, 64, &[u32::MAX]),
        "ids[0] = 4294967295 is not below N = 3",
    );
    assert_err(
        ops::mul_mat_id(q, &w, 32, 2, &x64, false, &[0, 1, 2, 3], 2),
        "ids[3] (token 1, slot 1) = 3 is not below E = 3",
    );
    assert_err(
        ops::mul_mat_id(q, &w, 32, 2, &x64, false, &[0, 1, 2], 2),
        "ids holds 3 values: not a positive whole number of tokens of 2 slots",
    );
    assert_err(
        ops::mul_mat_id(q, &w, 32, 2, &[], false, &[], 2),
        "ids holds 0 values",
    );
    assert_err(
        ops::mul_mat_id(q, &w, 32, 2, &x64, false, &[0, 1], 0),
        "slots = 0",
    );
    assert_err(ops::mul_mat_id(q, &w, 32, 0, &x64, false, &[0], 1), "N = 0");
    assert_err(
        ops::mul_mat_id(q, &w, 32, usize::MAX, &x64, false, &[0], 1),
        "overflows usize",
    );

    // x and batch.
    assert_err(ops::mul_mat(q, &w, 64, &x64, 0), "batch = 0");
    assert_err(
        ops::mul_mat(q, &w, 64, &x64[..63], 1),
        "x holds 63 values, batch × K = 1 × 64 = 64 were expected",
    );
    assert_err(
        ops::mul_mat(q, &w, 64, &x64, usize::MAX),
        "= more than usize::MAX were expected",
    );
    assert_err(
        ops::mul_mat_id(q, &w, 32, 2, &xs(96, 3), false, &[0, 1, 2, 0], 2),
        "x holds 96 values, tokens × K = 2 × 32 = 64 were expected",
    );
    // Slot mode wants 4 rows: 64 values are too few.
    assert_err(
        ops::mul_mat_id(q, &w, 32, 2, &x64, true, &[0, 1, 2, 0], 2),
        "x holds 64 values, tokens × slots × K = 4 × 32 = 128",
    );

    // Comparing results.
    let sums = ops::mul_mat(q, &w, 64, &x64, 1).unwrap();
    assert_err(
        sums.max_fraction(&[0.0; 2]),
        "2 values to compare with 3 results",
    );
}
