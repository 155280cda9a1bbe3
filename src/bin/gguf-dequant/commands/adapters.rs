//! `adapters`: every GPU adapter wgpu sees, with the limits and capabilities that matter here
//! (subgroup sizes, `shader-f16`, 16-bit integers, cooperative-matrix shapes), each compute
//! adapter numbered as `load --devices` takes it (`[-]`: no compute shaders).

use std::io::Write;

use anyhow::Result;
use gguf_dequant::gpu;
use serde_json::json;

use crate::args::AdaptersArgs;
use crate::render;

/// Lists the adapters as text or JSON.
pub fn run(args: &AdaptersArgs) -> Result<()> {
    let adapters = gpu::list_adapters();
    if args.json {
        let list: Vec<_> = adapters
            .iter()
            .map(|a| {
                let c = &a.capabilities;
                json!({
                    "index": a.index,
                    "name": a.info.name,
                    "backend": a.info.backend.to_string().to_lowercase(),
                    "device_type": format!("{:?}", a.info.device_type),
                    "driver": a.info.driver,
                    "driver_info": a.info.driver_info,
                    "compute": a.compute,
                    "max_storage_buffer_binding_size": a.limits.max_storage_buffer_binding_size,
                    "max_buffer_size": a.limits.max_buffer_size,
                    "min_storage_buffer_offset_alignment": a.limits.min_storage_buffer_offset_alignment,
                    "max_compute_workgroups_per_dimension": a.limits.max_compute_workgroups_per_dimension,
                    "max_compute_workgroup_storage_size": a.limits.max_compute_workgroup_storage_size,
                    "max_compute_invocations_per_workgroup": a.limits.max_compute_invocations_per_workgroup,
                    "subgroups": c.subgroups.is_some(),
                    "subgroup_min_size": a.info.subgroup_min_size,
                    "subgroup_max_size": a.info.subgroup_max_size,
                    "shader_f16": c.shader_f16,
                    "shader_i16": c.shader_i16,
                    "cooperative_matrices": c.cooperative_matrix_names(),
                })
            })
            .collect();
        return render::print_json(&json!({ "adapters": list }));
    }
    let mut out = render::stdout();
    if adapters.is_empty() {
        writeln!(out, "no GPU adapters found: {}", crate::hint::no_adapter())?;
    }
    for a in &adapters {
        let l = &a.limits;
        let index = a.index.map_or("-".to_string(), |i| i.to_string());
        writeln!(
            out,
            "[{index}] {} ({:?}, {:?})",
            a.info.name, a.info.backend, a.info.device_type
        )?;
        writeln!(
            out,
            "  driver:                {} {}",
            a.info.driver, a.info.driver_info
        )?;
        writeln!(
            out,
            "  compute shaders:       {}",
            if a.compute { "yes" } else { "no" }
        )?;
        writeln!(
            out,
            "  storage binding:       {} bytes",
            l.max_storage_buffer_binding_size
        )?;
        writeln!(out, "  buffer:                {} bytes", l.max_buffer_size)?;
        writeln!(
            out,
            "  offset alignment:      {} bytes",
            l.min_storage_buffer_offset_alignment
        )?;
        writeln!(
            out,
            "  workgroups per dim:    {}",
            l.max_compute_workgroups_per_dimension
        )?;
        writeln!(
            out,
            "  workgroup storage:     {} bytes",
            l.max_compute_workgroup_storage_size
        )?;
        let c = &a.capabilities;
        writeln!(
            out,
            "  invocations:           {} per workgroup",
            l.max_compute_invocations_per_workgroup
        )?;
        let lanes = match c.subgroups {
            Some((lo, hi)) if lo == hi => format!("{lo} lanes"),
            Some((lo, hi)) => format!("{lo}-{hi} lanes"),
            None => "none".to_string(),
        };
        writeln!(out, "  subgroups:             {lanes}")?;
        let yes = |b: bool| if b { "yes" } else { "no" };
        writeln!(
            out,
            "  shader-f16, int16:     {}, {}",
            yes(c.shader_f16),
            yes(c.shader_i16)
        )?;
        let coop = c.cooperative_matrix_names();
        writeln!(
            out,
            "  cooperative matrices:  {}",
            if coop.is_empty() {
                "none".to_string()
            } else {
                coop.join(", ")
            }
        )?;
    }
    out.flush()?;
    Ok(())
}
