//! Where to decode: a GPU API through wgpu, or the CPU codecs. One type for the library and the
//! command line; each command accepts the subset that makes sense for it.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// A decoding backend: a graphics API (an adapter of it, through wgpu), every adapter, or the
/// CPU reference codecs.
///
/// The library never reads the environment to pick one: `Auto` always means "the best adapter
/// of any API". (The command line reads `GGUF_DEQUANT_BACKEND` and passes what it names.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Backend {
    /// The best adapter of any API (discrete > integrated > virtual > CPU; Vulkan, Metal and
    /// DX12 before GL).
    #[default]
    Auto,
    /// Every compute adapter of every API, for the commands that run on several (`bench`,
    /// `selftest`); where one device is wanted, the same as `Auto`.
    All,
    /// Vulkan (lavapipe and SwiftShader count).
    Vulkan,
    /// OpenGL / GLES 3.1+ through EGL (llvmpipe counts).
    Gl,
    /// Metal.
    Metal,
    /// Direct3D 12.
    Dx12,
    /// The CPU reference codecs, on all cores (no GPU).
    Cpu,
}

impl Backend {
    /// Every backend, `Auto` first.
    pub const ALL: [Backend; 7] = [
        Backend::Auto,
        Backend::All,
        Backend::Vulkan,
        Backend::Gl,
        Backend::Metal,
        Backend::Dx12,
        Backend::Cpu,
    ];

    /// Lower-case name (`auto`, `all`, `vulkan`, `gl`, `metal`, `dx12`, `cpu`).
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::All => "all",
            Backend::Vulkan => "vulkan",
            Backend::Gl => "gl",
            Backend::Metal => "metal",
            Backend::Dx12 => "dx12",
            Backend::Cpu => "cpu",
        }
    }

    /// Whether this names GPU adapters (everything but [`Backend::Cpu`]).
    pub const fn is_gpu(self) -> bool {
        !matches!(self, Backend::Cpu)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = Error;

    /// Case-insensitive; also accepts `vk`, `gles`, `opengl`, `mtl`, `d3d12`. Anything else is
    /// [`Error::UnknownBackend`].
    fn from_str(s: &str) -> Result<Backend, Error> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Backend::Auto,
            "all" => Backend::All,
            "vulkan" | "vk" => Backend::Vulkan,
            "gl" | "gles" | "opengl" => Backend::Gl,
            "metal" | "mtl" => Backend::Metal,
            "dx12" | "d3d12" => Backend::Dx12,
            "cpu" => Backend::Cpu,
            _ => return Err(Error::UnknownBackend(s.to_string())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for b in Backend::ALL {
            assert_eq!(b.name().parse::<Backend>().unwrap(), b);
            assert_eq!(b.name().to_uppercase().parse::<Backend>().unwrap(), b);
        }
        assert!(matches!(
            "cuda".parse::<Backend>(),
            Err(Error::UnknownBackend(_))
        ));
    }
}
