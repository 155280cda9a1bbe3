//! What the GPU tests hear from the drivers' validation: a `log` logger for wgpu's records and
//! the checks `gpu_test!` makes with them.
//!
//! * [`init`] installs the logger (once per process, before the first instance: wgpu-hal asks
//!   the Vulkan layer only for the severities `log::max_level()` admits when it creates an
//!   instance). It prints every Warn-and-above record of `wgpu*` and `naga*` targets to stderr
//!   (so a failing test's output shows them) and keeps the Error-level *validation* records
//!   (the Vulkan debug messenger, `wgpu_hal::vulkan::instance`; the GL debug output,
//!   `wgpu_hal::gles`) for [`take_errors`], each with the thread, i.e. the test, that caused
//!   it. With `GGUF_DEQUANT_WGPU_LOG=FILE` it also appends every such record to `FILE`, one
//!   line each (`LEVEL target [thread] message`, LEVEL `VALIDATION-ERROR` for those):
//!   `scripts/test.sh` keeps that file of the validation stage and fails the run on any
//!   `VALIDATION-ERROR` line in it, whatever test emitted it.
//! * [`take_errors`] drains those records and wgpu-hal's `VALIDATION_CANARY`, where wgpu-hal's
//!   feature `validation_canary` (a dev-dependency here) pushes the text of every Error-severity
//!   message of the Vulkan layer and the GL debug output (debug builds only, as the tests are).
//!   Messages that are the layer's own bugs ([`KNOWN_LAYER_BUGS`]) are logged as
//!   `KNOWN-LAYER-BUG` and left out. Validation warnings are logged as `VALIDATION-WARNING`:
//!   they fail the validation stage's log gate, not the test.
//! * [`expecting`] runs a deliberately invalid call: its records are logged as
//!   `EXPECTED-VALIDATION-ERROR` so that the log-file gate does not count them, and the caller
//!   drains them.
//! * [`capture_debug`] also collects the Debug-level records of the Vulkan messenger (the
//!   layer's Info messages, such as its start-up status) while it runs.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, OnceLock};

use log::{Level, LevelFilter, Log, Metadata, Record};

static INIT: Once = Once::new();
/// Error-level validation records since the last [`take_errors`].
static ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// While [`expecting`] runs.
static EXPECTING: AtomicBool = AtomicBool::new(false);
/// While [`capture_debug`] runs: every record of the Vulkan messenger.
static CAPTURE: Mutex<Option<Vec<String>>> = Mutex::new(None);
static LOG_FILE: OnceLock<Option<Mutex<File>>> = OnceLock::new();

/// The target of wgpu-hal's Vulkan debug-utils messenger callback.
const VULKAN_MESSENGER: &str = "wgpu_hal::vulkan::instance";

fn is_wgpu(target: &str) -> bool {
    target.starts_with("wgpu") || target.starts_with("naga")
}

/// The target of wgpu-hal's GL debug-output callback (`wgpu_hal::gles::egl`, EGL's own
/// reports such as a DRI2 driver that failed to load before the software one, is not
/// validation).
const GL_DEBUG_OUTPUT: &str = "wgpu_hal::gles";

/// Records of the Vulkan validation layer (and the loader) or the GL debug output.
fn is_validation(target: &str) -> bool {
    target == VULKAN_MESSENGER || target == GL_DEBUG_OUTPUT
}

/// Messages of the Khronos layer that are its own bugs, not ours: `(needle, why)`. A message
/// containing `needle` is logged as `KNOWN-LAYER-BUG` and fails nothing; the validation stage of
/// `scripts/test.sh` prints how many there were.
pub const KNOWN_LAYER_BUGS: &[(&str, &str)] = &[(
    "SPIR-V module not valid: Invalid source language operand: 10",
    "naga writes `OpSource WGSL` (SourceLanguage 10, SPIR-V 1.6 revision 2) into every module \
     when wgpu's InstanceFlags::DEBUG is on (it must be: it also enables VK_EXT_debug_utils, \
     the messenger these checks listen to); the SPIRV-Tools inside Debian 12's layer 1.3.239 \
     predate that enumerant",
)];

fn known_layer_bug(message: &str) -> bool {
    KNOWN_LAYER_BUGS
        .iter()
        .any(|(needle, _)| message.contains(needle))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a record is to the checks.
#[derive(Clone, Copy, PartialEq)]
enum Class {
    /// Not a validation record (or below Error): printed only.
    Other,
    /// A validation warning: printed; fails the validation stage's log gate.
    Warning,
    /// A validation error: fails the test (and the log gate).
    Error,
    /// A validation error inside [`expecting`].
    Expected,
    /// A message in [`KNOWN_LAYER_BUGS`].
    KnownBug,
}

impl Class {
    fn label(self, level: Level) -> String {
        match self {
            Class::Other => level.to_string().to_uppercase(),
            Class::Warning => "VALIDATION-WARNING".into(),
            Class::Error => "VALIDATION-ERROR".into(),
            Class::Expected => "EXPECTED-VALIDATION-ERROR".into(),
            Class::KnownBug => "KNOWN-LAYER-BUG".into(),
        }
    }
}

thread_local! {
    /// The class of this thread's last validation message: wgpu-hal logs a message's queue,
    /// command-buffer and object lists as separate records that start with a tab.
    static LAST: std::cell::Cell<Class> = const { std::cell::Cell::new(Class::Other) };
}

fn classify(r: &Record, message: &str) -> Class {
    if !is_validation(r.target()) {
        return Class::Other;
    }
    if message.starts_with('\t') {
        return LAST.get();
    }
    let class = match r.level() {
        Level::Error if known_layer_bug(message) => Class::KnownBug,
        Level::Error if EXPECTING.load(Ordering::SeqCst) => Class::Expected,
        Level::Error => Class::Error,
        Level::Warn => Class::Warning,
        _ => Class::Other,
    };
    LAST.set(class);
    class
}

struct Logger;

impl Log for Logger {
    fn enabled(&self, m: &Metadata) -> bool {
        is_wgpu(m.target())
            && (m.level() <= Level::Warn
                || (m.target() == VULKAN_MESSENGER && lock(&CAPTURE).is_some()))
    }

    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("unnamed thread");
        let message = r.args().to_string();
        if r.target() == VULKAN_MESSENGER {
            if let Some(c) = lock(&CAPTURE).as_mut() {
                c.push(message.clone());
            }
        }
        if r.level() > Level::Warn {
            return;
        }
        let class = classify(r, &message);
        let label = class.label(r.level());
        eprintln!("[{label} {}] [{thread}] {message}", r.target());
        if let Some(f) = LOG_FILE.get().and_then(Option::as_ref) {
            let line = format!(
                "{label} {} [{thread}] {}\n",
                r.target(),
                message.replace('\n', " | ")
            );
            let _ = lock(f).write_all(line.as_bytes());
        }
        // The message itself; its continuation records only repeat the objects it names.
        if matches!(class, Class::Error | Class::Expected) && !message.starts_with('\t') {
            lock(&ERRORS).push(format!("log {} [{thread}]: {message}", r.target()));
        }
    }

    fn flush(&self) {}
}

static LOGGER: Logger = Logger;

/// Installs the logger (Warn and above) once; later calls do nothing. Call before creating an
/// instance.
pub fn init() {
    INIT.call_once(|| {
        LOG_FILE.get_or_init(|| {
            let path = std::env::var_os("GGUF_DEQUANT_WGPU_LOG")?;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap_or_else(|e| panic!("GGUF_DEQUANT_WGPU_LOG={path:?}: {e}"));
            Some(Mutex::new(file))
        });
        // Another logger (none today) would keep its place; the canary still works then.
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(LevelFilter::Warn);
        }
    });
}

/// The validation errors reported since the last call (wgpu-hal's canary, then the logger's
/// records, one per message), draining both; [`KNOWN_LAYER_BUGS`] are left out.
pub fn take_errors() -> Vec<String> {
    let mut all: Vec<String> = wgpu_hal::VALIDATION_CANARY
        .get_and_reset()
        .into_iter()
        .filter(|m| !known_layer_bug(m))
        .map(|m| format!("canary: {m}"))
        .collect();
    all.append(&mut lock(&ERRORS));
    all
}

/// Panics, listing them, if any validation error was reported; `when` says where the test was.
pub fn assert_none(test: &str, when: &str) {
    let errors = take_errors();
    assert!(
        errors.is_empty(),
        "[{test}] {} validation error(s) reported {when}:\n{}",
        errors.len(),
        errors.join("\n")
    );
}

/// On drop during a panic, prints (and drains) what validation reported, so that the failing
/// test's output carries it.
pub struct PrintOnPanic(pub &'static str);

impl Drop for PrintOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let errors = take_errors();
            if !errors.is_empty() {
                eprintln!(
                    "[{}] validation reported before the panic:\n{}",
                    self.0,
                    errors.join("\n")
                );
            }
        }
    }
}

/// Runs `f`, a deliberately invalid call, and returns what validation reported during it
/// (drained). Its log records are marked `EXPECTED-VALIDATION-ERROR`. Hold the GPU tests' exclusive lock
/// (`exclusive = true`) around it, so that no other test's report lands here.
pub fn expecting<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    init();
    assert_none("expecting", "before a deliberately invalid call");
    EXPECTING.store(true, Ordering::SeqCst);
    let r = f();
    let errors = take_errors();
    EXPECTING.store(false, Ordering::SeqCst);
    (r, errors)
}

/// Runs `f` with the Vulkan messenger's Debug records (the layer's Info messages) admitted, and
/// returns them. Instances created inside `f` ask the layer for Info messages too.
pub fn capture_debug<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    init();
    *lock(&CAPTURE) = Some(Vec::new());
    log::set_max_level(LevelFilter::Debug);
    let r = f();
    log::set_max_level(LevelFilter::Warn);
    let captured = lock(&CAPTURE).take().unwrap_or_default();
    (r, captured)
}
