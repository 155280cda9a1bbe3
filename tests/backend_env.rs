//! `GGUF_DEQUANT_BACKEND` and the backend selection. A binary of its own because the test sets the
//! process-wide variable, which would steer (or break) every `Backend::Auto` of tests running
//! beside it, and the CLI children they spawn.
//!
//! The module is `tests/backend_env/<topic>.rs` (a crate root's `mod x;` would look in `tests/`,
//! hence the `#[path]`); shared helpers in `tests/support/`.
#![cfg(feature = "gpu")]

pub mod support;

#[path = "backend_env/gpu_backend_env.rs"]
mod gpu_backend_env;
