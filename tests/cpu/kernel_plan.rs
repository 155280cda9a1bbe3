//! The kernels' dispatch plans (`gpu::kernels::plan_mul`, `plan_get_rows`, `plan_matvec_id`),
//! without a GPU: a seeded sweep of arbitrary cases, each plan checked against every invariant
//! of `support::kernel_plan` (the fuzz target `kernel_plan` runs the same checks on a fuzzer's
//! cases), and the policy's choices on named cases.

use gguf_dequant::gpu::kernels::{
    plan_mul, Extent, Mapping, MatVecOptions, MatVecPolicy, MulCall, MulOp, MulParams, PartLayout,
    Plan, Precision, RowsShape, WeightLayout,
};
use gguf_dequant::Format;

use crate::support::kernel_plan::{case, get_rows_case, matvec_id_case, Case, Weight};
use crate::support::rng::Rng;

fn gpu_plan() -> Plan {
    Plan {
        align: 256,
        uniform_align: 256,
        max_binding: 128 << 20,
        max_dim: 65535,
        matvec: MatVecPolicy {
            mapping: Mapping::Classic,
            threads: 32,
            subgroups: Some((32, 32)),
            unroll: true,
            hw_f16: true,
            hw_f16_scales: true,
        },
        precision: Precision::Exact,
    }
}

/// A one-part weight of `format`, `k × n`, and operands of exactly `batch` columns.
fn simple(plan: Plan, format: Format, k: u64, n: u64, batch: u64, op: MulOp) -> Case {
    let bytes = k / format.block_elems() as u64 * format.block_bytes() as u64 * n;
    Case {
        plan,
        weight: Weight {
            format,
            dims: vec![k, n],
            dtype: None,
            parts: vec![PartLayout {
                range: 0..bytes,
                elements: 0..k * n,
                buffer_len: bytes.next_multiple_of(4),
            }],
        },
        batch,
        x: Extent {
            offset: 0,
            len: batch * k * 4,
        },
        y: Extent {
            offset: 0,
            len: batch * n * 4,
        },
        op,
        tuned: None,
    }
}

#[test]
fn arbitrary_cases_plan_within_every_limit() {
    let mut rng = Rng::new(0x6b65_726e_656c);
    let (mut accepted, mut groups, mut runs) = (0, 0, 0);
    for _ in 0..4000 {
        let c = case(&mut || rng.next_u64());
        if let Some(p) = c.run() {
            accepted += 1;
            groups += p.groups.len();
            runs += p.runs.len();
        }
    }
    // The sweep reaches plans of many column groups and many runs, and refusals.
    assert!(accepted > 800 && accepted < 4000, "{accepted} accepted");
    assert!(
        groups > 3 * accepted && runs > 2 * accepted,
        "{groups} {runs}"
    );
}

#[test]
fn arbitrary_gathers_and_expert_products_plan_within_every_limit() {
    let mut rng = Rng::new(0x6964_735f_706c);
    let (mut gathers, mut windows) = (0, 0);
    for _ in 0..2000 {
        if let Some(p) = get_rows_case(&mut || rng.next_u64()).run() {
            gathers += 1;
            windows += p.windows.len();
        }
    }
    assert!(
        gathers > 300 && gathers < 2000 && windows > gathers,
        "{gathers} {windows}"
    );
    let (mut experts, mut windows) = (0, 0);
    for _ in 0..2000 {
        if let Some(p) = matvec_id_case(&mut || rng.next_u64()).run() {
            experts += 1;
            windows += p.windows.len();
        }
    }
    assert!(
        experts > 300 && experts < 2000 && windows > experts,
        "{experts} {windows}"
    );
}

#[test]
fn the_policy_picks_the_mapping_and_precision() {
    let rows = RowsShape::new(128, 2).unwrap();
    let mut plan = gpu_plan();
    plan.matvec.mapping = Mapping::Rows(rows);
    let one = |plan: Plan, format, op, tuned| {
        let c = Case {
            tuned,
            ..simple(plan, format, 4096, 512, 4, op)
        };
        let p = c.run().expect("a plan");
        let g = &p.groups[0];
        (g.mapping, g.key.precision(), g.quantize.is_some())
    };
    let classic = Mapping::Classic;
    // The default, the tuner's choice, a forced variant.
    assert_eq!(
        one(plan, Format::Q4_K, MulOp::MatVec(None), None),
        (Mapping::Rows(rows), Precision::Exact, false)
    );
    assert_eq!(
        one(plan, Format::Q4_K, MulOp::MatVec(None), Some(classic)),
        (classic, Precision::Exact, false)
    );
    assert_eq!(
        one(plan, Format::Q4_K, MulOp::MatVec(Some(classic)), None),
        (classic, Precision::Exact, false)
    );
    // factored and int8 on either mapping, int8 after the quantiser.
    let factored = Plan {
        precision: Precision::Factored,
        ..plan
    };
    assert_eq!(
        one(factored, Format::Q4_K, MulOp::MatVec(None), None),
        (Mapping::Rows(rows), Precision::Factored, false)
    );
    let int8 = Plan {
        precision: Precision::Int8,
        ..plan
    };
    assert_eq!(
        one(int8, Format::Q4_K, MulOp::MatVec(None), None),
        (Mapping::Rows(rows), Precision::Int8, true)
    );
    assert_eq!(
        one(int8, Format::Q4_K, MulOp::MatVec(None), Some(classic)),
        (classic, Precision::Int8, true)
    );
    // A mode no kernel of the format honours runs exact.
    assert_eq!(
        one(int8, Format::MXFP4, MulOp::MatVec(None), None),
        (Mapping::Rows(rows), Precision::Exact, false)
    );
    // Matmul is tiled and exact on GPUs.
    let p = simple(int8, Format::Q4_K, 4096, 512, 100, MulOp::MatMul)
        .run()
        .unwrap();
    assert_eq!((p.groups.len(), p.precision), (1, Precision::Exact));
    assert!(matches!(
        p.groups[0].dispatches[0].params,
        MulParams::MatMul(m) if m.n_cols == 100
    ));
    assert_eq!(p.groups[0].dispatches[0].grid, (16, 4, 1));
}

#[test]
fn small_limits_split_columns_rows_and_grids() {
    // Matmul on a CPU adapter: matvecs of 16 columns. 1000 columns of 16 values at a binding of
    // 64 KiB: every group within one binding of x and y.
    let mut cpu = gpu_plan();
    cpu.matvec.threads = 1;
    let p = simple(cpu, Format::Q8_0, 4096, 300, 40, MulOp::MatMul)
        .run()
        .unwrap();
    let cols: Vec<u64> = p.groups.iter().map(|g| g.columns).collect();
    assert_eq!(cols, [16, 16, 8]);
    // Rows beyond one binding: several runs; workgroups beyond one grid dimension: folded.
    let small = Plan {
        max_binding: 64 << 10,
        max_dim: 3,
        ..gpu_plan()
    };
    let p = simple(small, Format::Q8_0, 4096, 300, 1, MulOp::MatVec(None))
        .run()
        .unwrap();
    // Runs of 9 rows (3 × 3 workgroups of 2 rows at most), 2 rows per workgroup: 3 × 2.
    assert_eq!(p.runs.len(), 34);
    assert_eq!(p.groups[0].dispatches[0].grid, (3, 2, 1));
    // Too long a row for the binding, too wide a matvec, a short y: typed errors.
    let tiny = Plan {
        max_binding: 1 << 10,
        ..cpu
    };
    let call_err = |c: &Case| {
        let call: MulCall<'_> = c.call();
        plan_mul(&c.plan, &call, &|_| Mapping::Classic)
            .unwrap_err()
            .to_string()
    };
    let e = call_err(&simple(tiny, Format::Q8_0, 4096, 4, 1, MulOp::MatVec(None)));
    assert!(e.contains("storage binding"), "{e}");
    let e = call_err(&simple(cpu, Format::Q8_0, 64, 4, 9, MulOp::MatVec(None)));
    assert!(e.contains("1 to 8 columns"), "{e}");
    let mut short = simple(cpu, Format::Q8_0, 64, 4, 2, MulOp::MatVec(None));
    short.y.len -= 4;
    let e = call_err(&short);
    assert!(e.starts_with("invalid GPU job: y: 8 values"), "{e}");
    let bad = Plan { align: 48, ..cpu };
    let e = call_err(&simple(bad, Format::Q8_0, 64, 4, 1, MulOp::MatVec(None)));
    assert!(e.contains("alignment 48"), "{e}");
    // A weight split inside a row.
    let mut split = simple(cpu, Format::Q8_0, 64, 4, 1, MulOp::MatVec(None));
    split.weight.parts = vec![
        PartLayout {
            range: 0..68,
            elements: 0..32,
            buffer_len: 68,
        },
        PartLayout {
            range: 0..204,
            elements: 32..256,
            buffer_len: 204,
        },
    ];
    let w: WeightLayout<'_> = split.call().weight;
    assert_eq!(w.parts.len(), 2);
    let e = call_err(&split);
    assert!(e.contains("splits a row of 64 values"), "{e}");
}

#[test]
fn the_matvec_policy_follows_the_device() {
    let policy = |options: MatVecOptions, cpu, subgroups| {
        MatVecPolicy::new(&options, cpu, subgroups, 256, true)
    };
    let default = MatVecOptions::default();
    // A CPU adapter: one invocation per row, x shared by up to 8 lanes.
    let cpu = policy(default, true, Some((4, 16))).unwrap();
    assert_eq!(
        (cpu.threads, cpu.x_lanes(), cpu.classic_subgroups()),
        (1, 4, false)
    );
    assert!(!cpu.unrolled());
    // A GPU with 32-lane subgroups: a subgroup per row, reduced through shuffles; every rows
    // shape of at least 32 invocations reduces through them too (the tuner's choices as well).
    let gpu = policy(default, false, Some((32, 32))).unwrap();
    assert_eq!((gpu.threads, gpu.x_lanes()), (32, 1));
    assert!(gpu.classic_subgroups() && gpu.unrolled());
    for w in [32, 64, 128, 256] {
        assert!(gpu.rows_subgroups(RowsShape::new(w, 2).unwrap()), "{w}");
    }
    // Subgroups of up to 64 lanes (AMD): not on a 32-invocation rows workgroup.
    let wide = policy(default, false, Some((32, 64))).unwrap();
    assert!(!wide.rows_subgroups(RowsShape::new(32, 2).unwrap()));
    assert!(wide.rows_subgroups(RowsShape::new(64, 2).unwrap()));
    // No subgroups, or the options forbid them: 64 invocations per row, workgroup memory.
    for p in [
        policy(default, false, None).unwrap(),
        policy(
            MatVecOptions {
                subgroups: false,
                ..default
            },
            false,
            Some((32, 32)),
        )
        .unwrap(),
    ] {
        assert_eq!(p.subgroups, None);
        assert!(!p.classic_subgroups() && !p.rows_subgroups(RowsShape::new(256, 1).unwrap()));
    }
    assert_eq!(policy(default, false, None).unwrap().threads, 64);
    // binary16 by the device's conversion: where the engine found it exact and the options
    // allow it: on GPUs for every format, on CPU adapters for F16 weights unless forced.
    assert!(gpu.hw_f16 && gpu.hw_f16_scales && gpu.hw_f16_for(Format::Q4_K));
    assert!(cpu.hw_f16 && !cpu.hw_f16_scales);
    assert!(cpu.hw_f16_for(Format::F16) && !cpu.hw_f16_for(Format::Q4_K));
    let hw = |on| MatVecOptions {
        hw_f16: Some(on),
        ..default
    };
    assert!(policy(hw(true), true, None).unwrap().hw_f16_scales);
    let off = policy(hw(false), false, Some((32, 32))).unwrap();
    assert!(!off.hw_f16 && !off.hw_f16_scales);
    let inexact = MatVecPolicy::new(&hw(true), false, Some((32, 32)), 256, false).unwrap();
    assert!(!inexact.hw_f16 && !inexact.hw_f16_scales);
    // Forced choices, and the ones no device can run, as one-line errors.
    let rows = Mapping::Rows(RowsShape::new(128, 2).unwrap());
    let forced = MatVecOptions {
        mapping: rows,
        threads: Some(8),
        unroll: false,
        ..default
    };
    let p = policy(forced, true, None).unwrap();
    assert_eq!((p.mapping, p.threads, p.unroll), (rows, 8, false));
    let three = MatVecOptions {
        threads: Some(3),
        ..default
    };
    assert!(policy(three, false, None)
        .unwrap_err()
        .contains("threads per row 3"));
    let big = MatVecOptions {
        mapping: Mapping::Rows(RowsShape::new(256, 1).unwrap()),
        ..default
    };
    let e = MatVecPolicy::new(&big, false, None, 128, true).unwrap_err();
    assert!(
        e.contains("rows:256x1") && e.contains("128 invocations"),
        "{e}"
    );
    // Slots (`MatVec::slot`) in the variant's name, and the ones that are no variant.
    let slotted: Mapping = "rows:64x2s4".parse().unwrap();
    let Mapping::Rows(shape) = slotted else {
        panic!("{slotted}")
    };
    assert_eq!((shape.workgroup, shape.rows, shape.slot), (64, 2, 4));
    assert_eq!(slotted.to_string(), "rows:64x2s4");
    assert_eq!(
        "128x2s1".parse::<Mapping>().unwrap().to_string(),
        "rows:128x2"
    );
    for bad in ["64x4s4", "64x2s3", "64x2s", "64x2s4x"] {
        let e = bad.parse::<Mapping>().unwrap_err();
        assert!(e.contains("WxRsS"), "{bad}: {e}");
    }
    // The slot's kernels: its name, and R and U as their rules make them.
    let mut plan = gpu_plan();
    plan.matvec.mapping = slotted;
    let key = |columns, precision, mapping| {
        plan.matvec_key(Format::Q4_K, columns, (true, false), precision, mapping)
            .unwrap()
            .to_string()
    };
    assert_eq!(
        key(1, Precision::Exact, slotted),
        "matvec.Q4_K.c1.w64.r2.s4.u1.vx.sg.hf"
    );
    assert_eq!(
        key(8, Precision::Exact, slotted),
        "matvec.Q4_K.c8.w64.r2.s4.u1.vx.sg.hf"
    );
    assert_eq!(
        plan.matvec_key(Format::BF16, 1, (true, true), Precision::Exact, slotted)
            .unwrap()
            .to_string(),
        "matvec.BF16.c1.w64.r2.s4.u1.vx.vw.sg"
    );
    assert!(plan
        .matvec
        .matvec_id_key(Format::Q4_0, true, false)
        .to_string()
        .ends_with(".hf"));
    let two = Mapping::Rows(RowsShape::new(64, 1).unwrap().with_slot(2).unwrap());
    assert_eq!(
        key(1, Precision::Int8, two),
        "matvec.Q4_K.c1.w64.r1.s2.u2.sg.int.hf"
    );
}
