//! WGSL through naga as the shader tests check it, with no GPU: parsed and validated under
//! `Capabilities::empty()` (the strictest baseline: no f16, no subgroups; the subgroup kernel
//! variants with `SUBGROUP`, the `hw_f16` ones with `SHADER_FLOAT16_IN_FLOAT32`), then translated to SPIR-V, MSL, HLSL and GLSL ES 3.1.

/// `src` parsed and validated; the error names `label` and the offending line.
pub fn validate(label: &str, src: &str) -> Result<(naga::Module, naga::valid::ModuleInfo), String> {
    validate_with(label, src, false, false)
}

/// [`validate`], allowing subgroup operations in compute shaders where `subgroups` (what wgpu's
/// `SUBGROUP` feature grants) and `unpack2x16float` where `unpack_f16` (what wgpu's downlevel
/// flag `SHADER_F16_IN_F32` grants); nothing else.
pub fn validate_with(
    label: &str,
    src: &str,
    subgroups: bool,
    unpack_f16: bool,
) -> Result<(naga::Module, naga::valid::ModuleInfo), String> {
    use naga::valid::{Capabilities, ShaderStages, SubgroupOperationSet};
    let module =
        naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string_with_path(src, label))?;
    let mut caps = Capabilities::empty();
    caps.set(Capabilities::SUBGROUP, subgroups);
    caps.set(Capabilities::SHADER_FLOAT16_IN_FLOAT32, unpack_f16);
    let mut validator = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps);
    if subgroups {
        validator
            .subgroup_stages(ShaderStages::COMPUTE)
            .subgroup_operations(SubgroupOperationSet::all());
    }
    let info = validator
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
    translate_with(label, module, info, entry, false)
}

/// [`translate`] of a module that may use subgroup operations (`subgroups`): to the language
/// versions that have them (SPIR-V 1.3, MSL 2.3, HLSL shader model 6.0), and not to GLSL ES
/// (wgpu's GL backend never offers `SUBGROUP`).
pub fn translate_with(
    label: &str,
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    entry: &str,
    subgroups: bool,
) -> Vec<String> {
    let mut failures = Vec::new();
    let mut spv_options = naga::back::spv::Options::default();
    let mut msl_options = naga::back::msl::Options::default();
    let mut hlsl_options = naga::back::hlsl::Options::default();
    if subgroups {
        spv_options.lang_version = (1, 3);
        msl_options.lang_version = (2, 3);
        hlsl_options.shader_model = naga::back::hlsl::ShaderModel::V6_0;
    }
    if let Err(e) = naga::back::spv::write_vec(module, info, &spv_options, None) {
        failures.push(format!("{label}: SPIR-V: {e}"));
    }
    if let Err(e) = naga::back::msl::write_string(
        module,
        info,
        &msl_options,
        &naga::back::msl::PipelineOptions::default(),
    ) {
        failures.push(format!("{label}: MSL: {e}"));
    }
    let mut hlsl = String::new();
    let hlsl_pipeline = naga::back::hlsl::PipelineOptions::default();
    if let Err(e) = naga::back::hlsl::Writer::new(&mut hlsl, &hlsl_options, &hlsl_pipeline)
        .write(module, info, None)
    {
        failures.push(format!("{label}: HLSL: {e}"));
    }
    if subgroups {
        return failures;
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
