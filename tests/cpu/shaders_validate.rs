//! Every composed shader parses and validates with naga under `Capabilities::empty()` (the
//! strictest baseline: no f16, no subgroups) and translates to SPIR-V, MSL, HLSL and GLSL ES 3.1.
//! No GPU needed.

use gguf_dequant::gpu::shaders;
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

fn validate(label: &str, src: &str) -> Result<(naga::Module, naga::valid::ModuleInfo), String> {
    let module =
        naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string_with_path(src, label))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module)
    .map_err(|e| e.emit_to_string_with_path(src, label))?;
    Ok((module, info))
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
        let (module, info) = match validate(&label, src) {
            Ok(m) => m,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let spv =
            naga::back::spv::write_vec(&module, &info, &naga::back::spv::Options::default(), None);
        if let Err(e) = spv {
            failures.push(format!("{label}: SPIR-V: {e}"));
        }
        let msl = naga::back::msl::write_string(
            &module,
            &info,
            &naga::back::msl::Options::default(),
            &naga::back::msl::PipelineOptions::default(),
        );
        if let Err(e) = msl {
            failures.push(format!("{label}: MSL: {e}"));
        }
        let hlsl_options = naga::back::hlsl::Options::default();
        let hlsl_pipeline = naga::back::hlsl::PipelineOptions::default();
        let mut hlsl = String::new();
        let r = naga::back::hlsl::Writer::new(&mut hlsl, &hlsl_options, &hlsl_pipeline)
            .write(&module, &info, None);
        if let Err(e) = r {
            failures.push(format!("{label}: HLSL: {e}"));
        }
        let glsl_options = naga::back::glsl::Options {
            version: naga::back::glsl::Version::new_gles(310),
            ..Default::default()
        };
        let glsl_pipeline = naga::back::glsl::PipelineOptions {
            shader_stage: naga::ShaderStage::Compute,
            entry_point: "main".to_string(),
            multiview: None,
        };
        let mut glsl = String::new();
        let r = naga::back::glsl::Writer::new(
            &mut glsl,
            &module,
            &info,
            &glsl_options,
            &glsl_pipeline,
            naga::proc::BoundsCheckPolicies::default(),
        )
        .and_then(|mut w| w.write());
        if let Err(e) = r {
            failures.push(format!("{label}: GLSL: {e}"));
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
