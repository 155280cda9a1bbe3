//! Output element types of the decoders.

use std::fmt;
use std::str::FromStr;

/// The element type of decoded output. f16 and bf16 are the round-to-nearest-even of the f32 result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DType {
    /// IEEE binary32.
    #[default]
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16.
    BF16,
}

impl DType {
    /// Every output dtype.
    pub const ALL: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// Lower-case name as used on the command line (`f32`, `f16`, `bf16`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown dtype `{s}` (expected f32, f16 or bf16)"))
    }
}
