//! GGUF reading and writing.

/// Placeholder until the reader lands.
#[derive(Debug, thiserror::Error)]
#[error("gguf")]
pub struct GgufError;

/// Placeholder until the reader lands.
pub struct GgufFile;
