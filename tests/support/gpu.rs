//! GPU tests: [`gpu_test!`](crate::gpu_test) runs a test body once on every compute adapter of a
//! backend, on an engine made for it here, and owns the policy for a missing adapter: a failure
//! under `CI=true` (or `CI=1`), else a loud `SKIPPED` line. This module is the only place the
//! tests enumerate adapters or create engines: when the library's GPU API changes, only this file
//! does.
//!
//! Validation: every `gpu_test!` installs [`validation::init`] (a `log` logger that prints the
//! Warn-and-above records of wgpu, wgpu-core and wgpu-hal) before it creates an instance, and after
//! each body, and again once the adapters (and so the instance) are dropped, asserts that neither
//! the Vulkan validation layer nor the GL debug output reported an error
//! ([`validation::take_errors`]): wgpu-hal's `VALIDATION_CANARY` (dev-dependency feature
//! `validation_canary`) and the logger's Error-level validation records. Both are process-wide,
//! so a report made while tests run side by side fails whichever test checks first; the logger's
//! record names the thread, that is the test, that caused it. `scripts/test.sh` runs the binary's
//! Vulkan tests once more on lavapipe under the Khronos layer (elsewhere `WGPU_VALIDATION=0`
//! keeps the layer out); `tests/gpu/validation.rs` proves that stage's checks are live.
//!
//! Library API used: [`gguf_dequant::gpu::compute_adapters`] (every compute adapter),
//! [`GpuEngine::from_adapter`] (an engine per adapter), [`GpuEngine::with_options`] (for
//! [`engine`]), [`GpuEngine::adapter_info`], [`GpuEngine::limits`],
//! [`GpuEngine::max_binding_size`] and [`GpuEngine::offset_alignment`].

use std::sync::RwLock;

pub mod validation;

pub use gguf_dequant::gpu::{EngineOptions, GpuEngine};
pub use gguf_dequant::Backend;
pub use wgpu::Adapter;

/// Registers a GPU test: one `#[test]` per backend the software adapters cover (`<name>::vulkan`
/// and `<name>::gl`), each running `body` once for every compute adapter of that backend that wgpu
/// finds (lavapipe and SwiftShader on Vulkan, llvmpipe on GL, in CI), with the adapter printed
/// first. With no adapter of the backend the test fails under `CI=true` and otherwise prints
/// `SKIPPED` and passes. A validation error reported during a body fails it.
///
/// `body` is a plain function (so rustfmt formats it) taking one of:
/// * `&GpuEngine`: an engine on a new device of the adapter (`GpuEngine::from_adapter`: the
///   adapter's own limits, as `GpuEngine::new` makes them; `recreate` works on it);
/// * `GpuEngine`: the same, owned (e.g. for `WeightLoader::with_engine`);
/// * `&Adapter`: the adapter itself, for tests that create their own devices.
///
/// Optional `key = value` settings after the body, each a [`GpuTest`] method:
/// * `options = EngineOptions { .. }`: the engine's options (default `EngineOptions::default()`);
/// * `options_for = f`: the options as a function of the adapter (`fn(&Adapter) -> EngineOptions`,
///   e.g. a forced binding limit that one step of windows at the adapter's offset alignment fits);
/// * `exclusive = true`: no other `gpu_test!` test of this binary runs at the same time (for
///   process-wide measurements such as peak RSS; plain `#[test]`s are not held back).
///
/// Attributes before the name (`#[ignore = "..."]`, `#[cfg(...)]`) go on every generated test.
///
/// ```ignore
/// fn decodes(engine: &GpuEngine) { /* ... */ }
/// gpu_test!(decodes_like_the_cpu, decodes);
/// gpu_test!(small_windows, decodes, options = EngineOptions { max_binding_size: Some(1 << 16), ..EngineOptions::default() });
/// ```
#[macro_export]
macro_rules! gpu_test {
    ($(#[$meta:meta])* $name:ident, $body:ident $(, $key:ident = $value:expr)* $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(#[$meta])*
            #[test]
            fn vulkan() {
                $crate::support::gpu::GpuTest::new(
                    $crate::support::gpu::Backend::Vulkan,
                    concat!(module_path!(), "::vulkan"),
                )
                $(.$key($value))*
                .run($body);
            }

            $(#[$meta])*
            #[test]
            fn gl() {
                $crate::support::gpu::GpuTest::new(
                    $crate::support::gpu::Backend::Gl,
                    concat!(module_path!(), "::gl"),
                )
                $(.$key($value))*
                .run($body);
            }
        }
    };
}

/// Held shared by every `gpu_test!` run, exclusively by an `exclusive` one.
static GPU: RwLock<()> = RwLock::new(());

/// One GPU test on one backend: what [`gpu_test!`](crate::gpu_test) expands to.
pub struct GpuTest {
    backend: Backend,
    test: &'static str,
    options: EngineOptions,
    options_for: Option<fn(&Adapter) -> EngineOptions>,
    exclusive: bool,
}

impl GpuTest {
    /// `test` is the full test path; the binary's name is dropped from it in messages.
    pub fn new(backend: Backend, test: &'static str) -> GpuTest {
        GpuTest {
            backend,
            test: test.split_once("::").map_or(test, |(_, rest)| rest),
            options: EngineOptions::default(),
            options_for: None,
            exclusive: false,
        }
    }

    /// The options of the engines the body gets.
    pub fn options(mut self, options: EngineOptions) -> GpuTest {
        self.options = options;
        self
    }

    /// The options of the engines the body gets, per adapter (replaces [`GpuTest::options`]).
    pub fn options_for(mut self, options: fn(&Adapter) -> EngineOptions) -> GpuTest {
        self.options_for = Some(options);
        self
    }

    /// Whether the body runs with no other `gpu_test!` test of the binary running.
    pub fn exclusive(mut self, exclusive: bool) -> GpuTest {
        self.exclusive = exclusive;
        self
    }

    /// Runs `body` on every compute adapter of the backend, then checks that no validation
    /// error was reported (after each body, and after the instance is dropped).
    pub fn run<M>(self, body: impl Body<M>) {
        validation::init();
        // A panicking test poisons the lock; the others still run.
        let _shared;
        let _exclusive;
        if self.exclusive {
            _exclusive = GPU.write().unwrap_or_else(|p| p.into_inner());
        } else {
            _shared = GPU.read().unwrap_or_else(|p| p.into_inner());
        }
        // Whatever is left from an earlier test (a plain `#[test]` outside `gpu_test!`) is
        // that test's, but still a failure: the run must not pass with it.
        validation::assert_none(self.test, "before the test (left by another test)");
        let adapters = self.adapters();
        for adapter in &adapters {
            let info = adapter.get_info();
            eprintln!(
                "[{}] adapter `{}` ({:?}, {:?}, driver `{}` {})",
                self.test, info.name, info.backend, info.device_type, info.driver, info.driver_info
            );
            // Prints what was reported when the body panics; a clean body is checked below.
            let guard = validation::PrintOnPanic(self.test);
            body.call(&self, adapter);
            drop(guard);
            validation::assert_none(
                self.test,
                &format!("on `{}` ({:?})", info.name, info.backend),
            );
        }
        drop(adapters);
        validation::assert_none(self.test, "when the instance was dropped");
    }

    /// The compute adapters of the backend, best first; none is a failure under CI, else a loud
    /// skip.
    fn adapters(&self) -> Vec<Adapter> {
        let all = gguf_dequant::gpu::compute_adapters(Backend::All);
        let seen = match &all {
            Ok(a) => a
                .iter()
                .map(|a| {
                    let info = a.get_info();
                    format!("{} ({:?})", info.name, info.backend)
                })
                .collect::<Vec<_>>()
                .join(", "),
            Err(e) => e.to_string(),
        };
        let want = self.backend.wgpu_backends();
        let found: Vec<Adapter> = all
            .unwrap_or_default()
            .into_iter()
            .filter(|a| want.contains(a.get_info().backend.into()))
            .collect();
        if found.is_empty() {
            let what = format!(
                "no {} compute adapter (seen: {seen}); install mesa-vulkan-drivers, libegl1, libgl1-mesa-dri",
                self.backend
            );
            if super::is_ci() {
                panic!(
                    "[{}] {what} (CI=true: a missing adapter is an error)",
                    self.test
                );
            }
            eprintln!("\n*** SKIPPED [{}]: {what} ***\n", self.test);
        }
        found
    }

    /// The engine the body gets on `adapter`.
    fn engine(&self, adapter: &Adapter) -> GpuEngine {
        let options = self
            .options_for
            .map_or_else(|| self.options.clone(), |f| f(adapter));
        let engine = GpuEngine::from_adapter(adapter, options)
            .unwrap_or_else(|e| panic!("[{}] {e}", self.test));
        eprintln!(
            "[{}] storage binding {} B, offset alignment {} B, buffer {} B",
            self.test,
            engine.max_binding_size(),
            engine.offset_alignment(),
            engine.limits().max_buffer_size
        );
        engine
    }
}

/// Selects what a [`gpu_test!`](crate::gpu_test) body takes.
pub mod marker {
    /// The body takes `&GpuEngine`.
    pub struct Engine;
    /// The body takes `GpuEngine`.
    pub struct Owned;
    /// The body takes `&Adapter`.
    pub struct OnAdapter;
}

/// A [`gpu_test!`](crate::gpu_test) body: a function of `&GpuEngine`, `GpuEngine` or `&Adapter`
/// (`M` is a marker type that inference picks).
pub trait Body<M> {
    fn call(&self, test: &GpuTest, adapter: &Adapter);
}

impl<F: Fn(&GpuEngine)> Body<marker::Engine> for F {
    fn call(&self, test: &GpuTest, adapter: &Adapter) {
        self(&test.engine(adapter));
    }
}

impl<F: Fn(GpuEngine)> Body<marker::Owned> for F {
    fn call(&self, test: &GpuTest, adapter: &Adapter) {
        self(test.engine(adapter));
    }
}

impl<F: Fn(&Adapter)> Body<marker::OnAdapter> for F {
    fn call(&self, _: &GpuTest, adapter: &Adapter) {
        self(adapter);
    }
}

/// The best engine of `backend`, or `None` after
/// a loud SKIPPED line; under `CI=true` a missing adapter fails the test instead. For tests of the
/// backend selection itself; other tests use [`gpu_test!`](crate::gpu_test).
pub fn engine(backend: Backend, test: &str, options: EngineOptions) -> Option<GpuEngine> {
    validation::init();
    match GpuEngine::with_options(backend, options) {
        Ok(e) => {
            eprintln!("[{test}] {backend}: {}", label(&e));
            Some(e)
        }
        Err(err) => {
            if super::is_ci() {
                panic!("[{test}] {backend}: no adapter and CI=true: {err}");
            }
            eprintln!("\n*** SKIPPED [{test}] on {backend}: no adapter: {err} ***\n");
            None
        }
    }
}

/// The engine's adapter and backend, for messages: `llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan)`.
pub fn label(engine: &GpuEngine) -> String {
    let info = engine.adapter_info();
    format!("{} ({:?})", info.name, info.backend)
}

/// Every compute adapter wgpu finds on any backend, best first (empty when there is none), with
/// the logger installed first: for tests about the adapters themselves.
pub fn all_adapters() -> Vec<Adapter> {
    validation::init();
    gguf_dequant::gpu::compute_adapters(Backend::All).unwrap_or_default()
}

/// For the tests of one model over several devices: runs `body` once with an engine on every
/// compute adapter of every backend (`compute_adapters(Backend::All)`, best first: in CI lavapipe,
/// SwiftShader and llvmpipe GL, in one process), holding the shared lock of `gpu_test!` and
/// checking for validation errors after it as `gpu_test!` does. Fewer than 3 adapters fails
/// under `CI=true`; elsewhere fewer than 2 prints `SKIPPED` and does not run `body`.
pub fn on_every_adapter(test: &'static str, body: impl FnOnce(Vec<GpuEngine>)) {
    validation::init();
    let _shared = GPU.read().unwrap_or_else(|p| p.into_inner());
    validation::assert_none(test, "before the test (left by another test)");
    let adapters = all_adapters();
    let seen: Vec<String> = adapters
        .iter()
        .map(|a| {
            let info = a.get_info();
            format!("{} ({:?})", info.name, info.backend)
        })
        .collect();
    let what = format!(
        "{} compute adapter(s) ({}); install mesa-vulkan-drivers, libegl1, libgl1-mesa-dri and SwiftShader",
        adapters.len(),
        seen.join(", ")
    );
    if adapters.len() < 3 && super::is_ci() {
        panic!("[{test}] {what}: CI=true needs 3 for the multi-device tests");
    }
    if adapters.len() < 2 {
        eprintln!("\n*** SKIPPED [{test}]: {what}; the multi-device tests need 2 ***\n");
        return;
    }
    eprintln!("[{test}] on {}", seen.join(", "));
    let engines = adapters
        .iter()
        .map(|a| {
            GpuEngine::from_adapter(a, EngineOptions::default())
                .unwrap_or_else(|e| panic!("[{test}] {e}"))
        })
        .collect();
    let guard = validation::PrintOnPanic(test);
    body(engines);
    drop(guard);
    validation::assert_none(test, "after the test");
    drop(adapters);
    validation::assert_none(test, "when the instance was dropped");
}

/// Runs `f` with no `gpu_test!` test of the binary running (the lock an `exclusive` test holds).
pub fn exclusive<R>(f: impl FnOnce() -> R) -> R {
    let _exclusive = GPU.write().unwrap_or_else(|p| p.into_inner());
    f()
}

/// A compute pipeline (entry point `main`, layout derived from the shader) of a caller's own
/// WGSL, the way an engine composing our decoders would build it.
pub fn caller_pipeline(device: &wgpu::Device, label: &str, wgsl: &str) -> wgpu::ComputePipeline {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(label),
        source: wgpu::ShaderSource::Wgsl(wgsl.into()),
    });
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(label),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    })
}

/// The first `len` bytes of `buf` (usage `COPY_SRC`), copied to a staging buffer and mapped.
pub fn read_buffer(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    buf: &wgpu::Buffer,
    len: u64,
) -> Vec<u8> {
    let size = len.div_ceil(4) * 4;
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buf, 0, &staging, 0, size);
    let index = queue.submit([enc.finish()]);
    staging.map_async(wgpu::MapMode::Read, .., |r| r.unwrap());
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: None,
        })
        .unwrap();
    let view = staging.get_mapped_range(..).unwrap();
    view[..len as usize].to_vec()
}
