//! SPIR-V of the inference kernels, one `.spv` per kernel variant, for machine-code statistics
//! without a GPU (`scripts/gpu/isa.sh`, which compiles them on RADV's compile-only null device).
//!
//! ```text
//! cargo run --example spirv -- OUT_DIR [FAMILY...] [--all] [--columns LIST|all] [--format LIST]
//!                              [--no-loop-bounding]
//! ```
//!
//! FAMILY: `matvec` (the default), `matvec_id`, `matmul`, `get_rows`. The variants are
//! [`KernelKey::all`] filtered by family, so a new variant appears here by itself. matvec and
//! matvec_id default to the variants a GPU runs ([`gpu_variant`]); `--all` takes every one.
//! matvec defaults to one column (n = 1); `--columns 1,2,8` (or `all`) widens it. `--format
//! Q4_K,IQ2_XXS` keeps only those formats.
//!
//! Writes `OUT_DIR/<variant>.spv` (the key's `Display`, `matvec.Q4_K.c1.t32.u4.vx.sg`) and `OUT_DIR/manifest.json`: an array with one
//! object per file (the key's fields, the entry point, and [`values_per_step`]: the weights one
//! invocation processes per iteration of the kernel's inner loop, which turns a loop's instruction
//! count into instructions per weight).
//!
//! The SPIR-V is what wgpu 30's Vulkan backend hands a Vulkan 1.3 driver with `robustBufferAccess2`
//! (RADV, NVIDIA): SPIR-V 1.6 (native integer dot products), index bounds clamped (`Restrict`),
//! storage-buffer accesses unchecked (the driver's robustness does that), naga's loop bounding,
//! integer-division checks, no zeroing of workgroup memory (the engine's pipelines turn it off).
//! `--no-loop-bounding` leaves out naga's loop bounding (what `create_shader_module_trusted` with
//! `ShaderRuntimeChecks { force_loop_bounding: false, .. }` would give), which lets the driver
//! unroll constant-trip loops.

use std::path::PathBuf;

use gguf_dequant::gpu::kernels::{
    kernel_source, reads_f16, KernelKey, MatVec, Op, Precision, Variant,
};
use gguf_dequant::Format;
use rayon::prelude::*;

/// Weights (values of W) one invocation processes per iteration of the kernel's inner loop, and
/// whether that loop exists (`"loop"`) or the whole program is one step (`"program"`, get_rows:
/// [`GET_ROWS_VALUES`](gguf_dequant::gpu::kernels::GET_ROWS_VALUES) values per invocation, no loop).
///
/// Derived from the kernels' structure; extend it with every new variant:
/// * matvec on the rows mapping (`key.rows` > 0, `shaders/kernels/matvec_rows.wgsl`): every
///   invocation of the workgroup takes a slot of S 8-value chunks of each of the R rows, `unroll`
///   such slots per row per step: 8 · U · R · S values.
/// * matvec, matvec_id on the f32 path (`shaders/kernels/row_dot.wgsl`): with one invocation per
///   row and a block format, one block per step (`block_dot`: its parts written out for one
///   column; for several columns a loop of four parts inside, which the compiler may leave rolled);
///   otherwise 8-value chunks, `unroll` of them per step of the unrolled loop (U = 4: 32 values),
///   one per step of the rolled loop (8 values; also one-value formats with one invocation per
///   row, whatever x reader).
/// * matvec on the classic mapping's integer path (`matvec_q8.wgsl`): one 8-value part per step
///   (on the rows mapping, `chunk_int8.wgsl`, as the rows mapping's other chunks).
/// * matmul (`matmul.wgsl`): per step of K (TK = 32), two 8-value chunks decoded into the tile.
/// * get_rows: 8 values, no loop.
fn values_per_step(key: &KernelKey) -> (u32, &'static str) {
    let block = key.format.block_elems() as u32;
    match key.variant {
        Variant::MatVec(v) | Variant::MatVecId(v) if v.rows > 0 => {
            (8 * v.unroll * v.rows * v.slot, "loop")
        }
        Variant::MatVec(v) | Variant::MatVecId(v) if v.precision == Precision::Int8 => (8, "loop"),
        Variant::MatVec(v) | Variant::MatVecId(v) if v.threads == 1 && block >= 8 => {
            (block, "loop")
        }
        Variant::MatVec(v) | Variant::MatVecId(v) => (8 * v.unroll, "loop"),
        Variant::MatMul(_) => (16, "loop"),
        Variant::GetRows(_) => (gguf_dequant::gpu::kernels::GET_ROWS_VALUES, "program"),
    }
}

/// The matvec and matvec_id variants a GPU adapter runs, compiled by default: the engine's row
/// width on a device with subgroups (its smallest subgroup: 32 on NVIDIA and on AMD under RADV;
/// 64 on AMD's wave64-only parts) with the subgroup reduction, vec4 x, rolled or unrolled, either
/// F16/BF16 weight reader, and the integer path at the same widths; on the rows mapping
/// (`rows`), workgroups of 64 and 128 invocations on 1, 2 or 4 rows (llama.cpp's shapes on
/// AMD and NVIDIA), with the subgroup reduction and vec4 x, and the integer path there too; all
/// converting binary16 by the device where the format reads it (`MatVec::hw_f16`: every Vulkan
/// GPU has `unpack2x16float`; `--all` has the integer conversion too).
fn gpu_variant(key: &KernelKey, v: &MatVec) -> bool {
    if v.hw_f16 != reads_f16(key.format) {
        return false;
    }
    if v.rows > 0 {
        return matches!(v.threads, 64 | 128)
            && matches!(v.rows, 1 | 2 | 4)
            && v.subgroups
            && (v.vec_x || v.precision == Precision::Int8);
    }
    matches!(v.threads, 32 | 64) && v.subgroups && (v.vec_x || v.precision == Precision::Int8)
}

/// `key`'s SPIR-V as wgpu's Vulkan backend writes it (see the module docs).
fn spirv(key: &KernelKey, loop_bounding: bool) -> Result<Vec<u32>, String> {
    use naga::valid::{Capabilities, ShaderStages, SubgroupOperationSet, ValidationFlags};
    let src = kernel_source(key).map_err(|e| e.to_string())?;
    let module = naga::front::wgsl::parse_str(&src).map_err(|e| e.emit_to_string(&src))?;
    // What wgpu grants a Vulkan device with subgroups (`SHADER_F16_IN_F32`: unpack2x16float).
    let caps = Capabilities::SUBGROUP | Capabilities::SHADER_FLOAT16_IN_FLOAT32;
    let mut validator = naga::valid::Validator::new(ValidationFlags::all(), caps);
    validator
        .subgroup_stages(ShaderStages::COMPUTE)
        .subgroup_operations(SubgroupOperationSet::all());
    let info = validator
        .validate(&module)
        .map_err(|e| e.emit_to_string(&src))?;
    let options = naga::back::spv::Options {
        lang_version: (1, 6),
        flags: naga::back::spv::WriterFlags::LABEL_VARYINGS
            | naga::back::spv::WriterFlags::FORCE_POINT_SIZE,
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: naga::proc::BoundsCheckPolicy::Restrict,
            buffer: naga::proc::BoundsCheckPolicy::Unchecked,
            image_load: naga::proc::BoundsCheckPolicy::Unchecked,
            binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
        },
        zero_initialize_workgroup_memory: naga::back::spv::ZeroInitializeWorkgroupMemoryMode::None,
        force_loop_bounding: loop_bounding,
        use_storage_input_output_16: false,
        emit_int_div_checks: true,
        ..Default::default()
    };
    let pipeline = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: key.entry_point().to_string(),
    };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| e.to_string())
}

fn usage() -> ! {
    eprintln!(
        "usage: spirv OUT_DIR [matvec|matvec_id|matmul|get_rows...] [--all] [--columns LIST|all] [--format LIST]"
    );
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut out: Option<PathBuf> = None;
    let mut ops = Vec::new();
    let mut all = false;
    let mut loop_bounding = true;
    let mut columns: Option<Vec<u32>> = Some(vec![1]);
    let mut formats: Option<Vec<Format>> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--all" => all = true,
            "--no-loop-bounding" => loop_bounding = false,
            "--columns" => {
                let v = args.next().unwrap_or_else(|| usage());
                columns = if v == "all" {
                    None
                } else {
                    Some(
                        v.split(',')
                            .map(|c| c.trim().parse().unwrap_or_else(|_| usage()))
                            .collect(),
                    )
                };
            }
            "--format" => {
                let v = args.next().unwrap_or_else(|| usage());
                let list = v
                    .split(',')
                    .map(|f| {
                        Format::ALL
                            .iter()
                            .copied()
                            .find(|x| x.name().eq_ignore_ascii_case(f.trim()))
                            .unwrap_or_else(|| {
                                eprintln!("unknown format {f}");
                                usage()
                            })
                    })
                    .collect();
                formats = Some(list);
            }
            "-h" | "--help" => usage(),
            _ if a.starts_with('-') => usage(),
            _ if out.is_none() => out = Some(PathBuf::from(a)),
            _ => ops.push(Op::from_name(&a).unwrap_or_else(|| {
                eprintln!("unknown family {a}");
                usage()
            })),
        }
    }
    let out = out.unwrap_or_else(|| usage());
    if ops.is_empty() {
        ops.push(Op::MatVec);
    }
    let keys: Vec<KernelKey> = KernelKey::all()
        .into_iter()
        .filter(|k| ops.contains(&k.op()))
        .filter(|k| formats.as_ref().is_none_or(|f| f.contains(&k.format)))
        .filter(|k| match k.variant {
            Variant::MatVec(v) => columns.as_ref().is_none_or(|c| c.contains(&v.columns)),
            _ => true,
        })
        .filter(|k| all || k.matvec_variant().is_none_or(|v| gpu_variant(k, &v)))
        .collect();
    std::fs::create_dir_all(&out).unwrap_or_else(|e| {
        eprintln!("{}: {e}", out.display());
        std::process::exit(1)
    });
    let rows: Vec<Result<serde_json::Value, String>> = keys
        .par_iter()
        .map(|key| {
            let name = key.to_string();
            let words = spirv(key, loop_bounding).map_err(|e| format!("{name}: {e}"))?;
            let file = format!("{name}.spv");
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            std::fs::write(out.join(&file), bytes).map_err(|e| format!("{file}: {e}"))?;
            let (values, scope) = values_per_step(key);
            // Other families' keys as matvec's defaults (one column, one invocation per row).
            let v = key.matvec_variant().unwrap_or(MatVec::classic(1, 1, false));
            let dtype = match key.variant {
                Variant::GetRows(g) => g.dtype,
                _ => gguf_dequant::DType::F32,
            };
            Ok(serde_json::json!({
                "file": file,
                "variant": name,
                "family": key.op().name(),
                "format": key.format.name(),
                "columns": v.columns,
                "threads": v.threads,
                "rows": v.rows,
                "slot": v.slot,
                "vec_x": v.vec_x,
                "vec_w": v.vec_w,
                "subgroups": v.subgroups,
                "x_lanes": v.x_lanes,
                "unroll": v.unroll,
                "hw_f16": v.hw_f16,
                "reads_f16": reads_f16(key.format),
                "int_dot": v.precision == Precision::Int8,
                "precision": v.precision.name(),
                "dtype": dtype.name(),
                "entry": key.entry_point(),
                "uses_subgroups": key.uses_subgroups(),
                "values_per_step": values,
                "scope": scope,
            }))
        })
        .collect();
    let mut manifest = Vec::new();
    let mut failed = 0;
    for r in rows {
        match r {
            Ok(v) => manifest.push(v),
            Err(e) => {
                eprintln!("{e}");
                failed += 1;
            }
        }
    }
    let text = serde_json::to_string_pretty(&manifest).expect("JSON");
    std::fs::write(out.join("manifest.json"), text + "\n").unwrap_or_else(|e| {
        eprintln!("manifest.json: {e}");
        std::process::exit(1)
    });
    eprintln!(
        "[spirv] {} variants ({}) written to {}{}",
        manifest.len(),
        ops.iter().map(|o| o.name()).collect::<Vec<_>>().join(", "),
        out.display(),
        if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        }
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
