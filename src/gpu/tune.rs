//! The core of the kernel tuner: which variant of a kernel to run for one (op, format, K, N,
//! columns) key, measured on the caller's device and remembered per device. Pure policy and
//! files; no wgpu call is made here, so all of it is tested without a GPU.
//!
//! * **Modes** ([`Tuning`], env `GGUF_DEQUANT_TUNE`): `off` runs candidate 0, the vendor prior,
//!   and never touches the cache (the caller's job: it runs no race and opens no cache); `cache`
//!   uses hits and measures nothing; `on` uses hits, measures misses and stores them; `force`
//!   measures every key again and stores it.
//! * **The race** ([`race`]): round robin over the live candidates, [`RaceRules::min_samples`]
//!   to [`RaceRules::max_samples`] samples each; after `min_samples` a candidate whose median is
//!   [`RaceRules::drop_factor`] behind the leader's is dropped; the race stops once the leader's
//!   median reaches [`RaceRules::roofline`] (90 % of the read roofline) or the key's budget is
//!   spent. Every candidate but 0 is checked against candidate 0's output once, before its first
//!   sample; a mismatch or an error disqualifies it. Ties go to the lowest index, so the same
//!   samples give the same winner.
//! * **Budgets** ([`Budget`]): at most 150 ms per key and 2 s per model; a cache hit costs nothing.
//! * **The cache** ([`TuneCache`]): one pretty-printed JSON file per device,
//!   `<cache>/tune/v1/<fingerprint id>.json` (`<cache>` is `$GGUF_DEQUANT_CACHE`, default
//!   `~/.cache/gguf-dequant`), keyed by the full [`Fingerprint`]; written atomically. A file of
//!   another fingerprint is a miss; a corrupt or oversized one is reported in one line and
//!   rewritten on the next save. With one cache file, the variants chosen repeat bit for bit.
//!
//! ```json
//! {
//!   "format": "gguf-dequant tuning cache",
//!   "version": 1,
//!   "fingerprint": {
//!     "adapter": "NVIDIA H200",
//!     "vendor": 4318,
//!     "device": 8997,
//!     "device_type": "DiscreteGpu",
//!     "driver": "NVIDIA",
//!     "driver_info": "570.124.06",
//!     "backend": "vulkan",
//!     "subgroup_min_size": 32,
//!     "subgroup_max_size": 32,
//!     "limits": {
//!       "max_compute_workgroup_storage_size": 49152,
//!       "max_compute_invocations_per_workgroup": 1024,
//!       "max_storage_buffer_binding_size": 4294967295,
//!       "max_compute_workgroup_size_x": 1024,
//!       "min_storage_buffer_offset_alignment": 32,
//!       "max_compute_workgroups_per_dimension": 65535
//!     },
//!     "features": "SUBGROUP | TIMESTAMP_QUERY",
//!     "wgpu": "30",
//!     "crate": "0.1.0",
//!     "candidates_hash": "3f2a9c0d1e4b5a67"
//!   },
//!   "entries": {
//!     "matvec q4_k 4096x14336 b1": {
//!       "variant": "rows4 t128 vec4",
//!       "median_us": 21.377,
//!       "samples": 10,
//!       "roofline_frac": 0.9412,
//!       "runner_up": {
//!         "variant": "t32 vec4 u4",
//!         "median_us": 24.8
//!       }
//!     }
//!   }
//! }
//! ```
//!
//! JSON: `serde_json`'s `Value` (no derive), enabled by the `gpu` feature. It is already built for
//! the command line and the `output` feature, so default builds gain no crate; a hand-written
//! reader would be more code to keep strict (escapes, surrogates, nesting, number edge cases)
//! than the few small crates it would save a `gpu`-only build.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{Error, GpuError, Result};
use crate::formats::Format;
use crate::gpu::kernels::Op;

/// The environment variable that picks the tuning mode ([`Tuning::from_env`]).
pub const TUNE_ENV: &str = "GGUF_DEQUANT_TUNE";
/// The environment variable that names the cache directory ([`TuneCache::dir`]).
pub const CACHE_ENV: &str = "GGUF_DEQUANT_CACHE";
/// The major version of wgpu this crate is built against (`wgpu = "30"` in Cargo.toml; a test
/// checks the two agree). wgpu exposes no version constant, and a semver-compatible release
/// keeps its shader translation close enough that the candidates' WGSL hash and the driver
/// fields decide.
pub const WGPU_VERSION: &str = "30";
/// Largest cache file read (4 MiB); a larger one is refused as corrupt, and [`TuneCache::save`]
/// refuses to write one.
pub const MAX_CACHE_FILE_BYTES: u64 = 4 << 20;
/// Largest `max_samples` a [`RaceRules`] takes.
pub const MAX_SAMPLES: u32 = 1000;
/// The fraction of the read roofline at which a race stops ([`RaceRules::with_roofline`]).
pub const ROOFLINE_FRACTION: f64 = 0.9;

const FILE_FORMAT: &str = "gguf-dequant tuning cache";
const FILE_VERSION: u64 = 1;

/// What can go wrong in the tuner's modes, keys and cache (never a measurement: those are
/// [`crate::Error`]s from the caller's closures).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// A string that is not one of `off`, `cache`, `on`, `force`.
    #[error("`{value}` is not a tuning mode (expected off, cache, on or force)")]
    InvalidMode {
        /// The string.
        value: String,
    },
    /// An environment variable whose value is not a tuning mode.
    #[error("{var}={value:?} is not a tuning mode (expected off, cache, on or force)")]
    InvalidEnv {
        /// The variable.
        var: &'static str,
        /// Its value (lossily decoded).
        value: String,
    },
    /// A string that is not a [`TuneKey`].
    #[error("`{key}` is not a tuning key ({reason}; expected e.g. `matvec q4_k 4096x14336 b1`)")]
    InvalidKey {
        /// The string.
        key: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// An [`Entry`] that cannot be stored (and would not be read back).
    #[error("invalid tuning entry: {0}")]
    InvalidEntry(String),
    /// Neither `GGUF_DEQUANT_CACHE` nor a home directory is set.
    #[error("no cache directory: set {CACHE_ENV} or HOME")]
    NoCacheDir,
    /// The cache would exceed [`MAX_CACHE_FILE_BYTES`].
    #[error("{path}: the tuning cache would be {bytes} bytes, over the limit of {limit}")]
    TooLarge {
        /// The cache file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// [`MAX_CACHE_FILE_BYTES`].
        limit: u64,
    },
    /// An operating-system error writing the cache.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl From<TuneError> for Error {
    /// I/O errors as [`Error::Io`]; the rest as [`GpuError::InvalidOption`] with the message.
    fn from(e: TuneError) -> Error {
        match e {
            TuneError::Io { path, source } => Error::Io { path, source },
            e => Error::Gpu(GpuError::InvalidOption(e.to_string())),
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> TuneError + '_ {
    move |source| TuneError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How kernel variants are chosen ([`TUNE_ENV`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tuning {
    /// Candidate 0 (the vendor prior) only; the cache is never read or written.
    Off,
    /// Cache hits are used; nothing is measured or written.
    Cache,
    /// Cache hits are used; misses are measured and stored.
    On,
    /// Every key is measured again and stored.
    Force,
}

impl Tuning {
    /// Every mode.
    pub const ALL: [Tuning; 4] = [Tuning::Off, Tuning::Cache, Tuning::On, Tuning::Force];

    /// `off`, `cache`, `on` or `force`.
    pub const fn name(self) -> &'static str {
        match self {
            Tuning::Off => "off",
            Tuning::Cache => "cache",
            Tuning::On => "on",
            Tuning::Force => "force",
        }
    }

    /// The mode [`TUNE_ENV`] names: `None` when it is unset or empty, an error naming the
    /// variable and value when it names no mode.
    pub fn from_env() -> Result<Option<Tuning>, TuneError> {
        Tuning::from_env_value(std::env::var_os(TUNE_ENV))
    }

    fn from_env_value(value: Option<OsString>) -> Result<Option<Tuning>, TuneError> {
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let invalid = || TuneError::InvalidEnv {
            var: TUNE_ENV,
            value: value.to_string_lossy().into_owned(),
        };
        let s = value.to_str().ok_or_else(invalid)?;
        s.parse().map(Some).map_err(|_| invalid())
    }

    /// The default on an adapter of `device_type`: `off` on CPU adapters (software rasterisers,
    /// where timings say little and tuning costs the most), `on` elsewhere.
    pub const fn default_for(device_type: wgpu::DeviceType) -> Tuning {
        match device_type {
            wgpu::DeviceType::Cpu => Tuning::Off,
            _ => Tuning::On,
        }
    }

    /// Whether the cache file is opened at all (every mode but `off`; `force` opens it to keep
    /// the entries of other keys).
    pub const fn opens_cache(self) -> bool {
        !matches!(self, Tuning::Off)
    }

    /// Whether a cache hit is used as it is (`cache`, `on`).
    pub const fn uses_hits(self) -> bool {
        matches!(self, Tuning::Cache | Tuning::On)
    }

    /// Whether a key is measured, given whether the cache has it (`on`: misses; `force`: all).
    pub const fn measures(self, hit: bool) -> bool {
        match self {
            Tuning::On => !hit,
            Tuning::Force => true,
            Tuning::Off | Tuning::Cache => false,
        }
    }

    /// Whether measurements are stored (`on`, `force`).
    pub const fn stores(self) -> bool {
        matches!(self, Tuning::On | Tuning::Force)
    }
}

impl fmt::Display for Tuning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Tuning {
    type Err = TuneError;

    /// `off`, `cache`, `on` or `force`, ASCII case ignored.
    fn from_str(s: &str) -> Result<Tuning, TuneError> {
        Tuning::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| TuneError::InvalidMode {
                value: s.to_owned(),
            })
    }
}

/// What is tuned: one kernel on one weight shape. Its string form, `matvec q4_k 4096x14336 b1`
/// (op, format in lower case, `K`x`N`, `b`columns), is the cache's JSON key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TuneKey {
    /// The kernel.
    pub op: Op,
    /// The weight's format.
    pub format: Format,
    /// Values per row.
    pub k: u64,
    /// Rows.
    pub n: u64,
    /// Columns per dispatch (at least 1).
    pub columns: u32,
}

impl fmt::Display for TuneKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}x{} b{}",
            self.op.name(),
            self.format.name().to_ascii_lowercase(),
            self.k,
            self.n,
            self.columns
        )
    }
}

/// A decimal number of digits only (no sign, no leading zero unless it is `0`).
fn strict_number<T: FromStr>(s: &str) -> Option<T> {
    let plain =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    plain.then(|| s.parse().ok()).flatten()
}

impl FromStr for TuneKey {
    type Err = TuneError;

    /// The string form ([`TuneKey`]), names in any ASCII case, fields one space apart.
    fn from_str(s: &str) -> Result<TuneKey, TuneError> {
        let bad = |reason| TuneError::InvalidKey {
            key: s.chars().take(200).collect(),
            reason,
        };
        let parts: Vec<&str> = s.splitn(5, ' ').collect();
        let [op, format, shape, columns] = parts[..] else {
            return Err(bad("not four fields one space apart"));
        };
        let op = Op::ALL
            .iter()
            .copied()
            .find(|o| o.name().eq_ignore_ascii_case(op))
            .ok_or_else(|| bad("unknown op"))?;
        let format = Format::from_name(format).ok_or_else(|| bad("unknown format"))?;
        let (k, n) = shape
            .split_once('x')
            .ok_or_else(|| bad("shape is not KxN"))?;
        let (k, n) = (
            strict_number(k).ok_or_else(|| bad("K is not a number"))?,
            strict_number(n).ok_or_else(|| bad("N is not a number"))?,
        );
        let columns = columns
            .strip_prefix('b')
            .and_then(strict_number)
            .filter(|&c: &u32| c >= 1)
            .ok_or_else(|| bad("columns are not b1 or more"))?;
        Ok(TuneKey {
            op,
            format,
            k,
            n,
            columns,
        })
    }
}

/// The device limits kernels depend on, as [`Fingerprint`] records them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KernelLimits {
    /// `max_compute_workgroup_storage_size`.
    pub max_compute_workgroup_storage_size: u32,
    /// `max_compute_invocations_per_workgroup`.
    pub max_compute_invocations_per_workgroup: u32,
    /// `max_storage_buffer_binding_size`.
    pub max_storage_buffer_binding_size: u64,
    /// `max_compute_workgroup_size_x`.
    pub max_compute_workgroup_size_x: u32,
    /// `min_storage_buffer_offset_alignment`.
    pub min_storage_buffer_offset_alignment: u32,
    /// `max_compute_workgroups_per_dimension`.
    pub max_compute_workgroups_per_dimension: u32,
}

impl KernelLimits {
    /// The fields of `limits` kernels use.
    pub fn of(limits: &wgpu::Limits) -> KernelLimits {
        KernelLimits {
            max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
            max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_compute_workgroup_size_x: limits.max_compute_workgroup_size_x,
            min_storage_buffer_offset_alignment: limits.min_storage_buffer_offset_alignment,
            max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
        }
    }

    fn to_json(self) -> Value {
        json!({
            "max_compute_workgroup_storage_size": self.max_compute_workgroup_storage_size,
            "max_compute_invocations_per_workgroup": self.max_compute_invocations_per_workgroup,
            "max_storage_buffer_binding_size": self.max_storage_buffer_binding_size,
            "max_compute_workgroup_size_x": self.max_compute_workgroup_size_x,
            "min_storage_buffer_offset_alignment": self.min_storage_buffer_offset_alignment,
            "max_compute_workgroups_per_dimension": self.max_compute_workgroups_per_dimension,
        })
    }
}

/// Everything a tuning result depends on besides the key: the adapter and its driver, the limits
/// and features the device was created with, wgpu's and this crate's versions, and a hash of the
/// candidates' WGSL. The PCI bus id is left out, so identical cards share a file. Equal
/// fingerprints share one cache file ([`Fingerprint::id`]); any difference is a miss.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    /// `AdapterInfo::name`.
    pub adapter: String,
    /// `AdapterInfo::vendor`.
    pub vendor: u32,
    /// `AdapterInfo::device`.
    pub device: u32,
    /// `AdapterInfo::device_type`, as its Debug name (`DiscreteGpu`).
    pub device_type: String,
    /// `AdapterInfo::driver`.
    pub driver: String,
    /// `AdapterInfo::driver_info`.
    pub driver_info: String,
    /// `AdapterInfo::backend` (`vulkan`).
    pub backend: String,
    /// `AdapterInfo::subgroup_min_size`.
    pub subgroup_min_size: u32,
    /// `AdapterInfo::subgroup_max_size`.
    pub subgroup_max_size: u32,
    /// The device's limits that kernels use.
    pub limits: KernelLimits,
    /// The device's features, as wgpu names them (`TIMESTAMP_QUERY | SUBGROUP`).
    pub features: String,
    /// [`WGPU_VERSION`].
    pub wgpu: String,
    /// This crate's version.
    pub crate_version: String,
    /// A hash of the candidates' composed WGSL ([`candidates_hash`]).
    pub candidates_hash: String,
}

impl Fingerprint {
    /// The fingerprint of a device made from an adapter with `info`, created with `limits` and
    /// `features` (the device's, not the adapter's), whose candidates hash to `candidates_hash`.
    pub fn new(
        info: &wgpu::AdapterInfo,
        limits: &wgpu::Limits,
        features: wgpu::Features,
        candidates_hash: impl Into<String>,
    ) -> Fingerprint {
        Fingerprint {
            adapter: info.name.clone(),
            vendor: info.vendor,
            device: info.device,
            device_type: format!("{:?}", info.device_type),
            driver: info.driver.clone(),
            driver_info: info.driver_info.clone(),
            backend: info.backend.to_str().to_owned(),
            subgroup_min_size: info.subgroup_min_size,
            subgroup_max_size: info.subgroup_max_size,
            limits: KernelLimits::of(limits),
            features: features.to_string(),
            wgpu: WGPU_VERSION.to_owned(),
            crate_version: env!("CARGO_PKG_VERSION").to_owned(),
            candidates_hash: candidates_hash.into(),
        }
    }

    /// The file name's stem: the first 16 hex digits of the SHA-256 of the compact JSON of the
    /// fingerprint object as the file spells it (fields in a fixed order).
    pub fn id(&self) -> String {
        let canonical = serde_json::to_vec(&self.to_json()).unwrap_or_default();
        hex16(&Sha256::digest(canonical))
    }

    fn to_json(&self) -> Value {
        json!({
            "adapter": self.adapter,
            "vendor": self.vendor,
            "device": self.device,
            "device_type": self.device_type,
            "driver": self.driver,
            "driver_info": self.driver_info,
            "backend": self.backend,
            "subgroup_min_size": self.subgroup_min_size,
            "subgroup_max_size": self.subgroup_max_size,
            "limits": self.limits.to_json(),
            "features": self.features,
            "wgpu": self.wgpu,
            "crate": self.crate_version,
            "candidates_hash": self.candidates_hash,
        })
    }
}

fn hex16(digest: &[u8]) -> String {
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// A hash of the candidates' WGSL sources, in order, for [`Fingerprint::candidates_hash`]: the
/// first 16 hex digits of a SHA-256 over each source's length and bytes.
pub fn candidates_hash<'a>(sources: impl IntoIterator<Item = &'a str>) -> String {
    let mut hash = Sha256::new();
    for s in sources {
        hash.update((s.len() as u64).to_le_bytes());
        hash.update(s.as_bytes());
    }
    hex16(&hash.finalize())
}

/// One key's result. [`TuneCache::insert`] rounds `median_us` to the nanosecond and
/// `roofline_frac` to 10⁻⁴, so that what is stored reads back equal.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The winning variant's name (the caller's naming; non-empty).
    pub variant: String,
    /// Its median time in microseconds (finite, not negative).
    pub median_us: f64,
    /// Samples behind the median.
    pub samples: u32,
    /// Its fraction of the read roofline (time at the roofline / median), where one was known.
    pub roofline_frac: Option<f64>,
    /// The second best variant and its median in microseconds.
    pub runner_up: Option<(String, f64)>,
}

fn round_to(x: f64, scale: f64) -> f64 {
    (x * scale).round() / scale
}

impl Entry {
    fn normalised(mut self) -> Result<Entry, TuneError> {
        let time = |what: &str, us: f64| {
            if us.is_finite() && us >= 0.0 {
                Ok(round_to(us, 1e3))
            } else {
                Err(TuneError::InvalidEntry(format!("{what} {us} µs")))
            }
        };
        if self.variant.is_empty() {
            return Err(TuneError::InvalidEntry("empty variant name".into()));
        }
        self.median_us = time("median", self.median_us)?;
        if let Some(f) = self.roofline_frac {
            if !(f.is_finite() && f >= 0.0) {
                return Err(TuneError::InvalidEntry(format!("roofline fraction {f}")));
            }
            self.roofline_frac = Some(round_to(f, 1e4));
        }
        if let Some((name, us)) = self.runner_up.take() {
            if name.is_empty() {
                return Err(TuneError::InvalidEntry("empty runner-up name".into()));
            }
            self.runner_up = Some((name, time("runner-up median", us)?));
        }
        Ok(self)
    }

    fn to_json(&self) -> Value {
        json!({
            "variant": self.variant,
            "median_us": self.median_us,
            "samples": self.samples,
            "roofline_frac": self.roofline_frac,
            "runner_up": self.runner_up.as_ref().map(|(v, us)| json!({"variant": v, "median_us": us})),
        })
    }

    fn from_json(v: &Value) -> Result<Entry, String> {
        let o = object(
            v,
            &[
                "variant",
                "median_us",
                "samples",
                "roofline_frac",
                "runner_up",
            ],
        )?;
        let samples = o["samples"]
            .as_u64()
            .and_then(|s| u32::try_from(s).ok())
            .ok_or("`samples` is not a u32")?;
        let roofline_frac = match &o["roofline_frac"] {
            Value::Null => None,
            f => Some(f.as_f64().ok_or("`roofline_frac` is not a number")?),
        };
        let runner_up = match &o["runner_up"] {
            Value::Null => None,
            r => {
                let r =
                    object(r, &["variant", "median_us"]).map_err(|e| format!("runner_up: {e}"))?;
                Some((
                    string(&r["variant"], "runner_up.variant")?,
                    number(&r["median_us"])?,
                ))
            }
        };
        Entry {
            variant: string(&o["variant"], "variant")?,
            median_us: number(&o["median_us"])?,
            samples,
            roofline_frac,
            runner_up,
        }
        .normalised()
        .map_err(|e| e.to_string())
    }
}

/// `v` as an object with exactly the fields `names`.
fn object<'a>(v: &'a Value, names: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let o = v.as_object().ok_or("not an object")?;
    if let Some(k) = o.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(format!(
            "unknown field `{}`",
            k.chars().take(64).collect::<String>()
        ));
    }
    if let Some(k) = names.iter().find(|k| !o.contains_key(**k)) {
        return Err(format!("missing field `{k}`"));
    }
    Ok(o)
}

fn string(v: &Value, what: &str) -> Result<String, String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("`{what}` is not a string"))
}

fn number(v: &Value) -> Result<f64, String> {
    v.as_f64()
        .ok_or_else(|| "`median_us` is not a number".to_owned())
}

/// The tuning results of one device: the file `<dir>/<fingerprint id>.json` and its entries.
#[derive(Clone, Debug)]
pub struct TuneCache {
    path: PathBuf,
    fingerprint: Fingerprint,
    entries: BTreeMap<TuneKey, Entry>,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl TuneCache {
    /// The tuning cache directory: `$GGUF_DEQUANT_CACHE/tune/v1`, or
    /// `$HOME/.cache/gguf-dequant/tune/v1` (on Windows `%USERPROFILE%` where `HOME` is unset);
    /// empty variables count as unset.
    pub fn dir() -> Result<PathBuf, TuneError> {
        let home = std::env::var_os("HOME").or_else(|| {
            if cfg!(windows) {
                std::env::var_os("USERPROFILE")
            } else {
                None
            }
        });
        TuneCache::dir_from(std::env::var_os(CACHE_ENV), home)
    }

    fn dir_from(cache: Option<OsString>, home: Option<OsString>) -> Result<PathBuf, TuneError> {
        let set = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
        let base = match (set(cache), set(home)) {
            (Some(cache), _) => cache,
            (None, Some(home)) => home.join(".cache").join("gguf-dequant"),
            (None, None) => return Err(TuneError::NoCacheDir),
        };
        Ok(base.join("tune").join("v1"))
    }

    /// The cache of `fingerprint` in `dir` ([`TuneCache::dir`], or the caller's), and a one-line
    /// warning where the file was unusable. A missing file, or one of another fingerprint (a
    /// miss), gives an empty cache and no warning; an unreadable, oversized or corrupt one gives
    /// an empty cache and a warning naming the file and the fault (the next save rewrites it).
    /// Never reads more than [`MAX_CACHE_FILE_BYTES`].
    pub fn open(dir: &Path, fingerprint: Fingerprint) -> (TuneCache, Option<String>) {
        let path = dir.join(format!("{}.json", fingerprint.id()));
        let mut cache = TuneCache {
            path,
            fingerprint,
            entries: BTreeMap::new(),
        };
        let warning = match cache.read() {
            Ok(entries) => {
                cache.entries = entries;
                None
            }
            Err(what) => Some(format!(
                "tuning cache {}: {what}; ignoring it (it is rewritten on the next save)",
                cache.path.display()
            )),
        };
        (cache, warning)
    }

    /// The file's entries; empty for a missing file or a fingerprint mismatch; `Err(what is
    /// wrong)` otherwise.
    fn read(&self) -> Result<BTreeMap<TuneKey, Entry>, String> {
        let file = match fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(format!("cannot be read: {e}")),
        };
        let too_large =
            |n: u64| format!("{n} bytes or more, over the limit of {MAX_CACHE_FILE_BYTES}");
        let len = file
            .metadata()
            .map_err(|e| format!("cannot be read: {e}"))?
            .len();
        if len > MAX_CACHE_FILE_BYTES {
            return Err(too_large(len));
        }
        let mut bytes = Vec::with_capacity(len as usize);
        file.take(MAX_CACHE_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot be read: {e}"))?;
        if bytes.len() as u64 > MAX_CACHE_FILE_BYTES {
            return Err(too_large(bytes.len() as u64));
        }
        let v: Value =
            serde_json::from_slice(&bytes).map_err(|e| format!("not valid JSON: {e}"))?;
        let top = object(&v, &["format", "version", "fingerprint", "entries"])?;
        if top["format"].as_str() != Some(FILE_FORMAT) {
            return Err(format!("`format` is not {FILE_FORMAT:?}"));
        }
        if top["version"].as_u64() != Some(FILE_VERSION) {
            return Err(format!("`version` is not {FILE_VERSION}"));
        }
        if top["fingerprint"] != self.fingerprint.to_json() {
            return Ok(BTreeMap::new());
        }
        let items = top["entries"]
            .as_object()
            .ok_or("`entries` is not an object")?;
        let mut entries = BTreeMap::new();
        for (k, e) in items {
            let shown = || k.chars().take(64).collect::<String>();
            let key: TuneKey = k.parse().map_err(|e| format!("entries: {e}"))?;
            if key.to_string() != *k {
                return Err(format!(
                    "entries: key `{}` is not in canonical form",
                    shown()
                ));
            }
            let entry = Entry::from_json(e).map_err(|e| format!("entry `{}`: {e}", shown()))?;
            entries.insert(key, entry);
        }
        Ok(entries)
    }

    /// The cache file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The fingerprint it belongs to.
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }

    /// All entries, in key order.
    pub fn entries(&self) -> &BTreeMap<TuneKey, Entry> {
        &self.entries
    }

    /// The entry of `key`, if any.
    pub fn get(&self, key: &TuneKey) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// Stores `entry` for `key` (in memory; [`TuneCache::save`] writes the file), rounded as
    /// [`Entry`] says; returns the entry it replaces. Refuses an entry that would not read
    /// back (an empty name, a negative or non-finite time or fraction).
    pub fn insert(&mut self, key: TuneKey, entry: Entry) -> Result<Option<Entry>, TuneError> {
        Ok(self.entries.insert(key, entry.normalised()?))
    }

    /// Writes the file atomically: a temporary file in the same directory (created if missing),
    /// synced, then renamed over the old one. Readers see the old file or the new, never a part.
    pub fn save(&self) -> Result<(), TuneError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut entries = Map::new();
        for (k, e) in &self.entries {
            entries.insert(k.to_string(), e.to_json());
        }
        let v = json!({
            "format": FILE_FORMAT,
            "version": FILE_VERSION,
            "fingerprint": self.fingerprint.to_json(),
            "entries": entries,
        });
        let mut text = serde_json::to_string_pretty(&v)
            .map_err(|e| io_error(&self.path)(io::Error::other(e)))?;
        text.push('\n');
        if text.len() as u64 > MAX_CACHE_FILE_BYTES {
            return Err(TuneError::TooLarge {
                path: self.path.clone(),
                bytes: text.len() as u64,
                limit: MAX_CACHE_FILE_BYTES,
            });
        }
        fs::create_dir_all(dir).map_err(io_error(dir))?;
        let name = self.path.file_name().unwrap_or_default().to_string_lossy();
        let temp = dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()
        })()
        .map_err(io_error(&temp))
        .and_then(|()| fs::rename(&temp, &self.path).map_err(io_error(&self.path)));
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }
}

/// How a key's race is run ([`race`]). `Default`: 3 to 10 samples, drop at 1.5× the leader,
/// 150 ms, no roofline.
#[derive(Clone, Debug, PartialEq)]
pub struct RaceRules {
    /// Samples every candidate gets before any is dropped or the race stops at the roofline.
    pub min_samples: u32,
    /// Samples after which the race ends (at most [`MAX_SAMPLES`]).
    pub max_samples: u32,
    /// A candidate whose median exceeds the leader's by this factor (≥ 1) is dropped.
    pub drop_factor: f64,
    /// Time the race may take, as its clock counts it; a sample is not started when the clock
    /// plus that candidate's last sample (for its first, the fastest sample so far) would pass
    /// it.
    pub key_budget: Duration,
    /// Stop once the leader's median is at most this (the time at [`ROOFLINE_FRACTION`] of
    /// the read roofline); `None`: no such stop.
    pub roofline: Option<Duration>,
}

impl Default for RaceRules {
    fn default() -> Self {
        RaceRules {
            min_samples: 3,
            max_samples: 10,
            drop_factor: 1.5,
            key_budget: Budget::PER_KEY,
            roofline: None,
        }
    }
}

impl RaceRules {
    /// These rules with a stop at [`ROOFLINE_FRACTION`] of the roofline whose time (reading
    /// the key's bytes at the measured read bandwidth) is `at_roofline`.
    pub fn with_roofline(mut self, at_roofline: Option<Duration>) -> RaceRules {
        self.roofline = at_roofline
            .and_then(|t| Duration::try_from_secs_f64(t.as_secs_f64() / ROOFLINE_FRACTION).ok());
        self
    }

    fn check(&self) -> Result<()> {
        let ok = self.min_samples >= 1
            && self.min_samples <= self.max_samples
            && self.max_samples <= MAX_SAMPLES
            && self.drop_factor.is_finite()
            && self.drop_factor >= 1.0;
        if ok {
            Ok(())
        } else {
            Err(GpuError::InvalidOption(format!(
                "race rules {self:?}: need 1 ≤ min_samples ≤ max_samples ≤ {MAX_SAMPLES} and a finite drop_factor ≥ 1"
            ))
            .into())
        }
    }
}

/// The time to read `bytes` at `bytes_per_second` (the measured read roofline); `None` when the
/// bandwidth is not a positive finite number.
pub fn roofline_time(bytes: u64, bytes_per_second: f64) -> Option<Duration> {
    (bytes_per_second.is_finite() && bytes_per_second > 0.0)
        .then(|| Duration::try_from_secs_f64(bytes as f64 / bytes_per_second).ok())
        .flatten()
}

/// Why a race ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stop {
    /// Every live candidate had `max_samples`.
    Complete,
    /// One live candidate was left after `min_samples`.
    Decided,
    /// The leader's median reached the roofline target.
    Roofline,
    /// The key's budget was spent: the result is the best so far.
    Budget,
}

impl Stop {
    /// Whether the race stopped early, at the roofline or the budget.
    pub const fn early(self) -> bool {
        matches!(self, Stop::Roofline | Stop::Budget)
    }
}

/// The outcome of [`race`].
#[derive(Clone, Debug, PartialEq)]
pub struct RaceResult {
    /// The fastest live candidate by median (lowest index on ties); 0 when none was sampled.
    pub winner: usize,
    /// Each candidate's median, where it has samples.
    pub medians: Vec<Option<Duration>>,
    /// Each candidate's number of samples.
    pub samples: Vec<u32>,
    /// Candidates ruled out, with why: a wrong output (for the caller to log), or an error.
    pub disqualified: Vec<(usize, String)>,
    /// Candidates dropped as too slow, in the order they were.
    pub dropped: Vec<usize>,
    /// Why the race ended.
    pub stop: Stop,
    /// The clock when it ended.
    pub elapsed: Duration,
}

impl RaceResult {
    /// The next best candidate after the winner by median, disqualified ones excepted.
    pub fn runner_up(&self) -> Option<(usize, Duration)> {
        let ruled_out = |i| self.disqualified.iter().any(|&(d, _)| d == i);
        best(
            self.medians
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != self.winner && !ruled_out(i))
                .filter_map(|(i, m)| m.map(|m| (i, m))),
        )
    }

    /// The cache entry of this result, `name` naming candidates and `at_roofline` the time at
    /// the full read roofline; `None` when the winner has no sample.
    pub fn entry(
        &self,
        name: &dyn Fn(usize) -> String,
        at_roofline: Option<Duration>,
    ) -> Option<Entry> {
        let median = self.medians.get(self.winner).copied().flatten()?;
        let us = |d: Duration| d.as_nanos() as f64 / 1e3;
        Some(Entry {
            variant: name(self.winner),
            median_us: us(median),
            samples: self.samples[self.winner],
            roofline_frac: at_roofline
                .filter(|_| !median.is_zero())
                .map(|t| t.as_secs_f64() / median.as_secs_f64()),
            runner_up: self.runner_up().map(|(i, m)| (name(i), us(m))),
        })
    }
}

/// The smallest duration, the lowest index on ties.
fn best(items: impl Iterator<Item = (usize, Duration)>) -> Option<(usize, Duration)> {
    items.fold(None, |acc, (i, m)| match acc {
        Some((_, b)) if b <= m => acc,
        _ => Some((i, m)),
    })
}

fn median(samples: &[Duration]) -> Option<Duration> {
    let mut s = samples.to_vec();
    s.sort_unstable();
    let m = s.len() / 2;
    match s.len() {
        0 => None,
        n if n % 2 == 1 => Some(s[m]),
        _ => Some(s[m - 1] + (s[m] - s[m - 1]) / 2),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Live,
    Dropped,
    Disqualified,
}

/// The indices of the live candidates.
fn live(state: &[State]) -> impl Iterator<Item = usize> + '_ {
    (0..state.len()).filter(|&i| state[i] == State::Live)
}

/// Races `n_candidates` kernel variants of one key and returns the fastest; no GPU call of its
/// own, so the policy is tested with fakes.
///
/// * `clock()`: time since the race began (the caller's `Instant::elapsed`, or a fake).
/// * `sample(i)`: one timing of candidate `i` (warm: the caller runs a new pipeline once before
///   timing it). An error from candidate 0, the prior, is the race's error; from another it
///   disqualifies that candidate (e.g. a pipeline the driver refuses).
/// * `check(i)`, `i ≥ 1`: whether candidate `i`'s output equals candidate 0's within the
///   precision mode's bound; called once, before its first sample. `false` or an error
///   disqualifies it, so a miscompiled variant never wins however fast. Candidate 0 is the
///   reference and is never checked.
///
/// Round robin over the live candidates, in index order. After each round from `min_samples`
/// on, candidates whose median exceeds `drop_factor` × the leader's are dropped, and the race
/// ends when the leader reaches `rules.roofline` or one candidate is left; it ends at
/// `max_samples` or when the budget would be passed ([`RaceRules::key_budget`]; best so far).
/// Deterministic: the same samples and clock give the same result. The caller decides what to
/// do with it; with tuning `off` it runs no race and takes candidate 0.
pub fn race(
    n_candidates: usize,
    rules: &RaceRules,
    clock: &mut dyn FnMut() -> Duration,
    sample: &mut dyn FnMut(usize) -> Result<Duration>,
    check: &mut dyn FnMut(usize) -> Result<bool>,
) -> Result<RaceResult> {
    rules.check()?;
    if n_candidates == 0 {
        return Err(GpuError::InvalidOption("a race needs at least one candidate".into()).into());
    }
    let n = n_candidates;
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); n];
    let mut state = vec![State::Live; n];
    let mut checked: Vec<bool> = (0..n).map(|i| i == 0).collect();
    let mut disqualified = Vec::new();
    let mut dropped = Vec::new();
    let mut stop = Stop::Complete;
    let mut fastest: Option<Duration> = None;
    let budget = rules.key_budget;

    'rounds: for round in 1..=rules.max_samples {
        for i in 0..n {
            if state[i] != State::Live {
                continue;
            }
            if !checked[i] {
                if clock() >= budget {
                    stop = Stop::Budget;
                    break 'rounds;
                }
                checked[i] = true;
                let reason = match check(i) {
                    Ok(true) => None,
                    Ok(false) => Some(
                        "output differs from candidate 0's beyond the precision bound".to_owned(),
                    ),
                    Err(e) => Some(format!("check failed: {e}")),
                };
                if let Some(reason) = reason {
                    state[i] = State::Disqualified;
                    disqualified.push((i, reason));
                    continue;
                }
            }
            let estimate = times[i].last().or(fastest.as_ref()).copied();
            let estimate = estimate.unwrap_or_default();
            let now = clock();
            if now >= budget || now.saturating_add(estimate) > budget {
                stop = Stop::Budget;
                break 'rounds;
            }
            match sample(i) {
                Ok(d) => {
                    times[i].push(d);
                    fastest = Some(fastest.map_or(d, |f| f.min(d)));
                }
                Err(e) if i == 0 => return Err(e),
                Err(e) => {
                    state[i] = State::Disqualified;
                    disqualified.push((i, format!("failed to run: {e}")));
                }
            }
        }
        if round < rules.min_samples {
            continue;
        }
        let Some((leader, lead)) =
            best(live(&state).filter_map(|i| median(&times[i]).map(|m| (i, m))))
        else {
            continue;
        };
        for i in live(&state).collect::<Vec<_>>() {
            let slow = median(&times[i])
                .is_some_and(|m| m.as_secs_f64() > lead.as_secs_f64() * rules.drop_factor);
            if i != leader && slow {
                state[i] = State::Dropped;
                dropped.push(i);
            }
        }
        if rules.roofline.is_some_and(|t| lead <= t) {
            stop = Stop::Roofline;
            break;
        }
        if live(&state).count() == 1 && round < rules.max_samples {
            stop = Stop::Decided;
            break;
        }
    }

    let medians: Vec<Option<Duration>> = times.iter().map(|t| median(t)).collect();
    let winner =
        best(live(&state).filter_map(|i| medians[i].map(|m| (i, m)))).map_or(0, |(i, _)| i);
    Ok(RaceResult {
        winner,
        samples: times.iter().map(|t| t.len() as u32).collect(),
        medians,
        disqualified,
        dropped,
        stop,
        elapsed: clock(),
    })
}

/// A model's tuning budget: each key gets the smaller of the per-key budget and what is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    total: Duration,
    per_key: Duration,
    spent: Duration,
}

impl Default for Budget {
    /// [`Budget::PER_MODEL`] and [`Budget::PER_KEY`].
    fn default() -> Self {
        Budget::new(Budget::PER_MODEL, Budget::PER_KEY)
    }
}

impl Budget {
    /// Tuning time per model on first load: 2 s.
    pub const PER_MODEL: Duration = Duration::from_secs(2);
    /// Tuning time per key: 150 ms.
    pub const PER_KEY: Duration = Duration::from_millis(150);

    /// `total` for the model, at most `per_key` for each key.
    pub const fn new(total: Duration, per_key: Duration) -> Budget {
        Budget {
            total,
            per_key,
            spent: Duration::ZERO,
        }
    }

    /// The budget of the next key, `min(per_key, remaining)`; `None` once nothing is left (the
    /// remaining keys then run their prior, and are not stored, so a later load measures them).
    pub fn next_key(&self) -> Option<Duration> {
        let left = self.remaining();
        (!left.is_zero()).then(|| left.min(self.per_key))
    }

    /// Counts `d` as spent (a race's [`RaceResult::elapsed`]).
    pub fn spend(&mut self, d: Duration) {
        self.spent = self.spent.saturating_add(d);
    }

    /// Time spent so far.
    pub const fn spent(&self) -> Duration {
        self.spent
    }

    /// Time left.
    pub fn remaining(&self) -> Duration {
        self.total.saturating_sub(self.spent)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn fingerprint(driver: &str) -> Fingerprint {
        let mut info = wgpu::AdapterInfo::new(wgpu::DeviceType::DiscreteGpu, wgpu::Backend::Vulkan);
        info.name = "Test \"GPU\" ✓".into();
        info.vendor = 0x10de;
        info.device = 0x2335;
        info.driver = driver.into();
        info.driver_info = "570.1".into();
        info.subgroup_min_size = 32;
        info.subgroup_max_size = 32;
        let features = wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SUBGROUP;
        Fingerprint::new(
            &info,
            &wgpu::Limits::default(),
            features,
            candidates_hash(["a", "b"]),
        )
    }

    fn key(k: u64) -> TuneKey {
        TuneKey {
            op: Op::MatVec,
            format: Format::Q4_K,
            k,
            n: 14336,
            columns: 1,
        }
    }

    fn entry(variant: &str, median_us: f64) -> Entry {
        Entry {
            variant: variant.into(),
            median_us,
            samples: 10,
            roofline_frac: Some(0.9412),
            runner_up: Some(("t32 vec4".into(), 24.8)),
        }
    }

    #[test]
    fn modes_parse_display_and_policy() {
        for t in Tuning::ALL {
            assert_eq!(t.name().parse::<Tuning>().unwrap(), t);
            assert_eq!(t.to_string().to_uppercase().parse::<Tuning>().unwrap(), t);
        }
        assert!(
            matches!("auto".parse::<Tuning>(), Err(TuneError::InvalidMode { value }) if value == "auto")
        );
        assert_eq!(Tuning::from_env_value(None).unwrap(), None);
        assert_eq!(Tuning::from_env_value(Some("".into())).unwrap(), None);
        assert_eq!(
            Tuning::from_env_value(Some("Force".into())).unwrap(),
            Some(Tuning::Force)
        );
        let e = Tuning::from_env_value(Some("fast".into())).unwrap_err();
        assert!(e.to_string().contains("GGUF_DEQUANT_TUNE=\"fast\""), "{e}");
        assert_eq!(Tuning::default_for(wgpu::DeviceType::Cpu), Tuning::Off);
        assert_eq!(
            Tuning::default_for(wgpu::DeviceType::IntegratedGpu),
            Tuning::On
        );
        assert!(!Tuning::Off.opens_cache() && Tuning::Force.opens_cache());
        assert!(Tuning::Cache.uses_hits() && !Tuning::Force.uses_hits());
        assert!(
            !Tuning::Cache.measures(false)
                && Tuning::On.measures(false)
                && !Tuning::On.measures(true)
        );
        assert!(Tuning::Force.measures(true) && !Tuning::Off.measures(false));
        assert!(Tuning::On.stores() && Tuning::Force.stores() && !Tuning::Cache.stores());
    }

    #[test]
    fn key_string_round_trip() {
        let k = TuneKey {
            op: Op::MatVecId,
            format: Format::IQ4_XS,
            k: 4096,
            n: 14336,
            columns: 8,
        };
        assert_eq!(k.to_string(), "matvec_id iq4_xs 4096x14336 b8");
        assert_eq!(k.to_string().parse::<TuneKey>().unwrap(), k);
        assert_eq!(key(4096).to_string(), "matvec q4_k 4096x14336 b1");
        assert_eq!(
            "MATVEC Q4_K 4096x14336 b1".parse::<TuneKey>().unwrap(),
            key(4096)
        );
        for bad in [
            "",
            "matvec q4_k 4096x14336",
            "matvec q4_k 4096x14336 b1 x",
            "matvec  q4_k 4096x14336 b1",
            "gemm q4_k 4096x14336 b1",
            "matvec q9_k 4096x14336 b1",
            "matvec q4_k 4096*14336 b1",
            "matvec q4_k +4096x14336 b1",
            "matvec q4_k 04096x14336 b1",
            "matvec q4_k 4096x14336 b0",
            "matvec q4_k 4096x14336 1",
            "matvec q4_k 4096x99999999999999999999 b1",
        ] {
            assert!(
                matches!(bad.parse::<TuneKey>(), Err(TuneError::InvalidKey { .. })),
                "{bad:?}"
            );
        }
        let mut keys = [key(8192), key(4096)];
        keys.sort();
        assert_eq!(keys[0], key(4096));
    }

    #[test]
    fn fingerprint_id_is_stable_and_complete() {
        let a = fingerprint("NVIDIA");
        assert_eq!(a.id(), fingerprint("NVIDIA").id());
        assert_eq!(a.id().len(), 16);
        assert!(a.id().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(a.features, "SUBGROUP | TIMESTAMP_QUERY");
        assert_eq!(
            (a.backend.as_str(), a.device_type.as_str()),
            ("vulkan", "DiscreteGpu")
        );
        assert_eq!(a.crate_version, env!("CARGO_PKG_VERSION"));
        let changes: [fn(&mut Fingerprint); 6] = [
            |f| f.driver_info.push('1'),
            |f| f.subgroup_max_size = 64,
            |f| f.limits.max_storage_buffer_binding_size += 1,
            |f| f.features.clear(),
            |f| f.wgpu = "31".into(),
            |f| f.candidates_hash = candidates_hash(["a", "c"]),
        ];
        for change in changes {
            let mut b = a.clone();
            change(&mut b);
            assert_ne!(a.id(), b.id());
        }
        assert_ne!(candidates_hash(["ab", ""]), candidates_hash(["a", "b"]));
    }

    #[test]
    fn wgpu_version_matches_cargo_toml() {
        let toml =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
        let line = toml.lines().find(|l| l.starts_with("wgpu = ")).unwrap();
        assert!(
            line.contains(&format!("version = \"{WGPU_VERSION}\"")),
            "{line}"
        );
    }

    #[test]
    fn cache_dir_from_env_and_home() {
        let dir = TuneCache::dir_from(Some("/c".into()), Some("/h".into())).unwrap();
        assert_eq!(dir, Path::new("/c/tune/v1"));
        let dir = TuneCache::dir_from(Some("".into()), Some("/h".into())).unwrap();
        assert_eq!(dir, Path::new("/h/.cache/gguf-dequant/tune/v1"));
        assert!(matches!(
            TuneCache::dir_from(None, None),
            Err(TuneError::NoCacheDir)
        ));
    }

    #[test]
    fn cache_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join("tune").join("v1");
        let (mut cache, warning) = TuneCache::open(&dir, fingerprint("NVIDIA"));
        assert_eq!((warning, cache.entries().len()), (None, 0));
        assert_eq!(
            cache.path(),
            dir.join(format!("{}.json", fingerprint("NVIDIA").id()))
        );
        cache
            .insert(key(4096), entry("rows4 t128", 21.377))
            .unwrap();
        let mut plain = entry("t1", 1234.5);
        (plain.roofline_frac, plain.runner_up) = (None, None);
        cache.insert(key(8192), plain).unwrap();
        // Rounded on insert, so that what is kept is what reads back.
        cache.insert(key(1), entry("t2", 0.1 + 0.2)).unwrap();
        assert_eq!(cache.get(&key(1)).unwrap().median_us, 0.3);
        assert!(cache.insert(key(2), entry("t2", f64::NAN)).is_err());
        assert!(cache.insert(key(2), entry("", 1.0)).is_err());
        cache.save().unwrap();
        cache.save().unwrap();
        let text = std::fs::read_to_string(cache.path()).unwrap();
        assert!(text.contains("\"driver\": \"NVIDIA\""), "{text}");
        assert!(text.contains("\"matvec q4_k 4096x14336 b1\": {"), "{text}");
        let (again, warning) = TuneCache::open(&dir, fingerprint("NVIDIA"));
        assert_eq!(warning, None);
        assert_eq!(again.entries(), cache.entries());
        // No temporary files left behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    }

    #[test]
    fn fingerprint_mismatch_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let (mut a, _) = TuneCache::open(dir.path(), fingerprint("A"));
        a.insert(key(4096), entry("x", 1.0)).unwrap();
        a.save().unwrap();
        // Another fingerprint's file under this fingerprint's name (a collision or a copy).
        let b = fingerprint("B");
        std::fs::copy(a.path(), dir.path().join(format!("{}.json", b.id()))).unwrap();
        let (cache, warning) = TuneCache::open(dir.path(), b);
        assert_eq!((warning, cache.entries().len()), (None, 0));
    }

    #[test]
    fn corrupt_file_warns_and_is_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let fp = fingerprint("NVIDIA");
        let path = dir.path().join(format!("{}.json", fp.id()));
        let (mut good, _) = TuneCache::open(dir.path(), fp.clone());
        good.insert(key(4096), entry("x", 1.0)).unwrap();
        good.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let corrupt = [
            "{ not json".to_owned(),
            text.replace("\"samples\": 10", "\"samples\": -1"),
            text.replace("\"median_us\": 1.0", "\"median_us\": \"fast\""),
            text.replace("\"variant\": \"x\"", "\"variant\": \"x\", \"extra\": 1"),
            text.replace("4096x14336 b1", "4096x14336  b1"),
            text.replace("\"version\": 1", "\"version\": 2"),
            text.replace("\"entries\": {", "\"entries\": [")
                .replace("}\n  }\n}", "}\n  ]\n}"),
        ];
        for bad in corrupt {
            std::fs::write(&path, &bad).unwrap();
            let (mut cache, warning) = TuneCache::open(dir.path(), fp.clone());
            let warning = warning.unwrap_or_else(|| panic!("no warning for {bad}"));
            assert!(
                warning.contains(&path.display().to_string()) && !warning.contains('\n'),
                "{warning}"
            );
            assert!(cache.entries().is_empty());
            cache.insert(key(8), entry("y", 2.0)).unwrap();
            cache.save().unwrap();
            let (cache, warning) = TuneCache::open(dir.path(), fp.clone());
            assert_eq!(warning, None);
            assert_eq!(cache.get(&key(8)), Some(&entry("y", 2.0)));
        }
    }

    #[test]
    fn oversized_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fp = fingerprint("NVIDIA");
        let path = dir.path().join(format!("{}.json", fp.id()));
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(MAX_CACHE_FILE_BYTES + 1).unwrap();
        let (cache, warning) = TuneCache::open(dir.path(), fp);
        assert!(warning.unwrap().contains("over the limit"));
        assert!(cache.entries().is_empty());
    }

    /// A fake clock that each sample advances by its duration.
    struct Fake {
        now: Cell<Duration>,
    }

    fn run(
        times: &[u64],
        wrong: &[usize],
        rules: &RaceRules,
        calls: &mut Vec<usize>,
    ) -> Result<RaceResult> {
        let fake = Fake {
            now: Cell::new(Duration::ZERO),
        };
        let mut clock = || fake.now.get();
        let mut sample = |i: usize| {
            calls.push(i);
            let d = Duration::from_micros(times[i]);
            fake.now.set(fake.now.get() + d);
            Ok(d)
        };
        let mut check = |i: usize| Ok(!wrong.contains(&i));
        race(times.len(), rules, &mut clock, &mut sample, &mut check)
    }

    #[test]
    fn race_picks_the_fastest() {
        let r = run(&[100, 80, 60, 70], &[], &RaceRules::default(), &mut vec![]).unwrap();
        assert_eq!(r.winner, 2);
        assert_eq!(r.medians[2], Some(Duration::from_micros(60)));
        assert_eq!(r.runner_up(), Some((3, Duration::from_micros(70))));
        assert_eq!(r.stop, Stop::Complete);
        assert_eq!(
            (r.samples.clone(), r.dropped.clone()),
            (vec![3, 10, 10, 10], vec![0])
        );
        let e = r
            .entry(&|i| format!("v{i}"), Some(Duration::from_micros(54)))
            .unwrap();
        assert_eq!(
            (e.variant.as_str(), e.median_us, e.samples),
            ("v2", 60.0, 10)
        );
        assert_eq!(e.runner_up, Some(("v3".into(), 70.0)));
        assert!((e.roofline_frac.unwrap() - 0.9).abs() < 1e-12);
    }

    #[test]
    fn race_rejects_a_wrong_candidate_however_fast() {
        let r = run(&[100, 10, 60], &[1], &RaceRules::default(), &mut vec![]).unwrap();
        assert_eq!(r.winner, 2);
        assert_eq!(r.samples[1], 0);
        assert_eq!(r.disqualified.len(), 1);
        assert_eq!(r.disqualified[0].0, 1);
        assert!(r.disqualified[0].1.contains("differs"));
        assert!(r.runner_up().is_some_and(|(i, _)| i == 0));
    }

    #[test]
    fn race_errors_of_the_reference_and_of_the_others() {
        let mut clock = || Duration::ZERO;
        let fail = |i: usize| -> Result<Duration> {
            if i == 1 {
                Err(GpuError::Internal {
                    what: "creating a pipeline".into(),
                    message: "driver refused".into(),
                }
                .into())
            } else {
                Ok(Duration::from_micros(10 + i as u64))
            }
        };
        let r = race(
            3,
            &RaceRules::default(),
            &mut clock,
            &mut { fail },
            &mut |_| Ok(true),
        )
        .unwrap();
        assert_eq!(r.winner, 0);
        assert_eq!(r.disqualified[0].0, 1);
        assert!(r.disqualified[0].1.contains("driver refused"));
        let e = race(
            3,
            &RaceRules::default(),
            &mut clock,
            &mut |i| {
                if i == 0 {
                    Err(GpuError::Timeout(Duration::from_secs(1)).into())
                } else {
                    Ok(Duration::from_micros(1))
                }
            },
            &mut |_| Ok(true),
        );
        assert!(matches!(e, Err(Error::Gpu(GpuError::Timeout(_)))));
        // A check that errors disqualifies; candidate 0 is never checked.
        let mut checked = vec![];
        let r = race(
            2,
            &RaceRules::default(),
            &mut clock,
            &mut |_| Ok(Duration::from_micros(1)),
            &mut |i| {
                checked.push(i);
                Err(GpuError::Map("lost".into()).into())
            },
        )
        .unwrap();
        assert_eq!((checked, r.winner, r.disqualified.len()), (vec![1], 0, 1));
        let bad = RaceRules {
            min_samples: 4,
            max_samples: 3,
            ..RaceRules::default()
        };
        assert!(run(&[1], &[], &bad, &mut vec![]).is_err());
        assert!(run(&[], &[], &RaceRules::default(), &mut vec![]).is_err());
    }

    #[test]
    fn race_drops_a_slow_candidate_after_min_samples() {
        let mut calls = vec![];
        let r = run(&[100, 160, 90], &[], &RaceRules::default(), &mut calls).unwrap();
        assert_eq!(r.winner, 2);
        assert_eq!(r.dropped, [1]);
        assert_eq!(r.samples, [10, 3, 10]);
        assert_eq!(&calls[..9], [0, 1, 2, 0, 1, 2, 0, 1, 2]);
        assert!(!calls[9..].contains(&1));
    }

    #[test]
    fn race_is_decided_when_one_candidate_is_left() {
        let r = run(&[100, 400], &[], &RaceRules::default(), &mut vec![]).unwrap();
        assert_eq!(
            (r.winner, r.stop, r.samples.clone()),
            (0, Stop::Decided, vec![3, 3])
        );
        assert!(!r.stop.early());
    }

    #[test]
    fn race_honours_the_budget_with_a_fake_clock() {
        let rules = RaceRules {
            key_budget: Duration::from_millis(150),
            ..RaceRules::default()
        };
        // 30 ms a round: five rounds fit in 150 ms, a sixth would not.
        let r = run(&[12_000, 10_000, 8_000], &[], &rules, &mut vec![]).unwrap();
        assert_eq!(r.stop, Stop::Budget);
        assert!(r.stop.early());
        assert!(r.elapsed <= rules.key_budget, "{:?}", r.elapsed);
        assert_eq!(r.samples, [5, 5, 5]);
        assert_eq!(r.winner, 2);
        // A budget spent before the first round ends returns the best so far.
        let tight = RaceRules {
            key_budget: Duration::from_millis(20),
            ..RaceRules::default()
        };
        let r = run(&[12_000, 10_000, 5_000], &[], &tight, &mut vec![]).unwrap();
        assert_eq!(
            (r.stop, r.samples.clone(), r.winner),
            (Stop::Budget, vec![1, 0, 0], 0)
        );
        let none = RaceRules {
            key_budget: Duration::ZERO,
            ..RaceRules::default()
        };
        let r = run(&[1, 1], &[], &none, &mut vec![]).unwrap();
        assert_eq!((r.winner, r.medians.clone()), (0, vec![None, None]));
        assert!(r.entry(&|i| i.to_string(), None).is_none());
    }

    #[test]
    fn race_stops_at_the_roofline() {
        let at_roofline = roofline_time(1_000_000, 20e9); // 50 µs
        assert_eq!(at_roofline, Some(Duration::from_micros(50)));
        let rules = RaceRules::default().with_roofline(at_roofline);
        let target = rules.roofline.unwrap().as_secs_f64();
        assert!((target - 50e-6 / 0.9).abs() < 1e-9);
        let r = run(&[100, 55, 70], &[], &rules, &mut vec![]).unwrap();
        assert_eq!(
            (r.stop, r.winner, r.samples.clone()),
            (Stop::Roofline, 1, vec![3, 3, 3])
        );
        let r = run(&[100, 60, 70], &[], &rules, &mut vec![]).unwrap();
        assert_eq!(r.stop, Stop::Complete);
        assert_eq!(roofline_time(1, 0.0), None);
        assert_eq!(RaceRules::default().with_roofline(None).roofline, None);
    }

    #[test]
    fn race_is_reproducible_and_ties_go_to_the_lowest_index() {
        let times = [90, 70, 70, 80];
        let a = run(&times, &[], &RaceRules::default(), &mut vec![]).unwrap();
        let b = run(&times, &[], &RaceRules::default(), &mut vec![]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.winner, 1);
        assert_eq!(a.runner_up(), Some((2, Duration::from_micros(70))));
        // Noisy samples: the median decides, the same way each time.
        let noisy = |seed: u64| {
            let mut n = 0u64;
            let mut clock = || Duration::ZERO;
            let mut sample = |i: usize| {
                n = n.wrapping_mul(6364136223846793005).wrapping_add(seed);
                Ok(Duration::from_micros(50 + i as u64 * 3 + (n >> 60)))
            };
            race(
                4,
                &RaceRules::default(),
                &mut clock,
                &mut sample,
                &mut |_| Ok(true),
            )
            .unwrap()
        };
        assert_eq!(noisy(7), noisy(7));
    }

    #[test]
    fn budget_hands_each_key_the_smaller_of_its_share_and_the_rest() {
        let mut b = Budget::default();
        assert_eq!(b.next_key(), Some(Duration::from_millis(150)));
        for _ in 0..13 {
            b.spend(Duration::from_millis(150));
        }
        assert_eq!(b.next_key(), Some(Duration::from_millis(50)));
        b.spend(Duration::from_millis(50));
        assert_eq!(
            (b.next_key(), b.remaining(), b.spent()),
            (None, Duration::ZERO, Budget::PER_MODEL)
        );
        b.spend(Duration::MAX);
        assert_eq!(b.next_key(), None);
    }
}
