//! The tuner on an engine: [`GpuEngine::tune_matvec`] times the matvec mappings of each (format,
//! K, N, columns) key a model uses on the caller's device and makes the fastest the policy's
//! choice for those calls ([`crate::gpu::tune`] has the race, the cache and the modes).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::plan::shape;
use super::{kernel_source, Mapping, MulMatJob, Op, Operand, RowsShape, MATVEC_MAX_BATCH};
use crate::formats::sample::{finite_blocks, normal_blocks, Rng};
use crate::gpu::loader::ResidentTensor;
use crate::gpu::timing::GpuTimer;
use crate::gpu::tune::{
    candidates_hash, race, roofline_time, Budget, Entry, Fingerprint, RaceRules, TuneCache,
    TuneKey, Tuning,
};
use crate::gpu::{buffers, GpuEngine};
use crate::{ops, Format, Result};

/// The rows-mapping shapes (W, R, slot) the tuner tries beside the prior (llama.cpp's per-vendor
/// choices and their neighbours: W × {½, 2}, R × {½, 2}; slots of a k-quant's 16-value scale
/// slot and of a whole 32-value block).
pub const TUNE_SHAPES: [(u32, u32, u32); 9] = [
    (32, 2, 1),
    (64, 2, 1),
    (64, 4, 1),
    (128, 1, 1),
    (128, 2, 1),
    (256, 1, 1),
    (256, 2, 1),
    (64, 2, 2),
    (128, 1, 4),
];

/// Weight rows of the probe every candidate's output is checked on.
const PROBE_ROWS: usize = 67;

/// Where a [`TuneRow`]'s choice came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TuneSource {
    /// The prior, unmeasured (tuning `off`, `cache` on a miss, or the model's budget spent).
    Prior,
    /// The cache file.
    Cache,
    /// Measured now.
    Measured,
}

impl TuneSource {
    /// `prior`, `cache` or `measured`.
    pub const fn name(self) -> &'static str {
        match self {
            TuneSource::Prior => "prior",
            TuneSource::Cache => "cache",
            TuneSource::Measured => "measured",
        }
    }
}

/// The tuner's choice for one key.
#[derive(Clone, Debug)]
pub struct TuneRow {
    /// The calls it applies to.
    pub key: TuneKey,
    /// The mapping chosen.
    pub mapping: Mapping,
    /// Where the choice came from.
    pub source: TuneSource,
    /// The chosen mapping's median time per call, µs (measured or cached).
    pub median_us: Option<f64>,
    /// Its fraction of the read roofline (weight bytes at the given read bandwidth).
    pub roofline_frac: Option<f64>,
    /// The second fastest mapping and its median, µs.
    pub runner_up: Option<(String, f64)>,
    /// Candidates whose output failed the check, or that failed to run, with the reason.
    pub disqualified: Vec<(String, String)>,
}

/// What [`GpuEngine::tune_matvec`] did.
#[derive(Clone, Debug)]
pub struct TuneReport {
    /// The mode it ran in.
    pub tuning: Tuning,
    /// One row per key, in key order.
    pub rows: Vec<TuneRow>,
    /// The cache file read (and written where anything was measured).
    pub cache: Option<PathBuf>,
    /// One-line warnings (a corrupt cache file, rewritten).
    pub warnings: Vec<String>,
    /// Seconds the whole call took.
    pub seconds: f64,
}

/// How [`GpuEngine::tune_matvec`] measures.
#[derive(Clone, Debug)]
pub struct TuneSettings {
    /// The mode.
    pub tuning: Tuning,
    /// The cache directory (default [`TuneCache::dir`]).
    pub cache_dir: Option<PathBuf>,
    /// The read bandwidth the roofline is taken at, bytes per second (e.g. the bench's measured
    /// read ceiling); `None`: no early stop at the roofline.
    pub read_bytes_per_s: Option<f64>,
    /// The race's rules (samples, drop factor, budget per key).
    pub rules: RaceRules,
    /// The budget of the whole call.
    pub total_budget: Duration,
}

impl TuneSettings {
    /// `tuning` with the default rules and budgets ([`Budget::PER_MODEL`], [`Budget::PER_KEY`]).
    pub fn new(tuning: Tuning) -> TuneSettings {
        TuneSettings {
            tuning,
            cache_dir: None,
            read_bytes_per_s: None,
            rules: RaceRules::default(),
            total_budget: Budget::PER_MODEL,
        }
    }
}

impl GpuEngine {
    /// The matvec mappings the tuner races for `columns` columns: the prior (the engine's default,
    /// [`MatVecPolicy::mapping`](super::MatVecPolicy::mapping)) first, then the classic mapping and
    /// [`TUNE_SHAPES`] that the device can run, each once.
    pub fn matvec_candidates(&self, columns: u32) -> Vec<Mapping> {
        let prior = self.kernels.plan.matvec.mapping;
        let max_wg = self.limits().max_compute_invocations_per_workgroup;
        let mut out = vec![prior];
        let shapes = TUNE_SHAPES
            .iter()
            .filter_map(|&(w, r, slot)| RowsShape::new(w, r)?.with_slot(slot))
            .filter(|s| s.workgroup <= max_wg)
            // Rows halved for many columns: shapes that become the same are one candidate.
            .map(|s| RowsShape {
                rows: s.rows_for(columns),
                ..s
            });
        for m in std::iter::once(Mapping::Classic).chain(shapes.map(Mapping::Rows)) {
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }

    /// Tunes matvec for the weights of a model: for each (format, K, N) of `tensors` (those with
    /// a shader) and each of `columns` (1 to 8), the mappings of
    /// [`GpuEngine::matvec_candidates`] are raced on this device ([`crate::gpu::tune::race`]:
    /// the key's own tensors as the rotation set, so weights come cold from memory as in
    /// decoding), every candidate's output checked on a probe against the f64 reference within
    /// the f32 bound (a candidate that fails is disqualified and reported), and the fastest
    /// becomes the policy's choice for those calls. Cache hits are used as `settings.tuning`
    /// allows; results are stored in the device's cache file. `off` clears earlier choices and
    /// measures nothing: every call then takes the engine's default.
    pub fn tune_matvec(
        &self,
        tensors: &[&ResidentTensor],
        columns: &[u32],
        settings: &TuneSettings,
    ) -> Result<TuneReport> {
        let start = Instant::now();
        let mut groups: BTreeMap<(Format, u64, u64), Vec<&ResidentTensor>> = BTreeMap::new();
        for &t in tensors {
            if !t.format.has_shader() {
                continue;
            }
            let s = shape(t)?;
            groups.entry((s.format, s.k, s.rows)).or_default().push(t);
        }
        let keys: Vec<TuneKey> = groups
            .keys()
            .flat_map(|&(format, k, n)| {
                columns.iter().map(move |&c| TuneKey {
                    op: super::Op::MatVec,
                    format,
                    k,
                    n,
                    columns: c,
                })
            })
            .collect();
        if let Some(k) = keys
            .iter()
            .find(|k| k.columns == 0 || k.columns > MATVEC_MAX_BATCH)
        {
            return Err(super::plan::invalid(format!(
                "tune_matvec: {} columns (1 to {MATVEC_MAX_BATCH})",
                k.columns
            )));
        }
        let mut report = TuneReport {
            tuning: settings.tuning,
            rows: Vec::new(),
            cache: None,
            warnings: Vec::new(),
            seconds: 0.0,
        };
        let prior = |key: &TuneKey| TuneRow {
            key: *key,
            mapping: self.kernels.plan.matvec.mapping,
            source: TuneSource::Prior,
            median_us: None,
            roofline_frac: None,
            runner_up: None,
            disqualified: Vec::new(),
        };
        if settings.tuning == Tuning::Off {
            for key in &keys {
                self.kernels.set_mapping(mapping_key(key), None);
                report.rows.push(prior(key));
            }
            report.seconds = start.elapsed().as_secs_f64();
            return Ok(report);
        }
        let mut cache = self.open_cache(&keys, settings)?;
        report.cache = Some(cache.0.path().to_path_buf());
        report.warnings.extend(cache.1.take());
        let cache = &mut cache.0;
        let timer = GpuTimer::new(self)?;
        let mut budget = Budget::new(settings.total_budget, settings.rules.key_budget);
        let mut stored = false;
        for key in &keys {
            let hit = cache.get(key).cloned();
            if let (Some(e), true) = (&hit, settings.tuning.uses_hits()) {
                if let Ok(mapping) = e.variant.parse::<Mapping>() {
                    if self.matvec_candidates(key.columns).contains(&mapping) {
                        self.kernels.set_mapping(mapping_key(key), Some(mapping));
                        report.rows.push(TuneRow {
                            mapping,
                            source: TuneSource::Cache,
                            median_us: Some(e.median_us),
                            roofline_frac: e.roofline_frac,
                            runner_up: e.runner_up.clone(),
                            ..prior(key)
                        });
                        continue;
                    }
                }
            }
            let Some(key_budget) = budget
                .next_key()
                .filter(|_| settings.tuning.measures(hit.is_some()))
            else {
                self.kernels.set_mapping(mapping_key(key), None);
                report.rows.push(prior(key));
                continue;
            };
            let rotation = &groups[&(key.format, key.k, key.n)];
            let t0 = Instant::now();
            let row = self.race_key(key, rotation, &timer, settings, key_budget)?;
            budget.spend(t0.elapsed());
            self.kernels
                .set_mapping(mapping_key(key), Some(row.1.mapping));
            if settings.tuning.stores() {
                if let Some(entry) = row.0 {
                    cache.insert(*key, entry)?;
                    stored = true;
                }
            }
            report.rows.push(row.1);
        }
        if stored {
            cache.save()?;
        }
        report.seconds = start.elapsed().as_secs_f64();
        Ok(report)
    }

    /// The device's cache file: its fingerprint holds the hash of every candidate's WGSL for
    /// the keys' formats and columns.
    fn open_cache(
        &self,
        keys: &[TuneKey],
        settings: &TuneSettings,
    ) -> Result<(TuneCache, Option<String>)> {
        let mut sources = Vec::new();
        for key in keys {
            // The kernel each candidate runs (vec4 x, the weight a word per load): the variant
            // the cache's hash stands for.
            let plan = &self.kernels.plan;
            let precision = self.precision_for(Op::MatVec, key.format, key.k);
            for m in self.matvec_candidates(key.columns) {
                if let Some(k) =
                    plan.matvec_key(key.format, key.columns, (true, false), precision, m)
                {
                    sources.push(kernel_source(&k)?);
                }
            }
        }
        sources.sort();
        sources.dedup();
        let fingerprint = Fingerprint::new(
            self.adapter_info(),
            self.limits(),
            self.device().features(),
            candidates_hash(sources.iter().map(String::as_str)),
        );
        let dir = match &settings.cache_dir {
            Some(d) => d.clone(),
            None => TuneCache::dir()?,
        };
        Ok(TuneCache::open(&dir, fingerprint))
    }

    /// Races the candidates of one key; the cache entry (where one was measured) and the row.
    fn race_key(
        &self,
        key: &TuneKey,
        rotation: &[&ResidentTensor],
        timer: &GpuTimer,
        settings: &TuneSettings,
        key_budget: Duration,
    ) -> Result<(Option<Entry>, TuneRow)> {
        let candidates = self.matvec_candidates(key.columns);
        let cols = key.columns as u64;
        let mut rng = Rng::new(0x7475_6e65 ^ key.k ^ (key.n << 20));
        let x: Vec<f32> = (0..cols * key.k)
            .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
            .collect();
        let xb = buffers::upload(
            self.device(),
            "gguf-dequant tune x",
            bytemuck::cast_slice(&x),
        )?;
        let yb = buffers::output_and_readback(
            self.device(),
            "gguf-dequant tune y",
            (cols * key.n * 4).next_multiple_of(16),
        )?
        .0;
        let weight_bytes: u64 = rotation
            .iter()
            .map(|t| shape(t).map_or(0, |s| s.rows * s.row_bytes))
            .sum();
        let at_roofline = settings
            .read_bytes_per_s
            .and_then(|bw| roofline_time(weight_bytes / rotation.len().max(1) as u64, bw));
        let rules = RaceRules {
            key_budget,
            ..settings.rules.clone()
        }
        .with_roofline(at_roofline);
        let mut warm = vec![false; candidates.len()];
        let mut sample = |i: usize| -> Result<Duration> {
            let record = |enc: &mut wgpu::CommandEncoder| {
                self.record_mapped(enc, rotation, &xb, &yb, key.columns, candidates[i])
            };
            if !warm[i] {
                // The first call compiles the pipelines: untimed.
                let mut enc = self.encoder();
                record(&mut enc)?;
                let index = self.submit("tuning a candidate", enc)?;
                self.wait(index)?;
                warm[i] = true;
            }
            let (seconds, _) = timer.time(self, record)?;
            Ok(Duration::from_secs_f64(seconds / rotation.len() as f64))
        };
        let precision = self.precision_for(Op::MatVec, key.format, key.k);
        let probe = Probe::new(key, precision)?;
        let mut check = |i: usize| probe.check(self, candidates[i]);
        let clock_start = Instant::now();
        let mut clock = || clock_start.elapsed();
        let result = race(
            candidates.len(),
            &rules,
            &mut clock,
            &mut sample,
            &mut check,
        )?;
        let name = |i: usize| candidates[i].to_string();
        let entry = result.entry(&name, at_roofline);
        let runner_up = result
            .runner_up()
            .map(|(i, d)| (name(i), d.as_secs_f64() * 1e6));
        let row = TuneRow {
            key: *key,
            mapping: candidates[result.winner],
            source: TuneSource::Measured,
            median_us: result.medians[result.winner].map(|d| d.as_secs_f64() * 1e6),
            roofline_frac: entry.as_ref().and_then(|e| e.roofline_frac),
            runner_up,
            disqualified: result
                .disqualified
                .iter()
                .map(|(i, why)| (name(*i), why.clone()))
                .collect(),
        };
        Ok((entry, row))
    }

    /// Records one matvec of `columns` columns on `mapping` per tensor of `rotation`.
    fn record_mapped(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        rotation: &[&ResidentTensor],
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        columns: u32,
        mapping: Mapping,
    ) -> Result<()> {
        let mut recorder = self.recorder();
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("gguf-dequant tune"),
                timestamp_writes: None,
            });
            for &w in rotation {
                let job = MulMatJob {
                    weight: w,
                    x: Operand::whole(x),
                    y: Operand::whole(y),
                    batch: columns,
                };
                recorder.matvec_mapped(&mut pass, &job, mapping)?;
            }
        }
        recorder.finish();
        self.check_device()
    }
}

/// The policy's key of a tuner key.
fn mapping_key(key: &TuneKey) -> super::MappingKey {
    (key.format, key.k, key.n, key.columns)
}

/// A small weight of a key's format and K with its f64 reference: what every candidate's output
/// must match within the bound of the engine's precision.
struct Probe {
    raw: Vec<u8>,
    format: Format,
    k: usize,
    columns: usize,
    x: Vec<f32>,
    want: ops::Sums,
}

impl Probe {
    fn new(key: &TuneKey, precision: super::Precision) -> Result<Probe> {
        let (format, k, columns) = (key.format, key.k as usize, key.columns as usize);
        let blocks = k / format.block_elems() * PROBE_ROWS;
        let raw = if format.block_elems() == 1 {
            normal_blocks(format, blocks, 0x70726f6265)
        } else {
            finite_blocks(format, blocks, 0x70726f6265)
        };
        let mut rng = Rng::new(key.k);
        let x: Vec<f32> = (0..columns * k)
            .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
            .collect();
        let want = ops::mul_mat_in(precision, format, &raw, k, &x, columns)?;
        Ok(Probe {
            raw,
            format,
            k,
            columns,
            x,
            want,
        })
    }

    /// Whether `mapping`'s output on the probe is within the bound everywhere.
    fn check(&self, engine: &GpuEngine, mapping: Mapping) -> Result<bool> {
        let dims = [self.k as u64, PROBE_ROWS as u64];
        let w = ResidentTensor::upload(
            engine,
            "gguf-dequant tune probe",
            self.format,
            &dims,
            &self.raw,
        )?;
        let got = engine.run_mul_mapped(&w, &self.x, self.columns, Some(mapping))?;
        Ok(got.iter().enumerate().all(|(i, &g)| {
            // Sums past f32's range are outside the contract (an f32 partial sum may overflow).
            self.want.abs[i] > f32::MAX as f64 || self.want.fraction(i, g) <= 1.0
        }))
    }
}
