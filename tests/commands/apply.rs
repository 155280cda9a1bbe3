//! `apply` (one kernel on one tensor, X and Y as .npy) and `verify --op` (the kernels on every
//! matrix) as a user runs them: on the CPU reference everywhere, on lavapipe Vulkan and llvmpipe
//! GL where present (no silent skips with `CI=true`). Y is checked against `gguf_dequant::ops`:
//! bit for bit on the CPU, within the f32 bound K·2⁻²³·Σ|w·x| on a GPU, and get_rows bit for bit
//! everywhere.

use std::path::{Path, PathBuf};
use std::process::Output;

use gguf_dequant::formats::sample::{finite_blocks, normal_blocks, Rng};
use gguf_dequant::gguf::GgufWriter;
use gguf_dequant::gpu::kernels::Op;
use gguf_dequant::{ops, Format, GgufFile};
use serde_json::Value as Json;

use crate::support::cli::{have, run, stderr, text};

const BACKENDS: [&str; 2] = ["vulkan", "gl"];

/// The weights of the test file: (name, format, dims).
const WEIGHTS: &[(&str, Format, &[u64])] = &[
    ("w.q4_0", Format::Q4_0, &[64, 5]),
    ("w.q4_k", Format::Q4_K, &[256, 3]),
    ("w.f16", Format::F16, &[16, 4]),
    // Three dims: 2 × 3 rows of 32 values.
    ("w.q8_0.3d", Format::Q8_0, &[32, 2, 3]),
];

/// A small model: the [`WEIGHTS`], a 1-D F32 vector and an I32 matrix (no shader).
fn model(dir: &Path) -> PathBuf {
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", "test");
    for (i, &(name, format, dims)) in WEIGHTS.iter().enumerate() {
        let n: u64 = dims.iter().product();
        let blocks = (n / format.block_elems() as u64) as usize;
        // One-value formats: finite, normal values (finite_blocks keeps every bit pattern).
        let data = if format.block_elems() == 1 {
            normal_blocks(format, blocks, 10 + i as u64)
        } else {
            finite_blocks(format, blocks, 10 + i as u64)
        };
        w.tensor(name, dims.to_vec(), format, data);
    }
    let ints: Vec<u8> = (0..8i32).flat_map(|v| (v - 3).to_le_bytes()).collect();
    w.tensor("v.f32", vec![8], Format::F32, vec![0; 32]).tensor(
        "w.i32",
        vec![4, 2],
        Format::I32,
        ints,
    );
    let path = dir.join("model.gguf");
    std::fs::write(&path, w.to_bytes()).unwrap();
    path
}

/// A version 1.0 .npy file: `descr`, `shape`, order, then `data` as given.
pub(crate) fn npy(descr: &str, shape: &[usize], fortran: bool, data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = if shape.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let order = if fortran { "True" } else { "False" };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    let pad = (64 - (10 + h.len() + 1) % 64) % 64;
    h.push_str(&" ".repeat(pad));
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(data);
    b
}

pub(crate) fn le_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `n` values uniform in [-1, 1).
fn random_x(n: usize, seed: u64) -> Vec<f32> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|_| (r.next_u64() >> 40) as f32 / (1u32 << 23) as f32 - 1.0)
        .collect()
}

/// Y's shape and values.
fn read_y(path: &Path) -> (Vec<u64>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    let f = npyz::NpyFile::new(&bytes[..]).unwrap();
    assert_eq!(f.header().dtype().descr(), "'<f4'");
    let shape = f.shape().to_vec();
    (shape, f.into_vec::<f32>().unwrap())
}

fn apply(file: &Path, tensor: &str, op: &str, x: &Path, y: &Path, backend: &str) -> Output {
    run(&[
        "apply",
        file.to_str().unwrap(),
        "--tensor",
        tensor,
        "--op",
        op,
        "--input",
        x.to_str().unwrap(),
        "--out",
        y.to_str().unwrap(),
        "--backend",
        backend,
    ])
}

fn ok(o: &Output, what: &str) {
    assert!(o.status.success(), "{what}: {}", stderr(o));
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Runs matvec (batch 1 from a 1-D X, 3 and 11) and matmul (batch 17) and get_rows (ids as
/// int64, uint8 and int32) on every weight, and matvec_id on the three-dim one, on `backend`; Y
/// against `ops`: exactly on the CPU, within the bound on a GPU; get_rows bit for bit on both.
fn all_ops_on(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = model(dir.path());
    let file = GgufFile::open(&path).unwrap();
    let cpu = backend == "cpu";
    let (x_path, y_path) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    for &(name, format, dims) in WEIGHTS {
        let t = file.tensor(name).unwrap();
        let blocks = file.tensor_data(t);
        let k = dims[0] as usize;
        let n = (t.n_elements / dims[0]) as usize;
        for (op, batch) in [("matvec", 0), ("matvec", 3), ("matvec", 11), ("matmul", 17)] {
            // Batch 0 stands for a 1-D X: batch 1.
            let rows = batch.max(1);
            let x = random_x(rows * k, batch as u64 + 1);
            let shape = if batch == 0 { vec![k] } else { vec![batch, k] };
            std::fs::write(&x_path, npy("<f4", &shape, false, &le_f32(&x))).unwrap();
            let o = apply(&path, name, op, &x_path, &y_path, backend);
            let what = format!("{op} batch {batch} on {name} ({format}) on {backend}");
            ok(&o, &what);
            let err = stderr(&o);
            assert_eq!(err.lines().count(), 1, "{what}: {err}");
            assert!(err.starts_with(op) && err.contains(name), "{what}: {err}");
            let (shape, y) = read_y(&y_path);
            assert_eq!(shape, [rows as u64, n as u64], "{what}");
            let want = ops::mul_mat(format, blocks, k, &x, rows).unwrap();
            if cpu {
                assert_eq!(bits(&y), bits(&want.to_f32()), "{what}");
            } else {
                let f = want.max_fraction(&y).unwrap();
                assert!(f <= 1.0, "{what}: fraction of the bound {f}");
            }
        }
        let last = (n - 1) as i64;
        let ids: Vec<i64> = vec![0, last, 1, last, 0];
        for (descr, data) in [
            (
                "<i8",
                ids.iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>(),
            ),
            ("|u1", ids.iter().map(|&v| v as u8).collect()),
            (
                "<i4",
                ids.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect(),
            ),
        ] {
            std::fs::write(&x_path, npy(descr, &[ids.len()], false, &data)).unwrap();
            let o = apply(&path, name, "get_rows", &x_path, &y_path, backend);
            let what = format!("get_rows {descr} on {name} on {backend}");
            ok(&o, &what);
            let (shape, y) = read_y(&y_path);
            assert_eq!(shape, [ids.len() as u64, k as u64], "{what}");
            let ids32: Vec<u32> = ids.iter().map(|&v| v as u32).collect();
            let want = ops::get_rows(format, blocks, k, &ids32).unwrap();
            assert_eq!(bits(&y), bits(&want), "{what}");
        }
    }
    // matvec_id on the three-dim weight, [32, 2, 3]: 3 experts of 2 rows; ids [2 tokens, 2 slots]
    // at both ends, x per token and per slot.
    let (name, format, dims) = WEIGHTS[3];
    let t = file.tensor(name).unwrap();
    let (k, n, experts) = (dims[0] as usize, dims[1] as usize, dims[2] as u32);
    let ids = [0u32, experts - 1, experts - 1, 1];
    let ids_path = dir.path().join("ids.npy");
    let data: Vec<u8> = ids.iter().flat_map(|v| (*v as i64).to_le_bytes()).collect();
    std::fs::write(&ids_path, npy("<i8", &[2, 2], false, &data)).unwrap();
    for (rows, x_per_slot) in [(2usize, false), (4, true)] {
        let x = random_x(rows * k, rows as u64);
        std::fs::write(&x_path, npy("<f4", &[rows, k], false, &le_f32(&x))).unwrap();
        let o = run(&[
            "apply",
            path.to_str().unwrap(),
            "--tensor",
            name,
            "--op",
            "matvec_id",
            "--input",
            x_path.to_str().unwrap(),
            "--ids",
            ids_path.to_str().unwrap(),
            "-o",
            y_path.to_str().unwrap(),
            "--backend",
            backend,
        ]);
        let what = format!("matvec_id x rows {rows} on {backend}");
        ok(&o, &what);
        let (shape, y) = read_y(&y_path);
        assert_eq!(shape, [2, 2, n as u64], "{what}");
        let blocks = file.tensor_data(t);
        let want = ops::mul_mat_id(format, blocks, k, n, &x, x_per_slot, &ids, 2).unwrap();
        if cpu {
            assert_eq!(bits(&y), bits(&want.to_f32()), "{what}");
        } else {
            let f = want.max_fraction(&y).unwrap();
            assert!(f <= 1.0, "{what}: fraction of the bound {f}");
        }
    }
    let mut keep = vec!["ids.npy", "model.gguf", "x.npy", "y.npy"];
    keep.sort();
    assert_eq!(names_in(dir.path()), keep, "stray files");
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn apply_on_the_cpu_is_the_reference() {
    all_ops_on("cpu");
}

#[test]
fn apply_on_gpus_is_within_the_bound() {
    for backend in BACKENDS {
        if have(backend, "apply_on_gpus_is_within_the_bound") {
            all_ops_on(backend);
        }
    }
}

/// The CPU backend takes every format: an I32 matrix (no shader) multiplies exactly. Fortran-order
/// X and big-endian ids read as NumPy means them; `--quiet` prints nothing.
#[test]
fn apply_reads_any_layout_and_format_on_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let path = model(dir.path());
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    // w.i32 is [[-3, -2, -1, 0], [1, 2, 3, 4]]; X = [[1, 0, 0, 1], [0, 1, 1, 0]].
    let x_c = [1.0f32, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0];
    std::fs::write(&x, npy("<f4", &[2, 4], false, &le_f32(&x_c))).unwrap();
    let o = run(&[
        "apply",
        path.to_str().unwrap(),
        "--tensor",
        "w.i32",
        "--op",
        "matmul",
        "--input",
        x.to_str().unwrap(),
        "-o",
        y.to_str().unwrap(),
        "--backend",
        "cpu",
        "--quiet",
    ]);
    ok(&o, "matmul on w.i32");
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
    assert_eq!(read_y(&y), (vec![2, 2], vec![-3.0, 5.0, -3.0, 5.0]));
    // Fortran order that differs from C order: [[1, 2, 3, 4], [0, 0, 0, 1]].
    let f = [1.0f32, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0, 1.0];
    std::fs::write(&x, npy("<f4", &[2, 4], true, &le_f32(&f))).unwrap();
    ok(&apply(&path, "w.i32", "matvec", &x, &y, "cpu"), "fortran");
    // Row 0: -3 - 4 - 3 + 0 = -10; row 1: 1 + 4 + 9 + 16 = 30; second column: 0 and 4.
    assert_eq!(read_y(&y), (vec![2, 2], vec![-10.0, 30.0, 0.0, 4.0]));
    let ids: Vec<u8> = [1u16, 0].iter().flat_map(|v| v.to_be_bytes()).collect();
    std::fs::write(&x, npy(">u2", &[2], false, &ids)).unwrap();
    ok(
        &apply(&path, "w.i32", "get_rows", &x, &y, "cpu"),
        "big-endian ids",
    );
    assert_eq!(
        read_y(&y),
        (vec![2, 4], vec![1.0, 2.0, 3.0, 4.0, -3.0, -2.0, -1.0, 0.0])
    );
}

fn one_error_line(o: &Output, needle: &str, what: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: one line expected: {err}");
    assert!(err.starts_with("error: "), "{what}: {err}");
    assert!(err.contains(needle), "{what}: `{needle}` not in: {err}");
}

/// Every refusal is exit 1 with one `error:` line naming what and where, before any output is
/// written: no Y.npy, no temporary file, an existing Y.npy and the inputs left as they were.
#[test]
fn apply_refusals_are_one_line_and_leave_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let path = model(dir.path());
    let d = |name: &str| dir.path().join(name);
    let f32s = |shape: &[usize]| {
        let n: usize = shape.iter().product();
        npy("<f4", shape, false, &le_f32(&vec![0.5; n]))
    };
    let i64s = |v: &[i64]| {
        let data: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        npy("<i8", &[v.len()], false, &data)
    };
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("x64.npy", f32s(&[2, 64])),
        ("x32.npy", f32s(&[2, 32])),
        ("x3d.npy", f32s(&[1, 2, 64])),
        ("x0.npy", f32s(&[0, 64])),
        ("f64.npy", npy("<f8", &[64], false, &[0; 512])),
        ("short.npy", npy("<f4", &[2, 64], false, &[0; 100])),
        ("ids_f.npy", f32s(&[2])),
        ("ids_neg.npy", i64s(&[0, 2, -1])),
        ("ids_big.npy", i64s(&[4, 5])),
        (
            "ids_2d.npy",
            npy("<i4", &[2, 1], false, &[0, 0, 0, 0, 1, 0, 0, 0]),
        ),
        ("ids_bool.npy", npy("|b1", &[2], false, &[0, 1])),
        ("garbage.npy", b"not a numpy file at all".to_vec()),
    ];
    for (name, bytes) in &inputs {
        std::fs::write(d(name), bytes).unwrap();
    }
    std::fs::create_dir(d("dir.npy")).unwrap();
    // An existing output survives every failure.
    std::fs::write(d("y.npy"), b"previous").unwrap();
    // A GGUF file with the output's extension, for the refusal to overwrite an input.
    std::fs::copy(&path, d("model.npy")).unwrap();
    let before: Vec<(String, Vec<u8>)> = names_in(dir.path())
        .into_iter()
        .filter(|n| n != "dir.npy")
        .map(|n| (n.clone(), std::fs::read(d(&n)).unwrap()))
        .collect();

    let y = d("y.npy");
    let cases: Vec<(&str, &str, &str, PathBuf, &str, &str)> = vec![
        // (tensor, op, input, out, backend, needle)
        (
            "nope",
            "matvec",
            "x64.npy",
            y.clone(),
            "cpu",
            "no tensor named \"nope\"",
        ),
        (
            "v.f32",
            "matvec",
            "x64.npy",
            y.clone(),
            "cpu",
            "not a matrix",
        ),
        (
            "w.i32",
            "matvec",
            "x64.npy",
            y.clone(),
            "vulkan",
            "I32, which has no GPU shader",
        ),
        (
            "w.i32",
            "get_rows",
            "ids_neg.npy",
            y.clone(),
            "gl",
            "no GPU shader",
        ),
        (
            "w.q4_0",
            "matvec",
            "x32.npy",
            y.clone(),
            "cpu",
            "rows of 32 values",
        ),
        ("w.q4_0", "matmul", "x32.npy", y.clone(), "cpu", "K = 64"),
        (
            "w.q4_0",
            "matvec",
            "x3d.npy",
            y.clone(),
            "cpu",
            "shape [1, 2, 64]",
        ),
        ("w.q4_0", "matvec", "x0.npy", y.clone(), "cpu", "no rows"),
        ("w.q4_0", "matvec", "f64.npy", y.clone(), "cpu", "float64"),
        (
            "w.q4_0",
            "matvec",
            "short.npy",
            y.clone(),
            "cpu",
            "100 bytes of data",
        ),
        (
            "w.q4_0",
            "get_rows",
            "ids_f.npy",
            y.clone(),
            "cpu",
            "integer dtype",
        ),
        (
            "w.q4_0",
            "get_rows",
            "ids_bool.npy",
            y.clone(),
            "cpu",
            "bool",
        ),
        (
            "w.q4_0",
            "get_rows",
            "ids_neg.npy",
            y.clone(),
            "cpu",
            "ids[2] = -1 is negative",
        ),
        (
            "w.q4_0",
            "get_rows",
            "ids_big.npy",
            y.clone(),
            "cpu",
            "ids[1] = 5 is not below N = 5",
        ),
        ("w.q4_0", "get_rows", "ids_2d.npy", y.clone(), "cpu", "1-D"),
        (
            "w.q4_0",
            "matvec",
            "garbage.npy",
            y.clone(),
            "cpu",
            "not a .npy file",
        ),
        (
            "w.q4_0",
            "matvec",
            "missing.npy",
            y.clone(),
            "cpu",
            "missing.npy",
        ),
        ("w.q4_0", "matvec", "dir.npy", y.clone(), "cpu", "dir.npy"),
        (
            "w.q4_0",
            "matvec",
            "x64.npy",
            d("y.bin"),
            "cpu",
            "apply writes .npy",
        ),
        (
            "w.q4_0",
            "matvec",
            "x64.npy",
            d("x64.npy"),
            "cpu",
            "refusing to overwrite",
        ),
        (
            "w.q4_0",
            "matvec",
            "x64.npy",
            d("./x64.npy"),
            "cpu",
            "refusing to overwrite",
        ),
    ];
    for (tensor, op, input, out, backend, needle) in &cases {
        let what = format!("{tensor} {op} {input} -> {}", out.display());
        let o = apply(&path, tensor, op, &d(input), out, backend);
        one_error_line(&o, needle, &what);
    }
    // matvec_id's ids: missing, for another op, out of the experts, and X rows that fit
    // neither one per token nor one per slot.
    let id_cases: Vec<(&str, &str, Option<&str>, &str)> = vec![
        ("matvec_id", "x32.npy", None, "also needs --ids"),
        (
            "matvec",
            "x32.npy",
            Some("ids_big.npy"),
            "--ids is for matvec_id",
        ),
        (
            "matvec_id",
            "x32.npy",
            Some("ids_big.npy"),
            "is not below E = 3, the experts",
        ),
        (
            "matvec_id",
            "x32.npy",
            Some("ids_neg.npy"),
            "ids[2] = -1 is negative",
        ),
        (
            "matvec_id",
            "x32.npy",
            Some("ids_f.npy"),
            "of an integer dtype",
        ),
        ("matvec_id", "x64.npy", Some("ids_2d.npy"), "K = 32"),
    ];
    let x3 = d("x3rows.npy");
    std::fs::write(&x3, f32s(&[3, 32])).unwrap();
    for (op, input, ids, needle) in id_cases.into_iter().chain([(
        "matvec_id",
        "x3rows.npy",
        Some("ids_2d.npy"),
        "X has 3 rows",
    )]) {
        let mut args = vec![
            "apply".to_string(),
            path.to_str().unwrap().to_string(),
            "--tensor".into(),
            "w.q8_0.3d".into(),
            "--op".into(),
            op.into(),
            "--input".into(),
            d(input).to_str().unwrap().into(),
            "-o".into(),
            y.to_str().unwrap().into(),
            "--backend".into(),
            "cpu".into(),
        ];
        if let Some(ids) = ids {
            args.extend(["--ids".to_string(), d(ids).to_str().unwrap().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        one_error_line(&run(&args), needle, &format!("{op} {input} {ids:?}"));
    }
    std::fs::remove_file(&x3).unwrap();
    // The GGUF input itself as the output.
    let o = apply(
        &d("model.npy"),
        "w.q4_0",
        "matvec",
        &d("x64.npy"),
        &d("model.npy"),
        "cpu",
    );
    one_error_line(&o, "refusing to overwrite", "out = FILE");
    // A missing GGUF file.
    let o = apply(
        &d("none.gguf"),
        "w.q4_0",
        "matvec",
        &d("x64.npy"),
        &y,
        "cpu",
    );
    one_error_line(&o, "none.gguf", "missing FILE");

    let after: Vec<(String, Vec<u8>)> = names_in(dir.path())
        .into_iter()
        .filter(|n| n != "dir.npy")
        .map(|n| (n.clone(), std::fs::read(d(&n)).unwrap()))
        .collect();
    assert!(
        before == after,
        "a failed apply changed or left files: {:?}",
        names_in(dir.path())
    );
}

#[test]
fn apply_usage_errors_exit_2() {
    for args in [
        &[
            "apply", "m.gguf", "--tensor", "t", "--input", "x.npy", "-o", "y.npy",
        ][..],
        &[
            "apply", "m.gguf", "--tensor", "t", "--op", "softmax", "--input", "x.npy", "-o",
            "y.npy",
        ],
        &[
            "apply", "m.gguf", "--tensor", "t", "--op", "matvec", "-o", "y.npy",
        ],
        &[
            "apply", "m.gguf", "--op", "matvec", "--input", "x.npy", "-o", "y.npy",
        ],
        &[
            "apply",
            "m.gguf",
            "--tensor",
            "t",
            "--op",
            "matvec",
            "--input",
            "x.npy",
            "-o",
            "y.npy",
            "--backend",
            "all",
        ],
        &["verify", "m.gguf", "--max-rows", "4"],
        &["verify", "m.gguf", "--op", "all", "--dtype", "f16"],
        &["verify", "m.gguf", "--op", "softmax"],
        &[
            "verify",
            "m.gguf",
            "--op",
            "matvec",
            "--variant",
            "rows:64x3",
        ],
        &["verify", "m.gguf", "--variant", "classic"],
        &["verify", "m.gguf", "--precision", "int8"],
        &["verify", "m.gguf", "--op", "matvec", "--precision", "fast"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
    let help = text(&run(&["apply", "-h"]).stdout);
    for needle in [
        "get_rows",
        "matvec",
        "matmul",
        "[possible values: auto, vulkan, gl, metal, dx12, cpu]",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
    let help = text(&run(&["verify", "--help"]).stdout);
    assert!(
        help.contains("--op") && help.contains("--max-rows"),
        "{help}"
    );
}

/// The fields of one `verify --op` JSON entry, as the README documents them.
const CHECK_FIELDS: &[&str] = &[
    "name",
    "type",
    "dims",
    "op",
    "k",
    "rows",
    "status",
    "reason",
    "row_start",
    "rows_checked",
    "batches",
    "values",
    "max_fraction",
    "failures",
    "variant",
];

/// `verify --op all` on a small file: every matrix with a shader passes all three kernels (the
/// one with more rows than `--max-rows` on a run of them), the vector and the I32 matrix are
/// skipped with their reasons; `--json` has one entry per tensor and op with the documented
/// fields.
#[test]
fn verify_op_all_passes_with_documented_json() {
    const TEST: &str = "verify_op_all_passes_with_documented_json";
    let dir = tempfile::tempdir().unwrap();
    let path = model(dir.path());
    let p = path.to_str().unwrap();
    let file = GgufFile::open(&path).unwrap();
    for backend in BACKENDS {
        if !have(backend, TEST) {
            continue;
        }
        let o = run(&[
            "verify",
            p,
            "--op",
            "all",
            "--max-rows",
            "4",
            "--backend",
            backend,
        ]);
        ok(&o, backend);
        let out = text(&o.stdout);
        let last = out.lines().last().unwrap();
        assert!(last.starts_with("verify passed: 16 kernel checks"), "{out}");
        assert!(
            last.contains("2 tensors skipped") && last.contains("2 checked on a run of 4 rows"),
            "{out}"
        );
        assert!(out.contains("skipped: 1-D: not a matrix"), "{out}");
        assert!(out.contains("skipped: I32: no GPU shader"), "{out}");

        let o = run(&[
            "verify",
            p,
            "--op",
            "all",
            "--max-rows",
            "4",
            "--backend",
            backend,
            "--json",
            "--seed",
            "7",
        ]);
        ok(&o, backend);
        let json: Json = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(json["ok"], true);
        assert_eq!(json["op"], "all");
        assert_eq!(json["seed"], 7);
        assert_eq!(json["max_rows"], 4);
        assert_eq!(json["backend"], backend);
        assert_eq!(json["matvec_variant"], "classic");
        assert_eq!(json["precision"], "exact");
        // Factored sums: within their own bound, and named.
        let o = run(&[
            "verify",
            p,
            "--op",
            "matvec",
            "--max-rows",
            "4",
            "--backend",
            backend,
            "--precision",
            "factored",
        ]);
        ok(&o, backend);
        let out = text(&o.stdout);
        assert!(out.contains("the bound of precision factored"), "{out}");
        // The rows mapping forced: within the bound, and named.
        let o = run(&[
            "verify",
            p,
            "--op",
            "matvec",
            "--max-rows",
            "4",
            "--backend",
            backend,
            "--json",
            "--variant",
            "rows:64x2",
        ]);
        ok(&o, backend);
        let rows: Json = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            (&rows["ok"], &rows["matvec_variant"]),
            (&Json::Bool(true), &Json::from("rows:64x2"))
        );
        let checks = json["checks"].as_array().unwrap();
        let n_ops = Op::ALL.len();
        assert_eq!(checks.len(), n_ops * file.tensors().len());
        for (i, c) in checks.iter().enumerate() {
            let t = &file.tensors()[i / n_ops];
            let keys: Vec<&str> = c.as_object().unwrap().keys().map(|k| k.as_str()).collect();
            assert_eq!(keys, CHECK_FIELDS, "{c}");
            assert_eq!(c["name"], t.name.as_str());
            assert_eq!(c["type"], t.format.name());
            assert_eq!(c["op"], Op::ALL[i % n_ops].name());
            assert_eq!(c["k"], t.dims[0]);
            assert_eq!(c["rows"], t.n_elements / t.dims[0]);
            let matrix = t.dims.len() >= 2 && t.format.has_shader();
            if !matrix {
                assert_eq!(c["status"], "skipped", "{c}");
                assert!(c["reason"].is_string(), "{c}");
                assert!(c["max_fraction"].is_null() && c["values"] == 0, "{c}");
                assert!(c["variant"].is_null(), "{c}");
                continue;
            }
            assert_eq!(c["status"], "pass", "{c}");
            assert!(c["reason"].is_null(), "{c}");
            assert_eq!(c["failures"], 0, "{c}");
            let f = c["max_fraction"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&f), "{c}");
            let rows = c["rows"].as_u64().unwrap();
            let checked = c["rows_checked"].as_u64().unwrap();
            let start = c["row_start"].as_u64().unwrap();
            assert_eq!(checked, rows.min(4), "{c}");
            assert!(start + checked <= rows, "{c}");
            let batches: Vec<u64> = c["batches"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_u64().unwrap())
                .collect();
            let outputs = match c["op"].as_str().unwrap() {
                "matvec" => {
                    assert_eq!(batches, [1, 3]);
                    4 * checked
                }
                "matmul" => {
                    assert_eq!(batches, [17]);
                    17 * checked
                }
                "get_rows" => {
                    assert_eq!(batches, [8]);
                    assert_eq!(f, 0.0, "get_rows is bit-exact: {c}");
                    8 * c["k"].as_u64().unwrap()
                }
                "matvec_id" => {
                    // 3 tokens × 2 slots, x per token then per slot; the checked rows are one
                    // expert here (every matrix of the file is 2-D once subsampled or as it is).
                    assert_eq!(batches, [6, 6]);
                    12 * checked
                }
                other => panic!("unknown op {other}"),
            };
            assert_eq!(c["values"], outputs, "{c}");
            // The kernels the check's calls ran, by name: their family and type first
            // (matmul's 17 columns on CPU adapters: matvecs of 16 and 1).
            let variant = c["variant"].as_str().unwrap();
            let op = c["op"].as_str().unwrap();
            let family = if op == "matmul" && variant.starts_with("matvec.") {
                "matvec"
            } else {
                op
            };
            let head = format!("{family}.{}.", c["type"].as_str().unwrap());
            assert!(variant.split(" + ").all(|v| v.starts_with(&head)), "{c}");
        }
        // One op alone: one entry per tensor.
        let o = run(&[
            "verify",
            p,
            "--op",
            "get_rows",
            "--backend",
            backend,
            "--json",
        ]);
        ok(&o, backend);
        let json: Json = serde_json::from_slice(&o.stdout).unwrap();
        let checks = json["checks"].as_array().unwrap();
        assert_eq!(checks.len(), file.tensors().len());
        assert!(checks.iter().all(|c| c["op"] == "get_rows"));
        for c in checks.iter().filter(|c| c["status"] != "skipped") {
            assert_eq!(c["rows_checked"], c["rows"], "{c}");
        }
    }
}
