//! Each composed shader's `BLOCK_*` and `<FMT>_<FIELD>` constants, read from naga's module, equal
//! the registry and the Rust `FIELDS` table of the CPU twin; the WGSL lookup tables equal
//! `formats::tables`; each format file opens with the twin header. No GPU needed.

use gguf_dequant::formats::tables;
use gguf_dequant::gpu::shaders;
use gguf_dequant::{DType, Format};

/// Every `const` of the module whose value is a u32 literal or a vector of them, by name.
fn consts(src: &str) -> Vec<(String, Vec<u32>)> {
    let module = naga::front::wgsl::parse_str(src).expect("parses");
    let mut out = Vec::new();
    for (_, c) in module.constants.iter() {
        let Some(name) = c.name.clone() else { continue };
        let lit = |h: naga::Handle<naga::Expression>| match module.global_expressions[h] {
            naga::Expression::Literal(naga::Literal::U32(v)) => Some(v),
            _ => None,
        };
        let value = match &module.global_expressions[c.init] {
            naga::Expression::Literal(naga::Literal::U32(v)) => vec![*v],
            naga::Expression::Compose { components, .. } => {
                components.iter().filter_map(|&h| lit(h)).collect()
            }
            _ => continue,
        };
        out.push((name, value));
    }
    out
}

#[test]
fn field_and_block_constants_match_the_registry() {
    let mut failures = Vec::new();
    for &f in Format::ALL {
        let Some(src) = shaders::source(f, DType::F32) else {
            continue;
        };
        assert!(
            f.has_shader(),
            "{f}: a source, so the registry line says `shader`"
        );
        let consts = consts(src);
        let get = |n: &str| consts.iter().find(|(name, _)| name == n).map(|(_, v)| v[0]);
        if get("BLOCK_ELEMS") != Some(f.block_elems() as u32) {
            failures.push(format!(
                "{f}: BLOCK_ELEMS {:?} != {}",
                get("BLOCK_ELEMS"),
                f.block_elems()
            ));
        }
        if get("BLOCK_BYTES") != Some(f.block_bytes() as u32) {
            failures.push(format!(
                "{f}: BLOCK_BYTES {:?} != {}",
                get("BLOCK_BYTES"),
                f.block_bytes()
            ));
        }
        let prefix = format!("{}_", f.name());
        for field in f.spec().fields {
            let name = format!("{prefix}{}", field.name.to_uppercase());
            if get(&name) != Some(field.offset as u32) {
                failures.push(format!(
                    "{f}: {name} = {:?}, Rust FIELDS says {}",
                    get(&name),
                    field.offset
                ));
            }
        }
        // ... and the shader has no field constant that the Rust table lacks.
        for (name, _) in &consts {
            if let Some(field) = name.strip_prefix(&prefix) {
                if !f
                    .spec()
                    .fields
                    .iter()
                    .any(|x| x.name.eq_ignore_ascii_case(field))
                {
                    failures.push(format!("{f}: WGSL {name} is not in the Rust FIELDS"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn wgsl_tables_match_rust_tables() {
    let pack = |t: &[i8; 16]| -> Vec<u32> {
        t.chunks(4)
            .map(|c| u32::from_le_bytes([c[0] as u8, c[1] as u8, c[2] as u8, c[3] as u8]))
            .collect()
    };
    for (f, name, table) in [
        (Format::IQ4_NL, "KVALUES_IQ4NL", &tables::KVALUES_IQ4NL),
        (Format::MXFP4, "KVALUES_FP4", &tables::KVALUES_FP4),
        (Format::IQ4_XS, "KVALUES_IQ4NL", &tables::KVALUES_IQ4NL),
        (Format::NVFP4, "KVALUES_FP4", &tables::KVALUES_FP4),
    ] {
        assert!(
            f.spec()
                .gpu
                .as_ref()
                .unwrap()
                .tables
                .contains(&name.to_lowercase().as_str()),
            "{f} lists {name}"
        );
        let consts = consts(shaders::source(f, DType::F32).unwrap());
        let got = consts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone());
        assert_eq!(got, Some(pack(table)), "{f}: {name}");
    }
}

/// The i-quant grids: `shaders/tables/iq_grids.wgsl`'s word offsets equal `gpu::tables::LAYOUT`,
/// every format that reads a grid lists the file, and the uploaded words rebuild every
/// `formats::tables` grid exactly. `ksigns_iq2xs` (a popcount in `shaders/lib/iquant.wgsl`) equals
/// the Rust table for all 128 indices.
#[test]
fn wgsl_grid_layout_matches_rust_tables() {
    use gguf_dequant::gpu::tables::{words, LAYOUT, WORDS};
    let users = [
        (Format::IQ2_XXS, "IQ2XXS_GRID_AT"),
        (Format::IQ2_XS, "IQ2XS_GRID_AT"),
        (Format::IQ2_S, "IQ2S_GRID_AT"),
        (Format::IQ3_XXS, "IQ3XXS_GRID_AT"),
        (Format::IQ3_S, "IQ3S_GRID_AT"),
        (Format::IQ1_S, "IQ1S_GRID_AT"),
        (Format::IQ1_M, "IQ1S_GRID_AT"),
    ];
    for (f, name) in users {
        assert!(
            f.spec().gpu.as_ref().unwrap().tables.contains(&"iq_grids"),
            "{f} lists iq_grids"
        );
        let src = shaders::source(f, DType::F32).unwrap();
        assert!(src.contains(name), "{f} reads {name}");
        let consts = consts(src);
        for slot in LAYOUT {
            let got = consts.iter().find(|(n, _)| n == slot.wgsl_name);
            assert_eq!(
                got.map(|(_, v)| v[0]),
                Some(slot.word),
                "{f}: {}",
                slot.wgsl_name
            );
        }
    }
    let w = words();
    assert_eq!(w.len(), WORDS);
    let slice = |name: &str| {
        let s = LAYOUT.iter().find(|s| s.wgsl_name == name).unwrap();
        &w[s.word as usize..(s.word + s.words) as usize]
    };
    let u64s = |ws: &[u32]| -> Vec<u64> {
        ws.chunks(2)
            .map(|p| p[0] as u64 | (p[1] as u64) << 32)
            .collect()
    };
    assert_eq!(u64s(slice("IQ2XXS_GRID_AT")), tables::IQ2XXS_GRID);
    assert_eq!(u64s(slice("IQ2XS_GRID_AT")), tables::IQ2XS_GRID);
    assert_eq!(u64s(slice("IQ2S_GRID_AT")), tables::IQ2S_GRID);
    assert_eq!(slice("IQ3XXS_GRID_AT"), tables::IQ3XXS_GRID);
    assert_eq!(slice("IQ3S_GRID_AT"), tables::IQ3S_GRID);
    assert_eq!(u64s(slice("IQ1S_GRID_AT")), tables::IQ1S_GRID);

    let lib = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/shaders/lib/iquant.wgsl"
    ))
    .unwrap();
    assert!(
        lib.contains("return k | ((countOneBits(k) & 1u) << 7u);"),
        "ksigns_iq2xs is the popcount formula checked below"
    );
    for k in 0..128u32 {
        let formula = k | ((k.count_ones() & 1) << 7);
        assert_eq!(
            formula,
            tables::KSIGNS_IQ2XS[k as usize] as u32,
            "ksigns[{k}]"
        );
    }
}

#[test]
fn format_files_open_with_the_twin_header() {
    for &f in Format::ALL {
        let Some(stem) = f.spec().gpu.as_ref().map(|g| g.stem) else {
            continue;
        };
        let path = format!("{}/shaders/formats/{stem}.wgsl", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let first = text.lines().next().unwrap();
        let values = if f.block_elems() == 1 {
            "1 value".to_string()
        } else {
            format!("{} values", f.block_elems())
        };
        let want = format!(
            "// {} (ggml id {}): {values} in {} bytes. Spec: formats.md §",
            f.name(),
            f.id(),
            f.block_bytes()
        );
        assert!(
            first.starts_with(&want),
            "{path}: `{first}` should start with `{want}`"
        );
        let twin = first
            .split("CPU twin: ")
            .nth(1)
            .expect("names its CPU twin");
        let rust = format!("{}/{twin}", env!("CARGO_MANIFEST_DIR"));
        assert!(
            std::path::Path::new(&rust).exists(),
            "{path}: CPU twin {rust} exists"
        );
    }
}
