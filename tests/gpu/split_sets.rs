//! Split GGUF sets on the GPU: a set written by our writer loads like the single file it was cut
//! from, raw and dequantised, through both sources and a small staging ring (chunks that hold
//! tensors of several shards); the kernels run on its tensors. (gguf-py's own sets are checked
//! against gguf-py's reader in `tests/cpu/gguf_split.rs`.)

use std::sync::Arc;

use gguf_dequant::gguf::SplitLimit;
use gguf_dequant::gpu::loader::{LoadOptions, Residency, Source, WeightLoader};
use gguf_dequant::gpu::GpuEngine;
use gguf_dequant::{ops, DType, GgufFile, Selection};

use crate::gpu_test;
use crate::support::codec::{compare, cpu};
use crate::support::gguf::model_writer;

fn split_set_loads_like_the_whole_file(engine: GpuEngine) {
    let dir = tempfile::tempdir().unwrap();
    let w = model_writer(3);
    let whole = crate::support::gguf::save(&w, &dir.path().join("whole.gguf"));
    let paths = w
        .write_split(&dir.path().join("m.gguf"), SplitLimit::Tensors(3))
        .unwrap();
    let set = GgufFile::open(&paths[0]).unwrap();
    assert_eq!(set.shards().len(), 4);
    let loader = WeightLoader::with_engine(Arc::new(engine), LoadOptions::default());
    for source in [Source::Mmap, Source::DirectRead] {
        for residency in [Residency::Raw, Residency::Dequantised(DType::F16)] {
            let options = LoadOptions {
                source,
                staging_bytes: 8 << 10,
                ..LoadOptions::default()
            };
            let model = loader
                .load_with(&set, &Selection::All, residency, &options)
                .unwrap();
            assert_eq!(model.tensors().len(), whole.tensors().len());
            let total: u64 = whole.tensors().iter().map(|t| t.n_bytes).sum();
            assert_eq!(model.report().bytes_read, total);
            for t in model.tensors() {
                let info = whole.tensor(&t.name).unwrap();
                let src = whole.tensor_data(info);
                let got = loader.read_back(t).unwrap();
                match t.dtype {
                    None => assert!(got == src, "{source} {}: raw bytes differ", t.name),
                    Some(d) => compare(t.format, d, &got, &cpu(t.format, src, d))
                        .unwrap_or_else(|e| panic!("{source} {}: {e}", t.name)),
                }
            }
            if residency == Residency::Raw {
                // A matvec on a tensor of the last shard, within the f32 bound.
                let t = model.get("output.weight").unwrap();
                assert_eq!(set.tensor("output.weight").unwrap().shard, 3);
                let k = t.dims[0] as usize;
                let x: Vec<f32> = (0..k).map(|i| (i as f32 * 0.37).sin()).collect();
                let y = loader.engine().matvec(t, &x, 1).unwrap();
                let info = set.tensor("output.weight").unwrap();
                let want = ops::mul_mat(info.format, set.tensor_data(info), k, &x, 1).unwrap();
                assert_eq!(y.len(), want.y.len());
                let worst = want.max_fraction(&y).unwrap();
                assert!(worst <= 1.0, "{worst}");
            }
        }
    }
    assert_eq!(loader.stats().models, 0);
}
gpu_test!(
    split_set_loads_like_the_whole_file,
    split_set_loads_like_the_whole_file
);
