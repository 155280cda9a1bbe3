//! Every kernel variant the engine can compile (`KernelKey::all`: every op on every format with a
//! shader, every column count, threads per row, x reader, row reduction and output dtype; the
//! matvec rows mapping's shapes on three formats, see [`keys`])
//! parses, validates under naga's `Capabilities::empty()` (no f16, no subgroups; the subgroup
//! reductions and shared x reads with `SUBGROUP` alone) and translates to SPIR-V, MSL, HLSL and
//! GLSL ES 3.1 (those using subgroups to all but GLSL), and its ABI matches the Rust side
//! (`kernel_abi::check_module`). No GPU and no wgpu needed.

use gguf_dequant::gpu::kernels::{kernel_source, KernelKey, Op};
use rayon::prelude::*;

use crate::kernel_abi::check_module;
use crate::support::shader::{translate_with, validate_with};

/// Parses, validates, checks the ABI of ([`check_module`]) and translates `key`'s WGSL; the
/// failures, each naming the key.
fn validate_and_translate(key: &KernelKey) -> Vec<String> {
    let label = format!("{key:?}");
    let src = match kernel_source(key) {
        Ok(s) => s,
        Err(e) => return vec![format!("{label}: {e}")],
    };
    match validate_with(&label, &src, key.uses_subgroups(), key.uses_unpack_f16()) {
        Ok((module, info)) => {
            let mut failures = check_module(key, &module, &info);
            failures.extend(translate_with(
                &label,
                &module,
                &info,
                key.entry_point(),
                key.uses_subgroups(),
            ));
            failures
        }
        Err(e) => vec![e],
    }
}

/// The variants checked: every classic one; of the matvec rows mapping (`MatVec::rows`,
/// whose shape constants touch no decoder) every shape, x reader, weight reader, reduction and
/// loop on a block format, one with grids and a one-value format, and on every format each
/// x reader, reduction and loop at one shape (3 columns, 64 invocations, 2 rows). The factored
/// sums (`chunk_factored.wgsl`, which only changes what a chunk is): every variant of Q4_K, and
/// on every format with them each x reader, reduction and loop at 3 columns on one and 64
/// invocations per row and on that rows shape; the integer path (`matvec_q8.wgsl`,
/// `chunk_int8.wgsl`) alike. Slots of
/// 2 and 4 chunks (`MatVec::slot`), a loop around the same decoders: every variant of one column
/// on Q4_K, the one shape elsewhere. binary16 converted by the device (`MatVec::hw_f16`, one
/// helper file swapped): every variant of one column on F16, the one shape elsewhere.
fn keys() -> Vec<KernelKey> {
    use gguf_dequant::gpu::kernels::Precision;
    use gguf_dequant::Format;
    let every_shape = [Format::Q4_K, Format::IQ2_XXS, Format::F16];
    KernelKey::all()
        .into_iter()
        .filter(|k| {
            let Some(v) = k.matvec_variant() else {
                return true;
            };
            let one_shape = v.columns == 3 && matches!((v.threads, v.rows), (1 | 64, 0) | (64, 2));
            if v.hw_f16 {
                // The same kernels with half_unpack.wgsl in half.wgsl's place.
                return (k.format == Format::F16 && v.columns == 1) || one_shape;
            }
            if matches!(v.precision, Precision::Factored | Precision::Int8) {
                return k.format == Format::Q4_K || one_shape;
            }
            if v.slot > 1 {
                return (k.format == Format::Q4_K && v.columns == 1) || one_shape;
            }
            v.rows == 0
                || every_shape.contains(&k.format)
                || (v.columns == 3 && v.threads == 64 && v.rows == 2)
        })
        .collect()
}

#[test]
fn every_kernel_variant_validates_matches_its_abi_and_translates() {
    let keys = keys();
    for &op in Op::ALL {
        assert!(keys.iter().any(|k| k.op() == op), "{op}");
    }
    let failures: Vec<String> = keys.par_iter().flat_map(validate_and_translate).collect();
    assert!(
        failures.is_empty(),
        "{} failures over {} kernel variants:\n{}",
        failures.len(),
        keys.len(),
        failures.join("\n")
    );
    eprintln!(
        "[kernel_shaders] {} kernel variants validated, their ABI checked, and translated to SPIR-V, MSL, HLSL and GLSL",
        keys.len()
    );
}
