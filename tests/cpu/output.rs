//! The output writers: a decode failure in the middle of a write leaves nothing behind.

use gguf_dequant::output::{self, OutputFormat, OutputTensor};
use gguf_dequant::{DType, Error};

fn tensors(n: usize) -> Vec<OutputTensor> {
    (0..n)
        .map(|i| OutputTensor {
            name: format!("t{i}"),
            shape: vec![2, 3],
        })
        .collect()
}

#[test]
fn failing_decode_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    for (name, n) in [("x.safetensors", 3), ("x.npy", 1), ("x.bin", 1)] {
        let path = dir.path().join(name);
        let format = OutputFormat::from_path(&path).unwrap();
        let fail_at = n - 1;
        let decode = |i: usize| -> gguf_dequant::Result<Vec<u8>> {
            if i == fail_at {
                Err(Error::DecodedSize {
                    expected: 24,
                    got: 0,
                })
            } else {
                Ok(vec![0u8; 24])
            }
        };
        let err = output::write(&path, format, DType::F32, &tensors(n), None, &decode).unwrap_err();
        assert!(matches!(err, Error::DecodedSize { .. }), "{name}: {err}");
        assert!(!path.exists(), "{name} left behind");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{name}: temporary files left"
        );
    }
}

#[test]
fn wrong_decoded_size_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.safetensors");
    let decode = |_: usize| -> gguf_dequant::Result<Vec<u8>> { Ok(vec![0u8; 7]) };
    let err = output::write(
        &path,
        OutputFormat::Safetensors,
        DType::F32,
        &tensors(2),
        None,
        &decode,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::DecodedSize {
                expected: 24,
                got: 7
            }
        ),
        "{err}"
    );
    assert!(!path.exists());
}

#[test]
fn existing_file_survives_a_failed_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.bin");
    std::fs::write(&path, b"previous").unwrap();
    let decode = |_: usize| -> gguf_dequant::Result<Vec<u8>> {
        Err(Error::DecodedSize {
            expected: 24,
            got: 0,
        })
    };
    assert!(output::write(
        &path,
        OutputFormat::Bin,
        DType::F32,
        &tensors(1),
        None,
        &decode
    )
    .is_err());
    assert_eq!(std::fs::read(&path).unwrap(), b"previous");
}

#[test]
fn reserved_safetensors_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.safetensors");
    let tensors = vec![OutputTensor {
        name: "__metadata__".to_string(),
        shape: vec![1],
    }];
    let decode = |_: usize| -> gguf_dequant::Result<Vec<u8>> { Ok(vec![0u8; 4]) };
    let err = output::write(
        &path,
        OutputFormat::Safetensors,
        DType::F32,
        &tensors,
        None,
        &decode,
    )
    .unwrap_err();
    assert!(err.to_string().contains("reserved"), "{err}");
    assert!(!path.exists());
}

/// The library's own writing path refuses the input file as its output (a typed error), so a
/// library caller cannot overwrite the model it decodes either; the file keeps its bytes.
#[test]
fn dequant_file_refuses_its_input() {
    use gguf_dequant::dequant::{self, Decoder};
    use gguf_dequant::gguf::GgufWriter;
    use gguf_dequant::{Format, GgufFile};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.bin");
    let mut w = GgufWriter::new();
    w.tensor("t", vec![4], Format::F32, vec![0u8; 16]);
    std::fs::write(&path, w.to_bytes()).unwrap();
    let before = std::fs::read(&path).unwrap();
    let file = GgufFile::open(&path).unwrap();
    let tensors: Vec<_> = file.tensors().iter().collect();
    for out in [path.clone(), dir.path().join(".").join("model.bin")] {
        let err = dequant::dequant_file(
            &file,
            &tensors,
            &out,
            DType::F32,
            Decoder::Cpu,
            None,
            &|_| {},
        )
        .unwrap_err();
        assert!(
            matches!(&err, Error::Output { path, .. } if *path == out),
            "{err}"
        );
        assert!(err.to_string().contains("refusing to overwrite"), "{err}");
        assert!(matches!(
            output::refuse_input(&out, &path),
            Err(Error::Output { .. })
        ));
    }
    assert!(output::refuse_input(&dir.path().join("new.bin"), &path).is_ok());
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
