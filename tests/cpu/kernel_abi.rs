//! The kernels' ABI, read from their WGSL through naga against the Rust side
//! (`gguf_dequant::gpu::kernels`): the uniform `Params` (member names, offsets, size) against the
//! `#[repr(C)]` params struct, the storage bindings (group, number, access, element size)
//! against the binding constants and layouts, the workgroup size and the constants the Rust side
//! plans with. [`check_module`] runs on every kernel variant `tests/cpu/kernel_shaders.rs`
//! validates (every family's variants on every format); here, that the check is live, and the
//! quantiser's ABI. No GPU and no wgpu needed.

use gguf_dequant::gpu::kernels::family::matvec::QUANTIZE_BINDINGS;
use gguf_dequant::gpu::kernels::params::{ParamField, ParamScalar};
use gguf_dequant::gpu::kernels::{binding, kernel_source, KernelKey, WORKGROUP_SIZE};

use crate::support::shader::{translate_with, validate, validate_with};

/// The module's `const` u32 values by name.
fn u32_const(module: &naga::Module, name: &str) -> Option<u32> {
    module
        .constants
        .iter()
        .find(|(_, c)| c.name.as_deref() == Some(name))
        .and_then(|(_, c)| match module.global_expressions[c.init] {
            naga::Expression::Literal(naga::Literal::U32(v)) => Some(v),
            _ => None,
        })
}

/// The `Params` member type of a naga type: `None` for anything but a 4-byte scalar.
fn scalar(inner: &naga::TypeInner) -> Option<ParamScalar> {
    match inner {
        naga::TypeInner::Scalar(naga::Scalar::U32) => Some(ParamScalar::U32),
        naga::TypeInner::Scalar(naga::Scalar::I32) => Some(ParamScalar::I32),
        naga::TypeInner::Scalar(naga::Scalar::F32) => Some(ParamScalar::F32),
        _ => None,
    }
}

/// A `Params` struct's members as (name, offset, type), from the WGSL.
type Members = Vec<(String, usize, Option<ParamScalar>)>;

/// `members` of a struct of `module`.
fn wgsl_members(module: &naga::Module, members: &[naga::StructMember]) -> Members {
    members
        .iter()
        .map(|m| {
            let name = m.name.clone().unwrap_or_default();
            (name, m.offset as usize, scalar(&module.types[m.ty].inner))
        })
        .collect()
}

/// The members of a `KernelParams` table.
fn rust_members(fields: &[ParamField]) -> Members {
    fields
        .iter()
        .map(|f| (f.name.to_string(), f.offset, Some(f.scalar)))
        .collect()
}

/// Everything that differs between `src`, the WGSL of `key`, and the Rust side.
fn check_source(key: &KernelKey, src: &str) -> Vec<String> {
    let what = format!("{key:?}");
    let (module, info) = validate_with(&what, src, key.uses_subgroups(), key.uses_unpack_f16())
        .unwrap_or_else(|e| panic!("{e}"));
    check_module(key, &module, &info)
}

/// Everything that differs between `module`, `key`'s WGSL validated, and the Rust side: run on
/// every variant `tests/cpu/kernel_shaders.rs` validates, so a new variant is checked without
/// editing either test.
pub(crate) fn check_module(
    key: &KernelKey,
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
) -> Vec<String> {
    let what = format!("{key:?}");
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(module.to_ctx()).expect("layouts");
    let Some(ep) = module
        .entry_points
        .iter()
        .position(|e| e.name == key.entry_point())
    else {
        return vec![format!("{what}: no entry point {}", key.entry_point())];
    };
    // What the entry point binds: the globals it uses (a file may declare more, for another
    // entry point).
    let used = |h: naga::Handle<naga::GlobalVariable>| !info.get_entry_point(ep)[h].is_empty();
    let mut bad = Vec::new();

    // The uniform Params.
    let (fields, size) = key.op().params_layout();
    let params: Vec<_> = module
        .global_variables
        .iter()
        .filter(|&(h, v)| v.space == naga::AddressSpace::Uniform && used(h))
        .collect();
    match params[..] {
        [(_, var)] => {
            let b = var.binding.as_ref().expect("a uniform has a binding");
            if (b.group, b.binding) != (binding::PARAMS_GROUP, binding::PARAMS) {
                bad.push(format!(
                    "{what}: params at group {} binding {}",
                    b.group, b.binding
                ));
            }
            let ty = &module.types[var.ty];
            match &ty.inner {
                naga::TypeInner::Struct { members, span } => {
                    let (got, want) = (wgsl_members(module, members), rust_members(fields));
                    if got != want {
                        bad.push(format!(
                            "{what}: WGSL Params (name, offset, type) {got:?}, Rust {want:?}"
                        ));
                    }
                    if *span as usize != size {
                        bad.push(format!("{what}: WGSL Params {span} bytes, Rust {size}"));
                    }
                }
                other => bad.push(format!("{what}: params is {other:?}, not a struct")),
            }
        }
        _ => bad.push(format!("{what}: {} uniforms, not one", params.len())),
    }

    // The storage bindings.
    let mut got = Vec::new();
    for (h, var) in module.global_variables.iter() {
        let naga::AddressSpace::Storage { access } = var.space else {
            continue;
        };
        if !used(h) {
            continue;
        }
        let b = var.binding.as_ref().expect("storage has a binding");
        let stride = match module.types[var.ty].inner {
            naga::TypeInner::Array { stride, .. } => stride as u64,
            _ => layouter[var.ty].size as u64,
        };
        got.push((
            b.group,
            b.binding,
            access.contains(naga::StorageAccess::STORE),
            stride,
        ));
    }
    got.sort();
    let want: Vec<_> = key
        .bindings()
        .map(|s| {
            (
                binding::STORAGE_GROUP,
                s.binding,
                s.read_write,
                s.element_bytes,
            )
        })
        .collect();
    if got != want {
        bad.push(format!(
            "{what}: WGSL storage (group, binding, read_write, element bytes) {got:?}, Rust {want:?}"
        ));
    }

    // The entry point and its workgroup size.
    let size = module.entry_points[ep].workgroup_size;
    let wg = key.workgroup_size();
    if size != [wg, 1, 1] {
        bad.push(format!(
            "{what}: workgroup size {size:?}, Rust plans with {wg}"
        ));
    }

    // The constants both sides plan with.
    for (name, value) in key.consts() {
        let got = u32_const(module, name);
        if got != Some(value) {
            bad.push(format!("{what}: WGSL const {name} = {got:?}, Rust {value}"));
        }
    }
    bad
}

/// The check is live: a Params member added, a binding renumbered, an access mode changed and a
/// workgroup size changed are each reported.
#[test]
fn the_abi_check_finds_each_kind_of_slip() {
    let key = KernelKey::matmul(gguf_dequant::Format::Q4_0);
    let src = kernel_source(&key).unwrap();
    assert!(check_source(&key, &src).is_empty());
    for (from, to, expect) in [
        (
            "    y_skip: u32,",
            "    y_skip: u32,\n    extra: u32,",
            "WGSL Params",
        ),
        (
            "@group(0) @binding(1) var<storage, read> x",
            "@group(0) @binding(7) var<storage, read> x",
            "WGSL storage",
        ),
        (
            "@group(0) @binding(0) var<storage, read> w",
            "@group(0) @binding(0) var<storage, read_write> w",
            "WGSL storage",
        ),
        (
            "@group(1) @binding(0) var<uniform>",
            "@group(0) @binding(9) var<uniform>",
            "params at group",
        ),
        (
            "const WG: u32 = 64u;",
            "const WG: u32 = 32u;",
            "workgroup size",
        ),
    ] {
        assert!(src.contains(from), "{from}");
        let found = check_source(&key, &src.replace(from, to));
        assert!(found.iter().any(|m| m.contains(expect)), "{to}: {found:?}");
    }
    // A member's type: y_skip as i32 in the WGSL, converted where it is read.
    assert!(src.contains("params.y_skip"));
    let typed = src
        .replace("    y_skip: u32,", "    y_skip: i32,")
        .replace("params.y_skip", "u32(params.y_skip)");
    let found = check_source(&key, &typed);
    assert!(
        found
            .iter()
            .any(|m| m.contains("WGSL Params") && m.contains("I32")),
        "{found:?}"
    );
}

/// The integer path's quantiser: it validates and translates to every target, its `Params` are
/// `QuantizeParams`, member for member; it reads x at binding X and writes the codes at binding
/// Y, 64 invocations per workgroup.
#[test]
fn quantizer_abi_matches_the_rust_side() {
    use gguf_dequant::gpu::kernels::params::{KernelParams, QuantizeParams};
    let src = gguf_dequant::gpu::kernels::quantize_source();
    let (module, info) = validate("quantize_q8", &src).unwrap_or_else(|e| panic!("{e}"));
    let failures = translate_with("quantize_q8", &module, &info, "quantize_q8", false);
    assert!(failures.is_empty(), "{failures:?}");
    let mut params = None;
    let mut storage = Vec::new();
    for (_, var) in module.global_variables.iter() {
        let b = var.binding.as_ref().expect("bound");
        match var.space {
            naga::AddressSpace::Uniform => params = Some((b.group, b.binding, var.ty)),
            naga::AddressSpace::Storage { access } => storage.push((
                b.group,
                b.binding,
                access.contains(naga::StorageAccess::STORE),
            )),
            _ => {}
        }
    }
    storage.sort();
    let want: Vec<_> = QUANTIZE_BINDINGS
        .iter()
        .map(|b| (binding::STORAGE_GROUP, b.binding, b.read_write))
        .collect();
    assert_eq!(storage, want);
    let (group, b, ty) = params.expect("a uniform");
    assert_eq!((group, b), (binding::PARAMS_GROUP, binding::PARAMS));
    let naga::TypeInner::Struct { members, span } = &module.types[ty].inner else {
        panic!("params is not a struct");
    };
    assert_eq!(
        wgsl_members(&module, members),
        rust_members(QuantizeParams::FIELDS)
    );
    assert_eq!(*span as usize, std::mem::size_of::<QuantizeParams>());
    let ep = &module.entry_points[0];
    assert_eq!(
        (ep.name.as_str(), ep.workgroup_size),
        ("quantize_q8", [WORKGROUP_SIZE, 1, 1])
    );
}
