//! The one progress policy of every long command (`load`, `verify`, `convert`, `dequant`, `bench`):
//! a bar on stderr only when stderr is a terminal and the command prints text, that is without
//! `--quiet` and without `--json` (for `bench`, `--json -`: a report file still comes with the
//! table). Otherwise the bar is hidden and costs nothing.

use std::io::{self, IsTerminal};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar that draws itself only where the policy allows.
pub struct Progress(ProgressBar);

impl Progress {
    /// A bar of `total` bytes, with speed and time left.
    pub fn bytes(total: u64, quiet: bool, json: bool) -> Progress {
        Progress::new(
            total,
            quiet,
            json,
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
        )
    }

    /// A bar of steps, each named by [`Progress::step`].
    pub fn steps(quiet: bool, json: bool) -> Progress {
        Progress::new(
            0,
            quiet,
            json,
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
        )
    }

    fn new(total: u64, quiet: bool, json: bool, template: &str) -> Progress {
        if quiet || json || !io::stderr().is_terminal() {
            return Progress(ProgressBar::hidden());
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        Progress(bar)
    }

    /// `n` more bytes (or steps) done.
    pub fn inc(&self, n: u64) {
        self.0.inc(n);
    }

    /// A callback that advances the bar, for the library's `'static` progress hooks.
    pub fn ticker(&self) -> impl Fn(u64) + Send + Sync + 'static {
        let bar = self.0.clone();
        move |n| bar.inc(n)
    }

    /// `done` of `total` steps finished; `what` is the one running now.
    pub fn step(&self, done: u64, total: u64, what: &str) {
        self.0.set_length(total);
        self.0.set_position(done);
        self.0.set_message(what.to_string());
    }

    /// Removes the bar, before the command prints its result (dropping it does the same, so that
    /// an error line never follows a half-drawn bar).
    pub fn finish(self) {}
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}
