//! WGSL through naga as the shader tests check it, with no GPU: parsed and validated under
//! `Capabilities::empty()` (the strictest baseline: no f16, no subgroups), then translated to
//! SPIR-V, MSL, HLSL and GLSL ES 3.1.

/// `src` parsed and validated; the error names `label` and the offending line.
pub fn validate(label: &str, src: &str) -> Result<(naga::Module, naga::valid::ModuleInfo), String> {
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

/// The failures of translating a validated module to each backend (GLSL for compute entry point
/// `entry`), each naming `label`.
pub fn translate(
    label: &str,
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    entry: &str,
) -> Vec<String> {
    let mut failures = Vec::new();
    if let Err(e) =
        naga::back::spv::write_vec(module, info, &naga::back::spv::Options::default(), None)
    {
        failures.push(format!("{label}: SPIR-V: {e}"));
    }
    if let Err(e) = naga::back::msl::write_string(
        module,
        info,
        &naga::back::msl::Options::default(),
        &naga::back::msl::PipelineOptions::default(),
    ) {
        failures.push(format!("{label}: MSL: {e}"));
    }
    let mut hlsl = String::new();
    let hlsl_options = naga::back::hlsl::Options::default();
    let hlsl_pipeline = naga::back::hlsl::PipelineOptions::default();
    if let Err(e) = naga::back::hlsl::Writer::new(&mut hlsl, &hlsl_options, &hlsl_pipeline)
        .write(module, info, None)
    {
        failures.push(format!("{label}: HLSL: {e}"));
    }
    let glsl_options = naga::back::glsl::Options {
        version: naga::back::glsl::Version::new_gles(310),
        ..Default::default()
    };
    let glsl_pipeline = naga::back::glsl::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: entry.to_string(),
        multiview: None,
    };
    let mut glsl = String::new();
    if let Err(e) = naga::back::glsl::Writer::new(
        &mut glsl,
        module,
        info,
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
