//! Every kernel variant the engine can compile (`KernelKey::all`: every op on every format with a
//! shader, every column count, threads per row, x reader and output dtype) parses, validates
//! under naga's `Capabilities::empty()` (no f16, no subgroups) and translates to SPIR-V, MSL,
//! HLSL and GLSL ES 3.1. No GPU and no wgpu needed.

use gguf_dequant::gpu::kernels::{kernel_source, KernelKey};
use rayon::prelude::*;

/// Parses, validates and translates `key`'s WGSL; the failures, each naming the key.
fn validate_and_translate(key: &KernelKey) -> Vec<String> {
    let label = format!("{key:?}");
    let src = match kernel_source(key) {
        Ok(s) => s,
        Err(e) => return vec![format!("{label}: {e}")],
    };
    let module = match naga::front::wgsl::parse_str(&src) {
        Ok(m) => m,
        Err(e) => return vec![e.emit_to_string_with_path(&src, &label)],
    };
    let info = match naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module)
    {
        Ok(i) => i,
        Err(e) => return vec![e.emit_to_string_with_path(&src, &label)],
    };
    let mut failures = Vec::new();
    if let Err(e) =
        naga::back::spv::write_vec(&module, &info, &naga::back::spv::Options::default(), None)
    {
        failures.push(format!("{label}: SPIR-V: {e}"));
    }
    if let Err(e) = naga::back::msl::write_string(
        &module,
        &info,
        &naga::back::msl::Options::default(),
        &naga::back::msl::PipelineOptions::default(),
    ) {
        failures.push(format!("{label}: MSL: {e}"));
    }
    let mut hlsl = String::new();
    let hlsl_options = naga::back::hlsl::Options::default();
    let hlsl_pipeline = naga::back::hlsl::PipelineOptions::default();
    if let Err(e) = naga::back::hlsl::Writer::new(&mut hlsl, &hlsl_options, &hlsl_pipeline)
        .write(&module, &info, None)
    {
        failures.push(format!("{label}: HLSL: {e}"));
    }
    let glsl_options = naga::back::glsl::Options {
        version: naga::back::glsl::Version::new_gles(310),
        ..Default::default()
    };
    let glsl_pipeline = naga::back::glsl::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: key.entry_point().to_string(),
        multiview: None,
    };
    let mut glsl = String::new();
    if let Err(e) = naga::back::glsl::Writer::new(
        &mut glsl,
        &module,
        &info,
        &glsl_options,
        &glsl_pipeline,
        naga::proc::BoundsCheckPolicies::default(),
    )
    .and_then(|mut w| w.write())
    {
        failures.push(format!("{label}: GLSL: {e}"));
    }
    failures
}

#[test]
fn every_kernel_variant_validates_and_translates_without_capabilities() {
    let keys = KernelKey::all();
    let failures: Vec<String> = keys.par_iter().flat_map(validate_and_translate).collect();
    assert!(
        failures.is_empty(),
        "{} failures over {} kernel variants:\n{}",
        failures.len(),
        keys.len(),
        failures.join("\n")
    );
    eprintln!(
        "[kernel_shaders] {} kernel variants validated and translated to SPIR-V, MSL, HLSL and GLSL",
        keys.len()
    );
}
