//! Every kernel variant the engine can compile (`KernelKey::all`: every op on every format with a
//! shader, every column count, threads per row, x reader, row reduction and output dtype)
//! parses, validates under naga's `Capabilities::empty()` (no f16, no subgroups; the subgroup
//! reductions and shared x reads with `SUBGROUP` alone) and translates to SPIR-V, MSL, HLSL and
//! GLSL ES 3.1 (those using subgroups to all but GLSL). No GPU and no wgpu needed.

use gguf_dequant::gpu::kernels::{kernel_source, KernelKey};
use rayon::prelude::*;

use crate::support::shader::{translate_with, validate_with};

/// Parses, validates and translates `key`'s WGSL; the failures, each naming the key.
fn validate_and_translate(key: &KernelKey) -> Vec<String> {
    let label = format!("{key:?}");
    let src = match kernel_source(key) {
        Ok(s) => s,
        Err(e) => return vec![format!("{label}: {e}")],
    };
    match validate_with(&label, &src, key.uses_subgroups()) {
        Ok((module, info)) => translate_with(
            &label,
            &module,
            &info,
            key.entry_point(),
            key.uses_subgroups(),
        ),
        Err(e) => vec![e],
    }
}

#[test]
fn every_kernel_variant_validates_and_translates() {
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
