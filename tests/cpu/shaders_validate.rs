//! Every composed shader parses and validates with naga under `Capabilities::empty()` (the
//! strictest baseline: no f16, no subgroups) and translates to SPIR-V, MSL, HLSL and GLSL ES 3.1.
//! No GPU needed.

use gguf_dequant::gpu::shaders;

use crate::support::shader::{translate, validate};
use gguf_dequant::{DType, Format};

fn composed() -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for &f in Format::ALL {
        for dtype in DType::ALL {
            if let Some(src) = shaders::source(f, dtype) {
                out.push((format!("{} to {} (assembled)", f.name(), dtype), src));
            }
        }
    }
    out
}

#[test]
fn every_gpu_format_has_three_dtypes() {
    let formats = Format::ALL
        .iter()
        .filter(|&&f| shaders::source(f, DType::F32).is_some())
        .count();
    assert_eq!(composed().len(), formats * 3);
    assert_eq!(
        formats,
        gguf_dequant::formats::WITH_SHADER.len(),
        "{formats} formats with a shader"
    );
}

/// The eight i-quant super-block formats have shaders (so every test here covers them).
#[test]
fn iquant_formats_have_shaders() {
    use Format::*;
    for f in [IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_XS] {
        for dtype in DType::ALL {
            assert!(shaders::source(f, dtype).is_some(), "{f} to {dtype}");
        }
    }
}

#[test]
fn every_shader_parses_and_validates_without_capabilities() {
    let failures: Vec<String> = composed()
        .iter()
        .filter_map(|(label, src)| validate(label, src).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_shader_translates_to_all_backends() {
    let mut failures = Vec::new();
    for (label, src) in composed() {
        match validate(&label, src) {
            Ok((module, info)) => failures.extend(translate(&label, &module, &info, "main")),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The source without `//` comments (which may name the builtins they avoid).
fn strip_comments(src: &str) -> String {
    src.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn baseline_uses_no_f16_builtins_and_no_copied_helpers() {
    for (label, src) in composed() {
        let code = strip_comments(src);
        for banned in [
            "enable f16",
            "unpack2x16float",
            "pack2x16float",
            "quantizeToF16",
            "array<f32",
            "array<f16",
        ] {
            assert!(!code.contains(banned), "{label} uses `{banned}`");
        }
        // Each helper is defined exactly once in the composed source (composition, not copies).
        for helper in [
            "fn load_u8(",
            "fn load_u16(",
            "fn f16_le(",
            "fn f32_bits_to_f16(",
            "fn main(",
        ] {
            assert_eq!(code.matches(helper).count(), 1, "{label}: `{helper}`");
        }
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/formats");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = strip_comments(&std::fs::read_to_string(&path).unwrap());
        for helper in [
            "fn load_u8(",
            "fn load_u32(",
            "fn f16_le(",
            "fn f16_to_f32_bits(",
            "fn get_scale_min_k4(",
            "@compute",
        ] {
            assert!(
                !text.contains(helper),
                "{} defines `{helper}`",
                path.display()
            );
        }
    }
}
