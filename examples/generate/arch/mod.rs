//! One file per architecture: the choices it makes on top of the common hyperparameters
//! (`model::hparams` reads those, then calls the architecture's `configure`). Adding one is a
//! file here and its line in [`ARCHS`].

pub mod gemma3;
pub mod llama;

use crate::model::{Hparams, Meta, ModelError};

/// What an architecture sets on top of the common hyperparameters.
pub type Configure = fn(&Meta<'_>, &mut Hparams) -> Result<(), ModelError>;

/// The architectures this engine runs, by `general.architecture`.
pub const ARCHS: &[(&str, Configure)] =
    &[("llama", llama::configure), ("gemma3", gemma3::configure)];

/// The architecture named `name`.
pub fn find(name: &str) -> Option<Configure> {
    ARCHS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
}

/// The names of [`ARCHS`], for messages.
pub fn names() -> String {
    ARCHS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}
