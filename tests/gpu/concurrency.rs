//! Concurrency: 8 threads × 25 mixed requests (`load`, `read_back`, `engine.dequant`,
//! `record_tensor`) of different formats and dtypes on one `WeightLoader` and its engine. Every
//! result must equal the sequential run bit for bit, the whole run must finish within a
//! watchdog's timeout (no deadlock), and memory must stay bounded: `stats()` back to the baseline
//! once the models are dropped, and peak RSS not growing across repeated rounds.
//!
//! On every adapter (`gpu_test!`), with no other GPU test running; no silent skips under
//! `CI=true`.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use gguf_dequant::gguf::GgufWriter;
use gguf_dequant::gpu::loader::{
    LoadOptions, Residency, ResidentModel, ServiceStats, WeightLoader,
};
use gguf_dequant::gpu::GpuEngine;
use gguf_dequant::sys::peak_rss_bytes;
use gguf_dequant::Selection;
use gguf_dequant::{DType, Format, GgufFile};

use crate::gpu_test;
use crate::support::gguf::{random_tensors, save};
use crate::support::rng::random_blocks;

const THREADS: usize = 8;
const REQUESTS: usize = 25;
const ROUNDS: usize = 3;
/// The whole concurrent round must finish within this (lavapipe on 2 shared cores).
const WATCHDOG: Duration = Duration::from_secs(240);

const TENSORS: [(&str, Format, usize); 7] = [
    ("q8", Format::Q8_0, 200),
    ("q4k", Format::Q4_K, 12),
    ("q5_1", Format::Q5_1, 90),
    ("iq2xxs", Format::IQ2_XXS, 6),
    ("f16", Format::F16, 3000),
    ("bf16", Format::BF16, 1000),
    ("i32", Format::I32, 500),
];

fn write_file(dir: &tempfile::TempDir) -> GgufFile {
    let mut w = GgufWriter::new();
    w.metadata("general.name", "concurrency-test");
    random_tensors(&mut w, &TENSORS, 900);
    save(&w, &dir.path().join("concurrency.gguf"))
}

const RESIDENCIES: [Residency; 4] = [
    Residency::Raw,
    Residency::Dequantised(DType::F32),
    Residency::Dequantised(DType::F16),
    Residency::Dequantised(DType::BF16),
];

/// One request: what it does is a function of its number only, so the sequential and the
/// concurrent runs do the same work.
fn request(
    loader: &WeightLoader,
    file: &GgufFile,
    raw: &ResidentModel,
    deq: &ResidentModel,
    n: usize,
) -> Vec<u8> {
    let (name, format, blocks) = TENSORS[n % TENSORS.len()];
    let dtype = DType::ALL[(n / TENSORS.len()) % 3];
    match n % 4 {
        // A load of one tensor, read back.
        0 => {
            let residency = RESIDENCIES[(n / 4) % 4];
            let model = loader
                .load(file, &Selection::names([name]), residency)
                .unwrap();
            loader.read_back(&model.tensors()[0]).unwrap()
        }
        // A read-back of a shared resident tensor.
        1 => {
            let model = if (n / 4).is_multiple_of(2) { raw } else { deq };
            loader.read_back(model.get(name).unwrap()).unwrap()
        }
        // The engine directly, on host bytes.
        2 => {
            let format = if format == Format::I32 {
                Format::Q4_0
            } else {
                format
            };
            let src = random_blocks(format, blocks.min(64), n as u64);
            loader.engine().dequant(format, &src, dtype).unwrap()
        }
        // A raw resident tensor decoded into a caller's buffer, then copied back.
        _ => {
            let name = if format == Format::I32 { "q8" } else { name };
            let t = raw.get(name).unwrap();
            record_and_read(loader, t, dtype)
        }
    }
}

fn record_and_read(
    loader: &WeightLoader,
    t: &gguf_dequant::gpu::loader::ResidentTensor,
    dtype: DType,
) -> Vec<u8> {
    let device = loader.device();
    let size = t.dequantised_size(dtype);
    let dst = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("concurrency dst"),
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("concurrency staging"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    loader
        .record_tensor(&mut encoder, t, dtype, &dst, 0)
        .unwrap();
    encoder.copy_buffer_to_buffer(&dst, 0, &staging, 0, size);
    let index = loader.queue().submit([encoder.finish()]);
    let (tx, rx) = mpsc::channel();
    staging.map_async(wgpu::MapMode::Read, .., move |r| {
        let _ = tx.send(r);
    });
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: Some(Duration::from_secs(60)),
        })
        .unwrap();
    rx.recv_timeout(Duration::from_secs(60)).unwrap().unwrap();
    let n = (t.n_elements * dtype.size() as u64) as usize;
    let out = staging.get_mapped_range(..).unwrap()[..n].to_vec();
    staging.unmap();
    out
}

fn eight_threads_match_the_sequential_run(engine: GpuEngine) {
    let dir = tempfile::tempdir().unwrap();
    let file = Arc::new(write_file(&dir));
    let loader = WeightLoader::with_engine(
        Arc::new(engine),
        LoadOptions {
            staging_bytes: 64 << 10,
            ..LoadOptions::default()
        },
    );
    assert_eq!(loader.stats(), ServiceStats::default());

    let mut rss = Vec::new();
    let mut expected: Option<Vec<Vec<u8>>> = None;
    for round in 0..ROUNDS {
        let raw = Arc::new(loader.load(&file, &Selection::All, Residency::Raw).unwrap());
        let deq = Arc::new(
            loader
                .load(&file, &Selection::All, Residency::Dequantised(DType::BF16))
                .unwrap(),
        );
        let baseline = loader.stats();
        assert_eq!(baseline.models, 2);

        // Sequential reference, once.
        let want = expected.get_or_insert_with(|| {
            (0..THREADS * REQUESTS)
                .map(|n| request(&loader, &file, &raw, &deq, n))
                .collect()
        });
        assert_eq!(
            loader.stats(),
            baseline,
            "sequential requests left something behind"
        );

        // 8 threads, each its share of the same requests in a different order; the watchdog is
        // the main thread waiting on a channel with a deadline.
        let (tx, rx) = mpsc::channel::<(usize, Vec<u8>)>();
        let mut handles = Vec::new();
        for t in 0..THREADS {
            let (loader, file, raw, deq, tx) = (
                loader.clone(),
                file.clone(),
                raw.clone(),
                deq.clone(),
                tx.clone(),
            );
            handles.push(std::thread::spawn(move || {
                for i in 0..REQUESTS {
                    let n = (i * THREADS + (t + i) % THREADS) % (THREADS * REQUESTS);
                    let n = if i % 2 == 0 {
                        n
                    } else {
                        THREADS * REQUESTS - 1 - n
                    };
                    let out = request(&loader, &file, &raw, &deq, n);
                    if tx.send((n, out)).is_err() {
                        return;
                    }
                }
            }));
        }
        drop(tx);
        let deadline = std::time::Instant::now() + WATCHDOG;
        let mut got: Vec<Option<Vec<u8>>> = vec![None; THREADS * REQUESTS];
        let mut count = 0;
        while count < THREADS * REQUESTS {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok((n, out)) => {
                    got[n] = Some(out);
                    count += 1;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                    "round {round}: deadlock or hang: {count} of {} requests done after {WATCHDOG:?}",
                    THREADS * REQUESTS
                ),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        for h in handles {
            h.join().expect("a worker panicked");
        }
        // Every request number the workers drew, each compared with the sequential result.
        let mut compared = 0;
        for (n, g) in got.iter().enumerate() {
            if let Some(g) = g {
                assert!(
                    *g == want[n],
                    "round {round}: request {n} differs from the sequential run"
                );
                compared += 1;
            }
        }
        assert!(compared > THREADS * REQUESTS / 2, "{compared}");
        assert_eq!(count, THREADS * REQUESTS);

        assert_eq!(
            loader.stats(),
            baseline,
            "round {round}: concurrent requests left something"
        );
        drop((raw, deq));
        assert_eq!(loader.stats(), ServiceStats::default(), "round {round}");
        if let Some(r) = peak_rss_bytes() {
            rss.push(r);
        }
    }
    eprintln!("peak RSS after each round: {rss:?}");
    if let (Some(first), Some(last)) = (rss.first(), rss.last()) {
        assert!(
            *last <= first + (64 << 20),
            "peak RSS grew from {first} to {last} bytes over {ROUNDS} rounds"
        );
    }
}
gpu_test!(
    eight_threads_match_the_sequential_run,
    eight_threads_match_the_sequential_run,
    exclusive = true
);
