//! One model over several devices in one process (`loader::MultiLoader`): a small synthetic model
//! (six layers, input and output tensors, several formats) and the real SmolLM2 model placed over
//! every compute adapter at once (in CI lavapipe, SwiftShader and llvmpipe GL; fewer than 3 is a
//! failure under `CI=true`), every tensor read back bit-exact through the loader of its device and
//! a matvec per device within the f32 bound; budgets that cannot hold the model (typed error,
//! nothing allocated), a budget exhausted on the last device and a device lost halfway (every
//! device's buffers freed, every loader usable again).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use gguf_dequant::gguf::GgufWriter;
use gguf_dequant::gpu::loader::{
    LoadOptions, MultiLoader, MultiModel, Placement, Progress, Residency, Role, ServiceStats,
    WeightLoader,
};
use gguf_dequant::gpu::{GpuEngine, GpuError};
use gguf_dequant::{ops, DType, Error, Format, GgufFile, Selection};

use crate::kernels::{inputs, weights, within};
use crate::support;
use crate::support::codec::{compare, cpu};
use crate::support::gguf::save;
use crate::support::gpu::on_every_adapter;

/// Layers of the synthetic model.
const LAYERS: u64 = 6;

/// The synthetic model: `token_embd` and `rope_freqs` (input), six layers of five tensors in six
/// formats, `output_norm` and `output`.
fn write_model(dir: &tempfile::TempDir) -> GgufFile {
    let mut t: Vec<(String, Format, Vec<u64>)> = vec![
        ("token_embd.weight".into(), Format::Q6_K, vec![256, 6]),
        ("rope_freqs.weight".into(), Format::F32, vec![32]),
    ];
    for l in 0..LAYERS {
        let up = if l % 2 == 0 {
            Format::Q4_0
        } else {
            Format::Q5_1
        };
        t.push((format!("blk.{l}.attn_norm.weight"), Format::F32, vec![64]));
        t.push((
            format!("blk.{l}.attn_q.weight"),
            Format::Q4_K,
            vec![256, 12],
        ));
        t.push((format!("blk.{l}.ffn_up.weight"), up, vec![64, 3]));
        t.push((
            format!("blk.{l}.ffn_down.weight"),
            Format::Q8_0,
            vec![96, 2],
        ));
        t.push((format!("blk.{l}.ffn_gate.weight"), Format::F16, vec![40, 2]));
    }
    t.push(("output_norm.weight".into(), Format::F32, vec![64]));
    t.push(("output.weight".into(), Format::Q8_0, vec![64, 7]));
    let mut w = GgufWriter::new();
    w.metadata("general.name", "multi-device-test");
    for (i, (name, format, dims)) in t.into_iter().enumerate() {
        let n = dims.iter().product::<u64>() as usize;
        w.tensor(name, dims, format, weights(format, n, 900 + i as u64));
    }
    save(&w, &dir.path().join("multi.gguf"))
}

fn multi_loader(engines: Vec<GpuEngine>) -> MultiLoader {
    let loaders = engines
        .into_iter()
        .map(|e| WeightLoader::with_engine(Arc::new(e), LoadOptions::default()))
        .collect();
    MultiLoader::new(loaders).unwrap()
}

/// The test model in a new temporary directory (kept while the `TempDir` lives) and a
/// [`MultiLoader`] over `engines`.
fn model_on(engines: Vec<GpuEngine>) -> (tempfile::TempDir, GgufFile, MultiLoader) {
    let dir = tempfile::tempdir().unwrap();
    let file = write_model(&dir);
    (dir, file, multi_loader(engines))
}

fn assert_all_free(multi: &MultiLoader, when: &str) {
    for (d, l) in multi.loaders().iter().enumerate() {
        assert_eq!(l.stats(), ServiceStats::default(), "device {d} {when}");
    }
}

/// Every selected tensor of `file` on exactly one device, the one `placement` assigns; every
/// layer's tensors together; each read back through its device's loader bit-exact with the file
/// (raw) or the CPU codecs; the report adding up.
fn check_model(file: &GgufFile, model: &MultiModel, placement: &Placement, residency: Residency) {
    let shares = placement.assign(file, &Selection::All, residency).unwrap();
    let mut seen = vec![0; file.tensors().len()];
    for (d, t) in model.tensors() {
        let i = file.tensor_index(&t.name).unwrap();
        seen[i] += 1;
        assert!(shares[d].contains(&i), "{} on device {d}", t.name);
        assert_eq!(model.get(&t.name).map(|(d, _)| d), Some(d));
        let src = file.tensor_data(&file.tensors()[i]);
        let got = model.loader(d).unwrap().read_back(t).unwrap();
        match t.dtype {
            None => assert!(got == src, "{} on device {d}", t.name),
            Some(dtype) => compare(t.format, dtype, &got, &cpu(t.format, src, dtype))
                .unwrap_or_else(|e| panic!("{} on device {d}: {e}", t.name)),
        }
    }
    assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
    for info in file.tensors() {
        if let Role::Layer(l) = Role::of(&info.name) {
            let first = model.get(&format!("blk.{l}.attn_q.weight")).unwrap().0;
            assert_eq!(model.get(&info.name).unwrap().0, first, "{}", info.name);
        }
    }
    let r = model.report();
    assert_eq!(r.devices.len(), placement.devices());
    assert_eq!(r.tensors, file.tensors().len());
    assert_eq!(
        r.devices.iter().map(|d| d.tensors).sum::<usize>(),
        r.tensors
    );
    let resident: u64 = file
        .tensors()
        .iter()
        .map(|t| gguf_dequant::gpu::loader::resident_bytes(t, residency))
        .sum();
    assert_eq!(r.bytes_resident, resident);
    assert_eq!(
        r.bytes_read,
        file.tensors().iter().map(|t| t.n_bytes).sum::<u64>()
    );
    for (d, dr) in r.devices.iter().enumerate() {
        assert_eq!(dr.device, d);
        assert_eq!(dr.tensors, shares[d].len());
        assert_eq!(
            dr.adapter.name,
            model.loader(d).unwrap().adapter_info().name
        );
    }
}

/// `y = W x` of each device's first `attn_q` (Q4_K raw, or the dtype resident) through that
/// device's engine, within the bound of the f64 reference.
fn matvec_per_device(file: &GgufFile, model: &MultiModel, tensor: &str) {
    for d in 0..model.devices() {
        let Some(share) = model.model(d) else {
            continue;
        };
        let Some(w) = share.tensors().iter().find(|t| t.name.ends_with(tensor)) else {
            continue;
        };
        let info = file.tensor(&w.name).unwrap();
        let (format, bytes) = match w.dtype {
            None => (info.format, file.tensor_data(info).to_vec()),
            Some(dtype) => {
                let as_format = match dtype {
                    DType::F32 => Format::F32,
                    DType::F16 => Format::F16,
                    DType::BF16 => Format::BF16,
                };
                (as_format, cpu(info.format, file.tensor_data(info), dtype))
            }
        };
        let k = w.dims[0] as usize;
        let x = inputs(k, 31 + d as u64);
        let want = ops::mul_mat(format, &bytes, k, &x, 1).unwrap();
        let loader = model.loader(d).unwrap();
        let got = loader.engine().matvec(w, &x, 1).unwrap();
        let f = within(
            &format!("{} on device {d} ({})", w.name, loader.adapter_info().name),
            &want,
            &got,
        );
        eprintln!("[multi] {} on device {d}: {f:.2e} of the bound", w.name);
    }
}

#[test]
fn one_model_over_every_adapter() {
    on_every_adapter("multi::one_model_over_every_adapter", |engines| {
        let n = engines.len();
        let (_dir, file, multi) = model_on(engines);
        // Equal shares by layer count: layer l on device floor(l n / 6); input first, output last.
        let even = Placement::even(n);
        let model = multi
            .load(&file, &Selection::All, Residency::Raw, &even)
            .unwrap();
        check_model(&file, &model, &even, Residency::Raw);
        for l in 0..LAYERS {
            let (d, _) = model.get(&format!("blk.{l}.ffn_up.weight")).unwrap();
            assert_eq!(d as u64, l * n as u64 / LAYERS, "layer {l}");
        }
        for (name, device) in [
            ("token_embd.weight", 0),
            ("rope_freqs.weight", 0),
            ("output_norm.weight", n - 1),
            ("output.weight", n - 1),
        ] {
            assert_eq!(model.get(name).unwrap().0, device, "{name}");
        }
        let layers: Vec<Vec<u64>> = model
            .report()
            .devices
            .iter()
            .map(|d| d.layers.clone())
            .collect();
        assert_eq!(layers.concat(), (0..LAYERS).collect::<Vec<_>>());
        matvec_per_device(&file, &model, "attn_q.weight");
        drop(model);
        assert_all_free(&multi, "after the raw model");

        // Dequantised, with the input on the last device and the output on the first, and
        // unequal shares.
        let placement = Placement {
            input: n - 1,
            output: 0,
            ..Placement::proportions((1..=n).map(|d| d as f64))
        };
        let residency = Residency::Dequantised(DType::F16);
        let model = multi
            .load(&file, &Selection::All, residency, &placement)
            .unwrap();
        check_model(&file, &model, &placement, residency);
        assert_eq!(model.get("token_embd.weight").unwrap().0, n - 1);
        assert_eq!(model.get("output.weight").unwrap().0, 0);
        matvec_per_device(&file, &model, "attn_q.weight");
        drop(model);
        assert_all_free(&multi, "after the f16 model");
    });
}

#[test]
fn real_model_over_every_adapter() {
    const TEST: &str = "multi::real_model_over_every_adapter";
    let Some(path) = support::model_file(TEST, "SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    on_every_adapter(TEST, |engines| {
        let n = engines.len();
        let file = GgufFile::open(&path).unwrap();
        let multi = multi_loader(engines);
        let even = Placement::even(n);
        let model = multi
            .load(&file, &Selection::All, Residency::Raw, &even)
            .unwrap();
        check_model(&file, &model, &even, Residency::Raw);
        let layers: Vec<u64> = model
            .report()
            .devices
            .iter()
            .flat_map(|d| d.layers.clone())
            .collect();
        let count = layers.len() as u64;
        assert_eq!(layers, (0..count).collect::<Vec<_>>());
        for l in 0..count {
            let (d, _) = model.get(&format!("blk.{l}.attn_q.weight")).unwrap();
            assert_eq!(d as u64, l * n as u64 / count, "layer {l}");
        }
        matvec_per_device(&file, &model, "attn_q.weight");
        let r = model.report();
        eprintln!(
            "[multi] SmolLM2 raw over {n} devices: {} tensors, {} bytes in {:.2} s ({:.2} GB/s)",
            r.tensors,
            r.bytes_resident,
            r.seconds,
            r.gb_per_s()
        );
        drop(model);
        assert_all_free(&multi, "after the model");
    });
}

#[test]
fn budgets_that_do_not_fit_allocate_nothing() {
    on_every_adapter(
        "multi::budgets_that_do_not_fit_allocate_nothing",
        |engines| {
            let n = engines.len();
            let (_dir, file, multi) = model_on(engines);
            let f32 = Residency::Dequantised(DType::F32);
            // token_embd alone is 1536 values, 6144 bytes as f32.
            match multi.load(
                &file,
                &Selection::All,
                f32,
                &Placement::budgets(vec![6000; n]),
            ) {
                Err(Error::OverBudget {
                    device: 0,
                    needed,
                    budget: 6000,
                    ..
                }) => assert_eq!(needed, (1536 + 32) * 4),
                other => panic!("{other:?}"),
            }
            assert_all_free(&multi, "after the input did not fit");
            // Room for the input and output tensors, not for all the layers.
            let err = multi
                .load(
                    &file,
                    &Selection::All,
                    f32,
                    &Placement::budgets(vec![8000; n]),
                )
                .unwrap_err();
            assert!(
                matches!(err, Error::OverBudget { device, .. } if device == n - 1),
                "{err}"
            );
            assert!(err.hint().is_some());
            assert_all_free(&multi, "after the layers did not fit");
            // A placement for another number of devices.
            let err = multi
                .load(&file, &Selection::All, f32, &Placement::even(n + 1))
                .unwrap_err();
            assert!(matches!(err, Error::Placement { .. }), "{err}");
            assert_all_free(&multi, "after a placement for more devices");
            // Budgets that fit.
            let model = multi
                .load(
                    &file,
                    &Selection::All,
                    f32,
                    &Placement::budgets(vec![1 << 20; n]),
                )
                .unwrap();
            check_model(&file, &model, &Placement::budgets(vec![1 << 20; n]), f32);
        },
    );
}

/// Per device, the bytes its progress callback saw.
fn counting(n: usize) -> (Vec<LoadOptions>, Vec<Arc<AtomicU64>>) {
    let counters: Vec<Arc<AtomicU64>> = (0..n).map(|_| Arc::default()).collect();
    let options = counters
        .iter()
        .map(|c| {
            let c = c.clone();
            LoadOptions {
                progress: Some(Progress::new(move |b| {
                    c.fetch_add(b, Ordering::Relaxed);
                })),
                ..LoadOptions::default()
            }
        })
        .collect();
    (options, counters)
}

#[test]
fn budget_exhausted_on_the_last_device_frees_every_device() {
    on_every_adapter(
        "multi::budget_exhausted_on_the_last_device_frees_every_device",
        |engines| {
            let n = engines.len();
            let (_dir, file, multi) = model_on(engines);
            let even = Placement::even(n);
            let residency = Residency::Dequantised(DType::F32);
            let shares = even.assign(&file, &Selection::All, residency).unwrap();
            let (mut options, counters) = counting(n);
            options[n - 1].gpu_budget_bytes = Some(4096);
            let err = multi
                .load_with(&file, &Selection::All, residency, &even, &options)
                .unwrap_err();
            assert!(
                matches!(err, Error::Gpu(GpuError::OutOfMemory { .. })),
                "{err}"
            );
            // The other devices streamed their whole share before it was dropped.
            for d in 0..n - 1 {
                let want: u64 = shares[d].iter().map(|&i| file.tensors()[i].n_bytes).sum();
                assert_eq!(counters[d].load(Ordering::Relaxed), want, "device {d}");
            }
            assert_all_free(&multi, "after the failed load");
            // The same loaders, a bigger budget.
            options[n - 1].gpu_budget_bytes = Some(1 << 20);
            let model = multi
                .load_with(&file, &Selection::All, residency, &even, &options)
                .unwrap();
            check_model(&file, &model, &even, residency);
            drop(model);
            assert_all_free(&multi, "after the second load");
        },
    );
}

#[test]
fn device_lost_during_a_load_frees_every_device() {
    on_every_adapter(
        "multi::device_lost_during_a_load_frees_every_device",
        |engines| {
            let n = engines.len();
            let (_dir, file, mut multi) = model_on(engines);
            let even = Placement::even(n);
            let residency = Residency::Dequantised(DType::F32);
            // Device 1 streams its share in small chunks and is destroyed after the first.
            let mut options = vec![LoadOptions::default(); n];
            let device = multi.loaders()[1].device().clone();
            let fired = Arc::new(AtomicBool::new(false));
            let f = fired.clone();
            options[1] = LoadOptions {
                staging_bytes: 1024,
                slots: 2,
                progress: Some(Progress::new(move |_| {
                    if !f.swap(true, Ordering::Relaxed) {
                        device.destroy();
                    }
                })),
                ..LoadOptions::default()
            };
            let err = multi
                .load_with(&file, &Selection::All, residency, &even, &options)
                .unwrap_err();
            assert!(fired.load(Ordering::Relaxed));
            assert!(matches!(err, Error::Gpu(GpuError::DeviceLost(_))), "{err}");
            assert!(multi.loaders()[1].is_lost());
            assert_all_free(&multi, "after the device was lost");
            // The others still load; the whole set refuses until the lost one is recovered.
            for d in (0..n).filter(|&d| d != 1) {
                let loader = &multi.loaders()[d];
                let model = loader.load(&file, &Selection::All, Residency::Raw).unwrap();
                assert_eq!(model.tensors().len(), file.tensors().len());
            }
            let err = multi
                .load(&file, &Selection::All, residency, &even)
                .unwrap_err();
            assert!(matches!(err, Error::Gpu(GpuError::DeviceLost(_))), "{err}");
            assert_eq!(multi.recover().unwrap(), [1]);
            let model = multi
                .load(&file, &Selection::All, residency, &even)
                .unwrap();
            check_model(&file, &model, &even, residency);
            drop(model);
            assert_all_free(&multi, "after the load on the recovered device");
        },
    );
}
