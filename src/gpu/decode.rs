//! Composable decoders: one format's WGSL decoder, renamed so that a caller's shader can hold
//! the decoders of several formats side by side and read each from a storage binding it declares
//! and numbers itself.
//!
//! [`decode_module`] takes the engine's own decoder ([`super::shaders::wgsl_decode_source`]: the
//! shared helpers, the format's tables and `shaders/formats/<format>.wgsl`, never a copy) and
//! prefixes every name it declares at module scope. It reads the blocks from the caller's binding
//! instead of the dequantiser's `tile`, and the i-quant grids from the caller's grid binding
//! instead of declaring `grids` at binding 3. The contract of the result, for prefix `p`:
//!
//! ```wgsl
//! const pBLOCK_ELEMS: u32;   // values per block (1 for F32, F16, BF16, F8_E4M3)
//! const pBLOCK_BYTES: u32;   // bytes per block
//! // The f32 bit patterns of values 8 * part .. 8 * part + 8 of the block whose first byte is at
//! // byte offset `base` of the blocks binding (for one-value formats: part = 0 and the 8
//! // consecutive elements from `base` on). Bit-exact with the CPU codecs.
//! fn pdequant8(base: u32, part: u32) -> array<vec4<u32>, 2>
//! ```
//!
//! **The caller's part:** declare the blocks binding as `var<storage, read> NAME: array<u32>`
//! (raw little-endian bytes, e.g. a raw [`super::loader::ResidentTensor`] part bound with
//! [`super::loader::ResidentTensor::bind_elements`]); for a format with grids
//! ([`Format::binds_grids`]) also `var<storage, read> GRIDS: array<u32>` holding
//! [`super::tables::words`] (several formats may share one). A read may touch the word after a
//! block's last byte: bind whole words (resident buffers are padded). Byte offsets are u32.
//! Blocks start as far into a word as the format's size allows: `base` a multiple of 4 where
//! `pBLOCK_BYTES` is one (Q4_K, Q5_K, Q8_K, Q2_K, Q4_1, Q5_1, Q8_1, IQ4_XS, IQ1_M, NVFP4, F32) and
//! even where it is even, as rows of whole blocks from the start of a binding give; the decoder
//! then reads their fields a word at a time.
//!
//! ```
//! use gguf_dequant::gpu::decode::{decode_module, DecodeNames};
//! use gguf_dequant::Format;
//!
//! let names = |prefix, blocks| DecodeNames { prefix, blocks, grids: "grid_words" };
//! let q4 = decode_module(Format::Q4_0, &names("q4_", "w_q4")).unwrap();
//! let iq = decode_module(Format::IQ2_XXS, &names("iq_", "w_iq")).unwrap();
//! let shader = format!(
//!     "@group(0) @binding(0) var<storage, read> w_q4: array<u32>;\n\
//!      @group(0) @binding(1) var<storage, read> w_iq: array<u32>;\n\
//!      @group(0) @binding(2) var<storage, read> grid_words: array<u32>;\n\
//!      @group(0) @binding(3) var<storage, read_write> out: array<f32>;\n\
//!      {q4}\n{iq}\n\
//!      @compute @workgroup_size(1) fn main() {{\n\
//!          out[0] = bitcast<f32>(q4_dequant8(0u, 0u)[0].x);\n\
//!          out[1] = bitcast<f32>(iq_dequant8(0u, 0u)[0].x);\n\
//!      }}"
//! );
//! assert!(shader.contains("fn q4_load_u32") && shader.contains("fn iq_load_u32"));
//! ```

use super::shaders::wgsl_decode_source;
use super::GpuError;
use crate::{Format, Result};

/// The names a [`decode_module`] uses.
#[derive(Clone, Copy, Debug)]
pub struct DecodeNames<'a> {
    /// Prefix of every name the module declares (`dequant8` becomes `<prefix>dequant8`). An
    /// identifier start (letter or `_`, not `__`), then letters, digits or `_`.
    pub prefix: &'a str,
    /// The caller's `var<storage, read> _: array<u32>` that holds the blocks.
    pub blocks: &'a str,
    /// The caller's `var<storage, read> _: array<u32>` that holds [`super::tables::words`]; only
    /// read by formats with [`Format::binds_grids`].
    pub grids: &'a str,
}

/// The grid binding the engine's own decoders declare, which a module leaves to the caller.
const GRIDS_DECL: &str = "@group(0) @binding(3) var<storage, read> grids: array<u32>;";

/// `format`'s decoder with every module-scope name prefixed, reading the caller's bindings (see
/// the module docs). Errors: a format without a shader, or names that are not identifiers.
pub fn decode_module(format: Format, names: &DecodeNames<'_>) -> Result<String> {
    decode_prefixed(format, "", names, Swaps::default())
}

/// `shaders/lib/<name>.wgsl` as a composed source holds it (after its `// ---- ... ----` line).
macro_rules! composed_lib {
    ($name:literal) => {
        concat!(
            "// ---- shaders/lib/",
            $name,
            ".wgsl ----\n",
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/shaders/lib/",
                $name,
                ".wgsl"
            ))
        )
    };
}

/// The binary16 conversion every decoder composes (`shaders/lib/half.wgsl`, integer operations).
const HALF: &str = composed_lib!("half");
/// The same functions through the device's `unpack2x16float` (`shaders/lib/half_unpack.wgsl`).
const HALF_UNPACK: &str = composed_lib!("half_unpack");
/// The 16-entry table lookups of IQ4_NL, IQ4_XS and NVFP4 (`shaders/lib/lookup.wgsl`: from the
/// `vec4<u32>` constant).
const LOOKUP: &str = composed_lib!("lookup");
/// The same lookups from workgroup memory (`shaders/lib/lookup_wg.wgsl`).
const LOOKUP_WG: &str = composed_lib!("lookup_wg");

/// Whether `format`'s decoder looks its codes up in a 16-entry table (`shaders/lib/lookup.wgsl`:
/// IQ4_NL, IQ4_XS, NVFP4), and so declares `lookup_begin`.
pub(crate) fn uses_lookup(format: Format) -> bool {
    wgsl_decode_source(format).is_some_and(|s| s.contains(LOOKUP))
}

/// Which of the decoders' shared pieces a summing kernel swaps for another that gives the same
/// values ([`decode_prefixed`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Swaps {
    /// binary16 converted by the device's `unpack2x16float` (`half_unpack.wgsl` in `half.wgsl`'s
    /// place: exact only where the device was probed so, and NaN payloads may differ, so for
    /// summing kernels alone).
    pub unpack_f16: bool,
    /// The 16-entry tables read from workgroup memory (`lookup_wg.wgsl` in `lookup.wgsl`'s
    /// place): the kernel must call `lookup_begin` first, in uniform control flow.
    pub lookup_wg: bool,
}

/// [`decode_module`] of the decoder followed by `extra` WGSL (an output packer), renamed
/// together, with the shared pieces `swaps` names swapped.
pub(crate) fn decode_prefixed(
    format: Format,
    extra: &str,
    names: &DecodeNames<'_>,
    swaps: Swaps,
) -> Result<String> {
    let src = wgsl_decode_source(format).ok_or_else(|| {
        GpuError::InvalidJob(format!("{format} has no shader (it is decoded on the CPU)"))
    })?;
    debug_assert!(
        src.contains(HALF),
        "{format}: every decoder composes half.wgsl"
    );
    let mut src = src.to_string();
    if swaps.unpack_f16 {
        src = src.replace(HALF, HALF_UNPACK);
    }
    if swaps.lookup_wg {
        src = src.replace(LOOKUP, LOOKUP_WG);
    }
    for (what, name, prefix) in [
        ("prefix", names.prefix, true),
        ("blocks binding", names.blocks, false),
        ("grids binding", names.grids, false),
    ] {
        if !is_identifier(name, prefix) {
            return Err(GpuError::InvalidJob(format!(
                "decode module {what} {name:?} is not a WGSL identifier"
            ))
            .into());
        }
    }
    if !names.prefix.is_empty()
        && [names.blocks, names.grids]
            .iter()
            .any(|n| n.starts_with(names.prefix))
    {
        return Err(GpuError::InvalidJob(format!(
            "decode module bindings {:?} and {:?} must not start with the prefix {:?}",
            names.blocks, names.grids, names.prefix
        ))
        .into());
    }
    let src = format!("{src}{extra}").replace(GRIDS_DECL, "");
    let declared = declared_names(&src);
    Ok(rename(&src, |ident| match ident {
        "tile" => Some(names.blocks.to_string()),
        "grids" => Some(names.grids.to_string()),
        // Module-scope names, and locals that would shadow the caller's bindings.
        _ if declared.iter().any(|d| d == ident)
            || ident == names.blocks
            || ident == names.grids =>
        {
            Some(format!("{}{ident}", names.prefix))
        }
        _ => None,
    }))
}

/// Whether `s` is a WGSL identifier (or, for a prefix, the start of one; may be empty).
fn is_identifier(s: &str, prefix: bool) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        None => prefix,
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {
            !s.starts_with("__")
                && (prefix || s != "_")
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        Some(_) => false,
    }
}

/// One lexical piece of WGSL source.
#[derive(Debug, PartialEq)]
enum Token<'a> {
    /// An identifier or keyword.
    Ident(&'a str),
    /// A comment, whitespace, a literal or a punctuation character: copied as it is.
    Other(&'a str),
}

/// Splits `src` into identifiers and everything else (comments kept whole).
fn tokens(src: &str) -> Vec<Token<'_>> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let c = bytes[i];
        if src[i..].starts_with("//") {
            i = src[i..].find('\n').map_or(bytes.len(), |n| i + n);
            out.push(Token::Other(&src[start..i]));
        } else if src[i..].starts_with("/*") {
            i = src[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |n| i + 2 + n + 2);
            out.push(Token::Other(&src[start..i]));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push(Token::Ident(&src[start..i]));
        } else if c.is_ascii_digit() {
            // Literals (`0x0F0F0F0Fu`, `1.5e-3f`) are not identifiers.
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
            out.push(Token::Other(&src[start..i]));
        } else {
            i += src[i..].chars().next().map_or(1, char::len_utf8);
            out.push(Token::Other(&src[start..i]));
        }
    }
    out
}

/// The names declared at module scope (`fn`, `const`, `override`, `var`, `struct`, `alias`).
fn declared_names(src: &str) -> Vec<String> {
    let toks = tokens(src);
    let mut names = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    while i < toks.len() {
        match toks[i] {
            Token::Other("{") => depth += 1,
            Token::Other("}") => depth -= 1,
            Token::Ident(kw @ ("fn" | "const" | "override" | "var" | "struct" | "alias"))
                if depth == 0 =>
            {
                // `var<storage, read> name`: skip the address space.
                let mut angle = 0;
                let mut j = i + 1;
                while j < toks.len() {
                    match toks[j] {
                        Token::Other("<") if kw == "var" => angle += 1,
                        Token::Other(">") if kw == "var" => angle -= 1,
                        Token::Ident(name) if angle == 0 => {
                            names.push(name.to_string());
                            break;
                        }
                        _ => {}
                    }
                    j += 1;
                }
                i = j;
            }
            _ => {}
        }
        i += 1;
    }
    names
}

/// `src` with every identifier that `map` renames replaced, except struct members after `.`.
fn rename(src: &str, map: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(src.len() + src.len() / 8);
    let mut after_dot = false;
    for t in tokens(src) {
        match t {
            Token::Ident(id) => {
                match (!after_dot).then(|| map(id)).flatten() {
                    Some(new) => out.push_str(&new),
                    None => out.push_str(id),
                }
                after_dot = false;
            }
            Token::Other(s) => {
                out.push_str(s);
                if !s.trim().is_empty() && !s.starts_with("//") && !s.starts_with("/*") {
                    after_dot = s == ".";
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_module_scope_declarations_only() {
        let src = "const A: u32 = 1u; // fn not_me\nvar<storage, read> buf: array<u32>;\n\
                   fn f(x: u32) -> u32 { let inner = x; const LOCAL = 2u; return inner; }\n\
                   struct S { a: u32 }";
        assert_eq!(declared_names(src), ["A", "buf", "f", "S"]);
    }

    #[test]
    fn renames_identifiers_not_members_comments_or_literals() {
        let src = "// tile stays\nfn f() -> u32 { return s.tile + tile[0x0Fu] + f(); }";
        let out = rename(src, |id| {
            (id == "tile" || id == "f").then(|| format!("p_{id}"))
        });
        assert_eq!(
            out,
            "// tile stays\nfn p_f() -> u32 { return s.tile + p_tile[0x0Fu] + p_f(); }"
        );
    }

    #[test]
    fn identifiers_are_checked() {
        assert!(is_identifier("", true) && is_identifier("q4_", true));
        assert!(!is_identifier("", false) && !is_identifier("_", false));
        assert!(!is_identifier("4q", true) && !is_identifier("__x", true));
        assert!(!is_identifier("a-b", false));
        let bad = DecodeNames {
            prefix: "q4-",
            blocks: "w",
            grids: "g",
        };
        assert!(decode_module(Format::Q4_0, &bad).is_err());
        let ok = DecodeNames {
            prefix: "q4_",
            blocks: "w",
            grids: "g",
        };
        assert!(decode_module(Format::I8, &ok).is_err());
    }

    /// Every shader format's module declares only prefixed names, leaves no `tile` or `grids`,
    /// and keeps the engine's decoder text otherwise.
    #[test]
    fn every_module_is_fully_prefixed() {
        for &f in crate::formats::WITH_SHADER {
            let names = DecodeNames {
                prefix: "zz_",
                blocks: "blocks_in",
                grids: "grid_words",
            };
            let m = decode_module(f, &names).unwrap();
            for name in declared_names(&m) {
                assert!(name.starts_with("zz_"), "{f}: {name}");
            }
            let idents: Vec<&str> = tokens(&m)
                .into_iter()
                .filter_map(|t| match t {
                    Token::Ident(i) => Some(i),
                    Token::Other(_) => None,
                })
                .collect();
            assert!(
                !idents.contains(&"tile") && !idents.contains(&"grids"),
                "{f}"
            );
            assert!(idents.contains(&"zz_dequant8"), "{f}");
            assert!(idents.contains(&"blocks_in"), "{f}");
            assert_eq!(idents.contains(&"grid_words"), f.binds_grids(), "{f}");
            assert!(!m.contains("@binding"), "{f}");
        }
    }
}
