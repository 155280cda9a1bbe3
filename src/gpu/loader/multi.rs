//! One model over several GPU devices in one process: a [`Placement`] says which device holds
//! which tensors, and each device's share loads through that device's [`WeightLoader`], all
//! devices at once (one thread each).
//!
//! ```no_run
//! use gguf_dequant::gpu::loader::{LoadOptions, MultiLoader, Placement, Residency};
//! use gguf_dequant::{Backend, GgufFile, Selection};
//! # fn main() -> gguf_dequant::Result<()> {
//! let multi = MultiLoader::all(Backend::All, LoadOptions::default())?; // every compute adapter
//! let file = GgufFile::open("model.gguf")?;
//! // Equal shares of the layers; `Placement::proportions([3.0, 1.0])` or
//! // `Placement::budgets([8 << 30, 4 << 30])` for two devices.
//! let placement = Placement::even(multi.len());
//! let model = multi.load(&file, &Selection::All, Residency::Raw, &placement)?;
//! let (device, w) = model.get("blk.0.attn_q.weight").expect("selected");
//! // Kernels, `record` and `read_back` go through the loader of the device that holds the tensor.
//! let loader = model.loader(device).expect("a device of the model");
//! let y = loader.engine().matvec(w, &vec![1.0; w.dims[0] as usize], 1)?;
//! println!("{} values from {}", y.len(), loader.adapter_info().name);
//! for d in &model.report().devices {
//!     println!("{}: layers {:?}, {} tensors, {} bytes", d.adapter.name, d.layers, d.tensors,
//!         d.bytes_resident);
//! }
//! # Ok(()) }
//! ```
//!
//! A load that fails on any device fails as a whole, with that device's error (the first in
//! device order when several fail): the shares the other devices loaded are dropped, so every
//! loader's [`WeightLoader::stats`] is back where it was and every loader takes the next load. A
//! lost device's loader needs [`MultiLoader::recover`] first.

use std::sync::Arc;
use std::time::Instant;

use super::placement::{Placement, Role};
use super::{LoadOptions, LoadReport, Residency, ResidentModel, ResidentTensor, WeightLoader};
use crate::gpu::{compute_adapters, EngineOptions, GpuEngine, GpuError};
use crate::{Backend, Error, GgufFile, Result, Selection};

/// Loads one model over several devices, device `d` being the `d`-th loader. `Send + Sync`.
#[derive(Clone, Debug)]
pub struct MultiLoader {
    loaders: Vec<WeightLoader>,
}

impl MultiLoader {
    /// Over `loaders`, device `d` being `loaders[d]`; none is [`Error::Placement`].
    pub fn new(loaders: Vec<WeightLoader>) -> Result<MultiLoader> {
        if loaders.is_empty() {
            return Err(Error::Placement {
                reason: "a multi-device loader needs at least one device".into(),
            });
        }
        Ok(MultiLoader { loaders })
    }

    /// A loader per adapter (new devices, engines with `engine` options, loads with `options`),
    /// in the order given.
    pub fn from_adapters(
        adapters: &[wgpu::Adapter],
        engine: EngineOptions,
        options: LoadOptions,
    ) -> Result<MultiLoader> {
        let loaders = adapters
            .iter()
            .map(|a| {
                let e = GpuEngine::from_adapter(a, engine.clone())?;
                Ok(WeightLoader::with_engine(Arc::new(e), options.clone()))
            })
            .collect::<Result<Vec<_>>>()?;
        MultiLoader::new(loaders)
    }

    /// A loader on every compute adapter of `backend`, in the order of [`compute_adapters`]
    /// (best first; `gguf-dequant adapters` prints that index for [`Backend::All`]).
    pub fn all(backend: Backend, options: LoadOptions) -> Result<MultiLoader> {
        MultiLoader::from_adapters(
            &compute_adapters(backend)?,
            EngineOptions::default(),
            options,
        )
    }

    /// The loaders, in device order.
    pub fn loaders(&self) -> &[WeightLoader] {
        &self.loaders
    }

    /// The number of devices.
    pub fn len(&self) -> usize {
        self.loaders.len()
    }

    /// Never true: a multi-device loader has at least one device.
    pub fn is_empty(&self) -> bool {
        self.loaders.is_empty()
    }

    /// Replaces the loader of every lost device by [`WeightLoader::recover`]'s (a fresh device
    /// of the same adapter) and returns their device indices. Models loaded before keep the
    /// old loaders; drop them.
    pub fn recover(&mut self) -> Result<Vec<usize>> {
        let mut recovered = Vec::new();
        for (d, loader) in self.loaders.iter_mut().enumerate() {
            if loader.is_lost() {
                *loader = loader.recover()?;
                recovered.push(d);
            }
        }
        Ok(recovered)
    }

    /// [`MultiLoader::load_with`] with each loader's own options.
    pub fn load(
        &self,
        file: &GgufFile,
        selection: &Selection,
        residency: Residency,
        placement: &Placement,
    ) -> Result<MultiModel> {
        let options: Vec<LoadOptions> = self.loaders.iter().map(|l| l.options().clone()).collect();
        self.load_with(file, selection, residency, placement, &options)
    }

    /// Makes the selected tensors of `file` resident, each on the device `placement` assigns it
    /// ([`Placement::assign`]), device `d` loading its share with `options[d]`; the devices load
    /// at the same time, one thread each.
    ///
    /// Errors, with nothing left allocated or registered on any device: those of
    /// [`Placement::assign`] ([`Error::OverBudget`] included), before any device is touched;
    /// [`Error::Placement`] when the placement or `options` does not have one entry per device;
    /// [`GpuError::DeviceLost`] up front when a loader's device is lost; otherwise the first
    /// error of a device's [`WeightLoader::load_with`], in device order.
    pub fn load_with(
        &self,
        file: &GgufFile,
        selection: &Selection,
        residency: Residency,
        placement: &Placement,
        options: &[LoadOptions],
    ) -> Result<MultiModel> {
        let start = Instant::now();
        let n = self.loaders.len();
        for (what, len) in [
            ("placement", placement.devices()),
            ("options", options.len()),
        ] {
            if len != n {
                return Err(Error::Placement {
                    reason: format!("the {what} has {len} entries for {n} devices"),
                });
            }
        }
        let shares = placement.assign(file, selection, residency)?;
        if let Some((d, l)) = self.loaders.iter().enumerate().find(|(_, l)| l.is_lost()) {
            return Err(GpuError::DeviceLost(format!(
                "device {d} ({}) was lost: recover it (MultiLoader::recover) and load again",
                l.adapter_info().name
            ))
            .into());
        }
        let all = file.tensors();
        let results: Vec<Option<Result<ResidentModel>>> = std::thread::scope(|s| {
            let threads: Vec<_> = shares
                .iter()
                .zip(&self.loaders)
                .zip(options)
                .map(|((share, loader), opts)| {
                    if share.is_empty() {
                        return None;
                    }
                    let names =
                        Selection::Names(share.iter().map(|&i| all[i].name.clone()).collect());
                    Some(s.spawn(move || loader.load_with(file, &names, residency, opts)))
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))))
                .collect()
        });
        let mut models = Vec::with_capacity(n);
        let mut failure = None;
        for r in results {
            match r {
                Some(Err(e)) => {
                    failure.get_or_insert(e);
                }
                Some(Ok(m)) => models.push(Some(m)),
                None => models.push(None),
            }
        }
        if let Some(e) = failure {
            // The shares that did load are freed before the error is returned.
            drop(models);
            return Err(e);
        }
        let devices = models
            .iter()
            .zip(&self.loaders)
            .enumerate()
            .map(|(d, (m, l))| DeviceReport::new(d, l, m.as_ref()))
            .collect::<Vec<_>>();
        // A sum over the devices that loaded anything.
        let loads = |field: fn(&LoadReport) -> u64| -> u64 {
            devices
                .iter()
                .filter_map(|d| d.load.as_ref())
                .map(field)
                .sum()
        };
        let report = MultiReport {
            tensors: devices.iter().map(|d| d.tensors).sum(),
            bytes_read: loads(|r| r.bytes_read),
            bytes_resident: devices.iter().map(|d| d.bytes_resident).sum(),
            staging_bytes: loads(|r| r.staging_bytes),
            seconds: start.elapsed().as_secs_f64(),
            devices,
        };
        Ok(MultiModel {
            loaders: self.loaders.clone(),
            models,
            report,
        })
    }
}

/// One model resident over several devices: per device, its loader and its share. Each tensor
/// is resident on exactly one device. Dropping it releases the buffers of every device.
#[derive(Debug)]
pub struct MultiModel {
    loaders: Vec<WeightLoader>,
    models: Vec<Option<ResidentModel>>,
    report: MultiReport,
}

impl MultiModel {
    /// The number of devices (those without tensors included).
    pub fn devices(&self) -> usize {
        self.models.len()
    }

    /// The loader of `device`: the one to run [`WeightLoader::read_back`],
    /// [`WeightLoader::record_tensor`] and the kernels of [`WeightLoader::engine`] with, on the
    /// tensors of that device.
    pub fn loader(&self, device: usize) -> Option<&WeightLoader> {
        self.loaders.get(device)
    }

    /// The share of `device`; `None` when the placement gave it no tensors.
    pub fn model(&self, device: usize) -> Option<&ResidentModel> {
        self.models.get(device)?.as_ref()
    }

    /// The tensor named `name`, and the device that holds it.
    pub fn get(&self, name: &str) -> Option<(usize, &ResidentTensor)> {
        self.models
            .iter()
            .enumerate()
            .find_map(|(d, m)| Some((d, m.as_ref()?.get(name)?)))
    }

    /// Every tensor with its device, in device order, each device's in file order.
    pub fn tensors(&self) -> impl Iterator<Item = (usize, &ResidentTensor)> {
        self.models
            .iter()
            .enumerate()
            .filter_map(|(d, m)| Some((d, m.as_ref()?)))
            .flat_map(|(d, m)| m.tensors().iter().map(move |t| (d, t)))
    }

    /// Figures of the load, per device and in all.
    pub fn report(&self) -> &MultiReport {
        &self.report
    }
}

/// Figures of a load over several devices.
#[derive(Clone, Debug, PartialEq)]
pub struct MultiReport {
    /// Per device, in device order.
    pub devices: Vec<DeviceReport>,
    /// Tensors loaded, all devices together.
    pub tensors: usize,
    /// Bytes of tensor data read from the file.
    pub bytes_read: u64,
    /// Bytes of data resident, all devices together (padding not counted).
    pub bytes_resident: u64,
    /// Staging bytes the devices used, together.
    pub staging_bytes: u64,
    /// Wall-clock seconds of the whole load: placement, then the devices at the same time.
    pub seconds: f64,
}

impl MultiReport {
    /// `bytes_read / seconds`, in GB/s (10⁹ bytes): all devices together.
    pub fn gb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes_read as f64 / self.seconds / 1e9
        } else {
            0.0
        }
    }
}

/// One device's part of a [`MultiReport`].
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceReport {
    /// The device's index in the [`MultiLoader`].
    pub device: usize,
    /// Its adapter (name, backend, device type, driver), as wgpu reports it.
    pub adapter: wgpu::AdapterInfo,
    /// Tensors resident there.
    pub tensors: usize,
    /// The layers (`N` of `blk.N.*`) resident there, in order.
    pub layers: Vec<u64>,
    /// Bytes of data resident there (padding not counted).
    pub bytes_resident: u64,
    /// The device's own load; `None` when it got no tensors.
    pub load: Option<LoadReport>,
}

impl DeviceReport {
    fn new(device: usize, loader: &WeightLoader, model: Option<&ResidentModel>) -> DeviceReport {
        let mut layers: Vec<u64> = model
            .into_iter()
            .flat_map(|m| m.tensors())
            .filter_map(|t| match Role::of(&t.name) {
                Role::Layer(l) => Some(l),
                _ => None,
            })
            .collect();
        layers.sort_unstable();
        layers.dedup();
        let load = model.map(|m| m.report().clone());
        DeviceReport {
            device,
            adapter: loader.adapter_info().clone(),
            tensors: load.as_ref().map_or(0, |r| r.tensors),
            layers,
            bytes_resident: load.as_ref().map_or(0, |r| r.bytes_resident),
            load,
        }
    }
}
