//! The tuner on an engine (`GpuEngine::tune_matvec`) on every adapter, forced to measure as a GPU
//! would: every key of a small "model" raced (each candidate's output checked on a probe), the
//! choice taken by later calls (within the f64 bound), the cache file read back on a second run
//! (`on`: every key a hit, the same choices), `cache` measuring nothing, the model's budget
//! honoured (keys past it keep the prior and are not stored), and `off` clearing the choices
//! (calls then bit-identical to an untuned engine's).

use std::time::Duration;

use gguf_dequant::gpu::kernels::{Mapping, MatVecOptions, TuneSettings, TuneSource};
use gguf_dequant::gpu::loader::ResidentTensor;
use gguf_dequant::gpu::tune::Tuning;
use gguf_dequant::gpu::{EngineOptions, GpuEngine};
use gguf_dequant::{ops, Format};

use crate::gpu_test;
use crate::kernels::{inputs, weights, within};
use crate::support::gpu::label;

/// An engine on `engine`'s device with matvec rows a chunk per step.
fn rolled(engine: &GpuEngine) -> GpuEngine {
    GpuEngine::from_device(
        engine.device().clone(),
        engine.queue().clone(),
        EngineOptions {
            matvec: MatVecOptions {
                unroll: false,
                ..MatVecOptions::default()
            },
            ..EngineOptions::default()
        },
    )
    .unwrap()
}

fn tuner(engine: &GpuEngine) {
    let backend = label(engine);
    // Rolled rows: the candidates' unrolled loops are slow to compile on CPU implementations.
    let engine = &rolled(engine);
    let dir = tempfile::tempdir().unwrap();
    let shapes = [
        (Format::Q4_K, 512, 40),
        (Format::Q4_K, 512, 40),
        (Format::Q8_0, 256, 33),
        (Format::F16, 200, 9),
    ];
    let raws: Vec<Vec<u8>> = shapes
        .iter()
        .enumerate()
        .map(|(i, &(f, k, n))| weights(f, k * n, 50 + i as u64))
        .collect();
    let tensors: Vec<ResidentTensor> = shapes
        .iter()
        .zip(&raws)
        .map(|(&(f, k, n), raw)| {
            ResidentTensor::upload(engine, "w", f, &[k as u64, n as u64], raw).unwrap()
        })
        .collect();
    let refs: Vec<&ResidentTensor> = tensors.iter().collect();
    let settings = |tuning| TuneSettings {
        cache_dir: Some(dir.path().to_path_buf()),
        total_budget: Duration::from_secs(60),
        ..TuneSettings::new(tuning)
    };
    let mut force = settings(Tuning::Force);
    force.rules.key_budget = Duration::from_secs(10);
    let first = engine.tune_matvec(&refs, &[1, 3], &force).unwrap();
    // Three (format, K, N) keys (the two Q4_K tensors are one rotation set) × two column counts.
    assert_eq!(first.rows.len(), 6, "{backend}");
    let cache = first.cache.clone().unwrap();
    assert!(cache.starts_with(dir.path()) && cache.exists(), "{backend}");
    for row in &first.rows {
        assert_eq!(row.source, TuneSource::Measured, "{backend} {}", row.key);
        assert!(
            row.disqualified.is_empty(),
            "{backend} {}: {:?}",
            row.key,
            row.disqualified
        );
        assert!(
            row.median_us.is_some_and(|t| t > 0.0),
            "{backend} {}",
            row.key
        );
        let candidates = engine.matvec_candidates(row.key.columns);
        assert!(candidates.contains(&row.mapping) && candidates.len() > 2);
        assert!(row.runner_up.is_some(), "{backend} {}", row.key);
    }
    // Later calls take the choice, within the bound.
    for (i, &(f, k, _)) in shapes.iter().enumerate() {
        let x = inputs(3 * k, 9 + i as u64);
        let want = ops::mul_mat(f, &raws[i], k, &x, 3).unwrap();
        let got = engine.matvec(&tensors[i], &x, 3).unwrap();
        within(&format!("{backend} tuned {f}"), &want, &got);
    }
    // A second run reads every choice back; `cache` measures nothing either.
    for tuning in [Tuning::On, Tuning::Cache] {
        let again = engine
            .tune_matvec(&refs, &[1, 3], &settings(tuning))
            .unwrap();
        for (a, b) in first.rows.iter().zip(&again.rows) {
            assert_eq!(
                (&a.key, a.mapping),
                (&b.key, b.mapping),
                "{backend} {tuning}"
            );
            assert_eq!(b.source, TuneSource::Cache, "{backend} {tuning} {}", b.key);
        }
    }
    // A fresh cache directory in `cache` mode: misses keep the prior.
    let empty = tempfile::tempdir().unwrap();
    let miss = engine
        .tune_matvec(
            &refs,
            &[1],
            &TuneSettings {
                cache_dir: Some(empty.path().to_path_buf()),
                ..TuneSettings::new(Tuning::Cache)
            },
        )
        .unwrap();
    assert!(miss.rows.iter().all(|r| r.source == TuneSource::Prior));
    // The model's budget: spent on the first key, the others keep the prior and nothing of
    // theirs is stored.
    let budget_dir = tempfile::tempdir().unwrap();
    let mut tight = TuneSettings {
        cache_dir: Some(budget_dir.path().to_path_buf()),
        total_budget: Duration::from_nanos(1),
        ..TuneSettings::new(Tuning::Force)
    };
    tight.rules.key_budget = Duration::from_nanos(1);
    let cut = engine.tune_matvec(&refs, &[1], &tight).unwrap();
    assert_eq!(cut.rows[0].source, TuneSource::Measured, "{backend}");
    assert!(cut.rows[1..].iter().all(|r| r.source == TuneSource::Prior));
    // `off`: the choices are cleared, calls are an untuned engine's, bit for bit.
    let off = engine
        .tune_matvec(&refs, &[1, 3], &settings(Tuning::Off))
        .unwrap();
    let prior = engine.matvec_candidates(1)[0];
    assert!(off
        .rows
        .iter()
        .all(|r| r.source == TuneSource::Prior && r.mapping == prior));
    let plain = rolled(engine);
    let (f, k, n) = shapes[0];
    let w = ResidentTensor::upload(&plain, "w", f, &[k as u64, n as u64], &raws[0]).unwrap();
    let x = inputs(k, 3);
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    assert_eq!(
        bits(engine.matvec(&tensors[0], &x, 1).unwrap()),
        bits(plain.matvec(&w, &x, 1).unwrap()),
        "{backend}"
    );
    assert_eq!(prior, Mapping::Classic);
    eprintln!(
        "[tuner] {backend}: {} keys raced in {:.2} s, read back from {}",
        first.rows.len(),
        first.seconds,
        cache.display()
    );
}
gpu_test!(kernels_tuner, tuner);

/// The loader tunes once a model is resident when asked to (`LoadOptions::tuning`; CPU adapters
/// default to `off`): SmolLM2's block 0, forced, every (format, K, N) of its matrices raced, the
/// report on the model; by default on a CPU adapter, no tuning at all.
fn loader_tunes(engine: &GpuEngine) {
    use gguf_dequant::gpu::loader::{LoadOptions, Residency, WeightLoader};
    use gguf_dequant::{GgufFile, Selection};
    use std::sync::Arc;
    let Some(path) = crate::support::model_file("loader_tunes", "SmolLM2-135M-Instruct.Q4_1.gguf")
    else {
        return;
    };
    let backend = label(engine);
    let file = GgufFile::open(&path).unwrap();
    let shared = Arc::new(rolled(engine));
    let selection = Selection::Glob(vec!["blk.0.*".into()]);
    let plain = WeightLoader::with_engine(shared.clone(), LoadOptions::default());
    let model = plain.load(&file, &selection, Residency::Raw).unwrap();
    assert!(
        model.tuning().is_none(),
        "{backend}: CPU adapters default to off"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut settings = TuneSettings {
        cache_dir: Some(dir.path().to_path_buf()),
        ..TuneSettings::new(Tuning::Force)
    };
    settings.rules.key_budget = Duration::from_secs(5);
    settings.total_budget = Duration::from_secs(60);
    let tuned = WeightLoader::with_engine(
        shared,
        LoadOptions {
            tuning: Some(settings),
            ..LoadOptions::default()
        },
    );
    let model = tuned.load(&file, &selection, Residency::Raw).unwrap();
    let report = model.tuning().expect("tuned");
    assert!(
        report.warnings.is_empty(),
        "{backend}: {:?}",
        report.warnings
    );
    // Block 0's seven matrices: q, k, v, o (576x576 and 576x192) and gate, up, down.
    let keys: Vec<String> = report.rows.iter().map(|r| r.key.to_string()).collect();
    assert!(keys.len() >= 4, "{backend}: {keys:?}");
    assert!(report.rows.iter().all(|r| r.source == TuneSource::Measured));
    assert!(report.cache.as_ref().is_some_and(|p| p.exists()));
}
gpu_test!(loader_tunes_when_asked, loader_tunes);
