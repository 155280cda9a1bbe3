//! The kernels' dispatches planned without a GPU ([`gguf_dequant::gpu::kernels::plan_mul`],
//! `plan_get_rows`, `plan_matvec_id`): arbitrary cases drawn from any source of numbers, and the
//! invariants every accepted plan keeps. Shared by the CPU tests (`tests/cpu/kernel_plan.rs`, a
//! seeded sweep) and the fuzz target (`fuzz/fuzz_targets/kernel_plan.rs`), which includes this
//! file by path: it names nothing outside `gguf_dequant`.

use gguf_dequant::gpu::kernels::{
    plan_get_rows, plan_matvec_id, plan_mul, Extent, GetRowsCall, GetRowsPlan, KernelKey, Mapping,
    MappingKey, MatVecIdCall, MatVecIdPlan, MatVecPolicy, MulCall, MulOp, MulParams, MulPlan, Op,
    PartLayout, Plan, Precision, RowRun, RowsShape, Shape, Span, WeightLayout, MATMUL_CPU_COLUMNS,
    MATMUL_TILE, MATVEC_MAX_BATCH, MATVEC_THREADS, ROWS_PER_GROUP, ROWS_SLOTS, ROWS_WORKGROUPS,
};
use gguf_dequant::{DType, Format};

/// A weight, owning what its [`WeightLayout`] borrows.
#[derive(Clone, Debug)]
pub struct Weight {
    pub format: Format,
    pub dims: Vec<u64>,
    pub dtype: Option<DType>,
    pub parts: Vec<PartLayout>,
}

impl Weight {
    /// As the planner sees it.
    pub fn layout(&self) -> WeightLayout<'_> {
        WeightLayout {
            name: "w",
            format: self.format,
            dims: &self.dims,
            n_elements: self.dims.iter().product(),
            dtype: self.dtype,
            parts: self.parts.clone(),
        }
    }
}

/// One product to plan, owning what its [`MulCall`] borrows.
#[derive(Clone, Debug)]
pub struct Case {
    /// The engine's limits and choices.
    pub plan: Plan,
    /// The weight.
    pub weight: Weight,
    /// Columns, operands, product.
    pub batch: u64,
    pub x: Extent,
    pub y: Extent,
    pub op: MulOp,
    /// The mapping the tuner chose for every key (`None`: the plan's default).
    pub tuned: Option<Mapping>,
}

impl Case {
    /// The call to plan.
    pub fn call(&self) -> MulCall<'_> {
        MulCall {
            weight: self.weight.layout(),
            batch: self.batch,
            x: self.x,
            y: self.y,
            op: self.op,
        }
    }

    /// Plans it; on success checks every invariant and returns the plan.
    pub fn run(&self) -> Option<MulPlan> {
        let call = self.call();
        let tuned = |_: MappingKey| self.tuned.unwrap_or(self.plan.matvec.mapping);
        let out = plan_mul(&self.plan, &call, &tuned).ok()?;
        check(self, &out);
        Some(out)
    }
}

/// Limits from tiny (many runs, column groups and folded grids) to a device's, and a weight of
/// any format and dtype, its parts split on rows or not, from `pick` (a number below its
/// argument).
fn plan_and_weight(pick: &mut dyn FnMut(u64) -> u64) -> (Plan, Weight) {
    let align = 4u64 << pick(7);
    let max_binding = [
        1 << 10,
        4 << 10,
        64 << 10,
        1 << 20,
        128 << 20,
        u32::MAX as u64,
    ][pick(6) as usize]
        + pick(3) * 4;
    let max_dim = [1, 2, 3, 7, 65535][pick(5) as usize];
    let threads = MATVEC_THREADS[pick(MATVEC_THREADS.len() as u64) as usize];
    let rows = (pick(2) == 0).then(|| {
        let shape = RowsShape::new(
            ROWS_WORKGROUPS[pick(ROWS_WORKGROUPS.len() as u64) as usize],
            ROWS_PER_GROUP[pick(ROWS_PER_GROUP.len() as u64) as usize],
        )
        .expect("a rows shape");
        let slot = ROWS_SLOTS[pick(ROWS_SLOTS.len() as u64) as usize];
        shape.with_slot(slot).unwrap_or(shape)
    });
    let plan = Plan {
        align,
        uniform_align: 256,
        max_binding,
        max_dim,
        matvec: MatVecPolicy {
            mapping: rows.map_or(Mapping::Classic, Mapping::Rows),
            threads,
            subgroups: match pick(4) {
                0 => None,
                n => Some((1 << n, 1 << (n + pick(3)))),
            },
            unroll: pick(2) == 0,
            hw_f16: pick(2) == 0,
            hw_f16_scales: pick(2) == 0,
        },
        precision: Precision::ALL[pick(Precision::ALL.len() as u64) as usize],
    };
    let format = Format::ALL[pick(Format::ALL.len() as u64) as usize];
    let dtype = match pick(8) {
        0 => Some(DType::F32),
        1 => Some(DType::F16),
        2 => Some(DType::BF16),
        _ => None,
    };
    let elems = format.block_elems() as u64;
    // K in whole blocks mostly, sometimes not; N from 1 to a few thousand.
    let k = match pick(4) {
        0 => pick(64) + 1,
        _ => elems * (pick(64) + 1),
    };
    let n = [1, 2, 3, 31, 64, 257, 4096][pick(7) as usize] + pick(3);
    // matvec_id's experts: a third dim, sometimes.
    let e = [1, 1, 2, 5][pick(4) as usize];
    let dims = if e > 1 { vec![k, n, e] } else { vec![k, n] };
    let n = n * e;
    let n_elements = k * n;
    let value_bytes = |e: u64| match dtype {
        Some(d) => e * d.size() as u64,
        None => e.div_ceil(elems) * format.block_bytes() as u64,
    };
    // One part, or parts of whole rows (or, rarely, a boundary inside a row).
    let mut parts = Vec::new();
    let mut e0 = 0;
    let splits = pick(3);
    while e0 < n_elements {
        let rows_here = if splits == 0 { n } else { pick(n) + 1 };
        let mut e1 = (e0 + rows_here * k).min(n_elements);
        if pick(16) == 0 && e1 < n_elements {
            e1 = (e1 + elems).min(n_elements);
        }
        let start = align * pick(3);
        let bytes = value_bytes(e1 - e0);
        parts.push(PartLayout {
            range: start..start + bytes,
            elements: e0..e1,
            buffer_len: (start + bytes).next_multiple_of(4) + pick(2) * 64,
        });
        e0 = e1;
    }
    (
        plan,
        Weight {
            format,
            dims,
            dtype,
            parts,
        },
    )
}

/// A product from `next`, a source of numbers (a seeded PRNG, or a fuzzer's bytes): operand
/// offsets aligned or not, buffers just long enough or short.
pub fn case(next: &mut dyn FnMut() -> u64) -> Case {
    let mut pick = |n: u64| next() % n.max(1);
    let (plan, w) = plan_and_weight(&mut pick);
    let (k, n) = (w.dims[0], w.dims[1..].iter().product::<u64>());
    let rows = match plan.matvec.mapping {
        Mapping::Rows(shape) => Some(shape),
        Mapping::Classic => None,
    };
    let batch = match pick(3) {
        0 => pick(MATVEC_MAX_BATCH as u64 + 2),
        1 => pick(40) + 1,
        _ => pick(600) + 1,
    };
    let mut operand = |values: u64| {
        let offset = if pick(8) == 0 { pick(64) } else { pick(4) * 4 };
        let len = offset + values * 4 + if pick(10) == 0 { 0 } else { pick(3) * 4 };
        Extent {
            offset,
            len: if pick(16) == 0 {
                len.saturating_sub(4)
            } else {
                len
            },
        }
    };
    let x = operand(batch * k);
    let y = operand(batch * n);
    let op = match pick(3) {
        0 => MulOp::MatMul,
        1 => MulOp::MatVec(None),
        _ => MulOp::MatVec(Some(match rows {
            Some(r) if pick(2) == 0 => Mapping::Rows(r),
            _ => Mapping::Classic,
        })),
    };
    let tuned = match pick(3) {
        0 => Some(Mapping::Classic),
        1 => rows.map(Mapping::Rows),
        _ => None,
    };
    Case {
        plan,
        weight: w,
        batch,
        x,
        y,
        op,
        tuned,
    }
}

/// An operand of `values` 4-byte values: at an offset aligned or not (sometimes not even to 4),
/// in a buffer just long enough, longer, or short by one value.
fn operand(pick: &mut dyn FnMut(u64) -> u64, values: u64) -> Extent {
    let offset = if pick(8) == 0 { pick(64) } else { pick(4) * 4 };
    let len = offset + values * 4 + if pick(10) == 0 { 0 } else { pick(3) * 4 };
    Extent {
        offset,
        len: if pick(16) == 0 {
            len.saturating_sub(4)
        } else {
            len
        },
    }
}

/// `s` is a binding of `count` elements from element `first` of `e`, within the buffer and one
/// binding, at an aligned offset.
fn check_span(plan: &Plan, e: Extent, s: Span, first: u64, count: u64, what: &str) {
    assert_eq!(s.offset % plan.align, 0, "{what}: offset {s:?}");
    assert_eq!(
        s.offset + s.skip as u64 * 4,
        e.offset + first * 4,
        "{what}: {s:?}"
    );
    assert_eq!(s.size, s.skip as u64 * 4 + count * 4, "{what}: {s:?}");
    assert!(s.offset + s.size <= e.len, "{what}: {s:?} passes {e:?}");
    assert!(
        s.size <= plan.max_binding,
        "{what}: {s:?} over the binding limit"
    );
}

/// The runs tile the rows in order, each whole rows inside its part's buffer and one binding.
fn check_runs(plan: &Plan, w: &Weight, s: &Shape, runs: &[RowRun]) {
    let mut next = 0;
    for r in runs {
        assert_eq!(r.first, next, "runs out of order: {runs:?}");
        assert!(r.count > 0);
        let part = &w.parts[r.part];
        assert_eq!(r.offset % plan.align, 0, "{r:?}");
        assert!(
            r.offset + r.size <= part.buffer_len,
            "{r:?} passes {part:?}"
        );
        assert!(r.size <= plan.max_binding, "{r:?}");
        assert!(r.skip + r.count * s.row_bytes <= r.size + 3, "{r:?}");
        // Every block starts as far into a word as its format's size allows (a multiple of 4
        // bytes for Q4_K's 144, of 2 for Q6_K's 210): the decoders' word and u16 loads
        // (shaders/lib/bytes.wgsl) rely on it.
        let a = match s.format.block_bytes() % 4 {
            0 => 4,
            2 => 2,
            _ => 1,
        };
        assert_eq!((r.skip % a, s.row_bytes % a), (0, 0), "{r:?} {s:?}");
        assert!(part.elements.start <= r.first * s.k, "{r:?} {part:?}");
        assert!(
            (r.first + r.count) * s.k <= part.elements.end.next_multiple_of(s.k),
            "{r:?}"
        );
        next = r.first + r.count;
    }
    assert_eq!(next, s.rows, "runs end before the last row");
}

/// Every invariant of an accepted plan of `c`.
pub fn check(c: &Case, p: &MulPlan) {
    let plan = &c.plan;
    let s = p.shape;
    let (tiled, max_cols) = match c.op {
        MulOp::MatVec(_) => (false, MATVEC_MAX_BATCH as u64),
        MulOp::MatMul if plan.matvec.threads > 1 => (true, u64::MAX),
        MulOp::MatMul => (false, MATMUL_CPU_COLUMNS as u64),
    };
    check_runs(plan, &c.weight, &s, &p.runs);
    // The column groups tile the columns in order.
    let honoured = plan.precision.honoured(Op::MatVec, s.format, s.k);
    let mut col = 0;
    for g in &p.groups {
        assert_eq!(g.first, col);
        assert!(
            g.columns > 0 && g.columns <= max_cols,
            "{} columns",
            g.columns
        );
        col += g.columns;
        check_span(plan, c.x, g.x, g.first * s.k, g.columns * s.k, "x");
        let key: &KernelKey = &g.key;
        assert_eq!(key.format, s.format);
        if tiled {
            assert_eq!(key.op(), Op::MatMul);
            assert_eq!(key.precision(), Precision::Exact);
        } else {
            assert_eq!(key.op(), Op::MatVec);
            let v = key.matvec_variant().unwrap();
            assert_eq!(v.columns as u64, g.columns);
            // The policy: the mode honoured, never a looser one; matmul's wide matvecs on the
            // classic mapping; otherwise the forced, tuned or default mapping.
            assert!(
                v.precision == honoured || v.precision == Precision::Exact,
                "{key:?} vs {honoured}"
            );
            assert_eq!(p.precision, honoured);
            let asked = match c.op {
                MulOp::MatVec(Some(m)) => m,
                _ => c.tuned.unwrap_or(plan.matvec.mapping),
            };
            let classic = g.columns > MATVEC_MAX_BATCH as u64;
            assert_eq!(g.mapping, if classic { Mapping::Classic } else { asked });
            assert_eq!(v.rows > 0, matches!(g.mapping, Mapping::Rows(_)));
            if let Mapping::Rows(shape) = g.mapping {
                assert_eq!((v.threads, v.slot), (shape.workgroup, shape.slot), "{key}");
                assert!(v.rows * v.slot <= 8 && v.rows * v.columns <= 16, "{key}");
            }
            // The policy's reductions and shared reads of x, as the device's subgroups allow.
            let (subgroups, lanes) = match g.mapping {
                Mapping::Rows(shape) => (plan.matvec.rows_subgroups(shape), 1),
                Mapping::Classic => (plan.matvec.classic_subgroups(), plan.matvec.x_lanes()),
            };
            assert_eq!(v.subgroups, subgroups, "{key}");
            assert!(v.x_lanes == lanes || v.x_lanes == 1, "{key}");
        }
        match g.quantize {
            Some(q) => {
                assert_eq!(key.precision(), Precision::Int8);
                assert_eq!(q.blocks * 32, g.columns * s.k);
                assert!(q.bytes <= plan.max_binding, "{q:?}");
                assert!(q.grid.0 as u64 <= plan.max_dim && q.grid.1 as u64 <= plan.max_dim);
                assert!(q.grid.0 as u64 * q.grid.1 as u64 * 64 >= q.blocks);
            }
            None => assert_ne!(key.precision(), Precision::Int8),
        }
        assert_eq!(g.dispatches.len(), p.runs.len());
        for (i, d) in g.dispatches.iter().enumerate() {
            assert_eq!(d.run, i);
            let r = &p.runs[i];
            check_span(
                plan,
                c.y,
                d.y,
                g.first * s.rows + r.first,
                (g.columns - 1) * s.rows + r.count,
                "y",
            );
            let (gx, gy, gz) = d.grid;
            assert!(gx >= 1 && gy >= 1 && gz == 1, "{:?}", d.grid);
            assert!(
                gx as u64 <= plan.max_dim && gy as u64 <= plan.max_dim,
                "{:?}",
                d.grid
            );
            match d.params {
                MulParams::MatMul(m) => {
                    assert!(tiled);
                    assert_eq!((m.k as u64, m.n_rows as u64), (s.k, r.count));
                    assert_eq!((m.row_bytes as u64, m.w_skip as u64), (s.row_bytes, r.skip));
                    assert_eq!((m.x_skip, m.y_skip), (g.x.skip, d.y.skip));
                    assert_eq!((m.y_stride as u64, m.n_cols as u64), (s.rows, g.columns));
                    let tile = MATMUL_TILE as u64;
                    assert!(gx as u64 * tile >= r.count && gy as u64 * tile >= g.columns);
                }
                MulParams::MatVec(m) => {
                    assert!(!tiled);
                    assert_eq!((m.k as u64, m.n_rows as u64), (s.k, r.count));
                    assert_eq!((m.row_bytes as u64, m.w_skip as u64), (s.row_bytes, r.skip));
                    assert_eq!((m.x_skip, m.y_skip), (g.x.skip, d.y.skip));
                    assert_eq!(m.y_stride as u64, s.rows);
                    let per_group = key.rows_per_group() as u64;
                    assert!(gx as u64 * gy as u64 * per_group >= r.count, "{:?}", d.grid);
                }
            }
        }
    }
    assert_eq!(col, c.batch, "column groups end before the last column");
}

/// One row gather to plan.
#[derive(Clone, Debug)]
pub struct GetRowsCase {
    pub plan: Plan,
    pub weight: Weight,
    pub dtype: DType,
    pub n_ids: u64,
    pub ids: Extent,
    pub out: Extent,
}

/// A row gather from `next`.
pub fn get_rows_case(next: &mut dyn FnMut() -> u64) -> GetRowsCase {
    let mut pick = |n: u64| next() % n.max(1);
    let (plan, weight) = plan_and_weight(&mut pick);
    let dtype = DType::ALL[pick(DType::ALL.len() as u64) as usize];
    let n_ids = [0, 1, 3, 100, 5000][pick(5) as usize] + pick(3);
    let ids = operand(&mut pick, n_ids);
    let bytes = n_ids * weight.dims[0] * dtype.size() as u64;
    let offset = [0, 16, plan.align, plan.align * 3][pick(4) as usize];
    let len = offset + bytes.next_multiple_of(16) + [0, 0, 16, 4096][pick(4) as usize];
    let out = Extent {
        offset,
        len: if pick(16) == 0 {
            len.saturating_sub(16)
        } else {
            len
        },
    };
    GetRowsCase {
        plan,
        weight,
        dtype,
        n_ids,
        ids,
        out,
    }
}

impl GetRowsCase {
    /// Plans it; on success checks every invariant and returns the plan.
    pub fn run(&self) -> Option<GetRowsPlan> {
        let call = GetRowsCall {
            weight: self.weight.layout(),
            dtype: self.dtype,
            n_ids: self.n_ids,
            ids: self.ids,
            out: self.out,
        };
        let p = plan_get_rows(&self.plan, &call).ok()?;
        let (plan, s) = (&self.plan, p.shape);
        assert_eq!(p.key.op(), Op::GetRows);
        if self.n_ids == 0 {
            assert!(p.windows.is_empty());
            return Some(p);
        }
        check_runs(plan, &self.weight, &s, &p.runs);
        let row_out = s.k * self.dtype.size() as u64;
        let mut next = 0;
        for w in &p.windows {
            let n = w.dispatches[0].params.n_out as u64 / s.k;
            assert!(n > 0);
            check_span(plan, self.ids, w.ids, next, n, "ids");
            assert_eq!(w.out.0, self.out.offset + next * row_out);
            assert_eq!(w.out.0 % plan.align.max(16), 0, "{w:?}");
            assert_eq!(w.out.1, (n * row_out).next_multiple_of(16));
            assert!(
                w.out.0 + w.out.1 <= self.out.len,
                "{w:?} passes {:?}",
                self.out
            );
            assert!(w.out.1 <= plan.max_binding, "{w:?}");
            let groups = w.grid.0 as u64 * w.grid.1 as u64;
            assert!(w.grid.0 as u64 <= plan.max_dim && w.grid.1 as u64 <= plan.max_dim);
            assert!(groups * 64 * 8 >= n * s.k, "{w:?}");
            assert_eq!(w.dispatches.len(), p.runs.len());
            for (i, d) in w.dispatches.iter().enumerate() {
                let r = &p.runs[i];
                assert_eq!(d.run, i);
                let q = &d.params;
                assert_eq!((q.row_first as u64, q.row_count as u64), (r.first, r.count));
                assert_eq!((q.w_skip as u64, q.ids_skip), (r.skip, w.ids.skip));
                assert_eq!((q.k as u64, q.row_bytes as u64), (s.k, s.row_bytes));
                assert_eq!(q.n_out as u64, n * s.k);
            }
            next += n;
        }
        assert_eq!(next, self.n_ids, "windows end before the last id");
        Some(p)
    }
}

/// One `MUL_MAT_ID` to plan.
#[derive(Clone, Debug)]
pub struct MatVecIdCase {
    pub plan: Plan,
    pub weight: Weight,
    pub tokens: u64,
    pub slots: u64,
    pub x_per_slot: bool,
    pub x: Extent,
    pub ids: Extent,
    pub y: Extent,
}

/// A `MUL_MAT_ID` from `next`.
pub fn matvec_id_case(next: &mut dyn FnMut() -> u64) -> MatVecIdCase {
    let mut pick = |n: u64| next() % n.max(1);
    let (plan, weight) = plan_and_weight(&mut pick);
    let (k, n) = (weight.dims[0], weight.dims.get(1).copied().unwrap_or(1));
    let tokens = [0, 1, 2, 7, 300][pick(5) as usize];
    let slots = pick(5);
    let x_per_slot = pick(2) == 0;
    let x_rows = if x_per_slot { tokens * slots } else { tokens };
    let x = operand(&mut pick, x_rows * k);
    let ids = operand(&mut pick, tokens * slots);
    let y = operand(&mut pick, tokens * slots * n);
    MatVecIdCase {
        plan,
        weight,
        tokens,
        slots,
        x_per_slot,
        x,
        ids,
        y,
    }
}

impl MatVecIdCase {
    /// Plans it; on success checks every invariant and returns the plan.
    pub fn run(&self) -> Option<MatVecIdPlan> {
        let call = MatVecIdCall {
            weight: self.weight.layout(),
            tokens: self.tokens,
            slots: self.slots,
            x_per_slot: self.x_per_slot,
            x: self.x,
            ids: self.ids,
            y: self.y,
        };
        let p = plan_matvec_id(&self.plan, &call).ok()?;
        let (plan, s) = (&self.plan, p.shape);
        let pairs = self.tokens * self.slots;
        assert!(self.slots > 0);
        if pairs == 0 {
            assert!(p.windows.is_empty());
            return Some(p);
        }
        assert_eq!(p.key.op(), Op::MatVecId);
        assert_eq!(p.key.format, s.format);
        check_runs(plan, &self.weight, &s, &p.runs);
        let n = self.weight.dims[1];
        let x_rows = if self.x_per_slot { pairs } else { self.tokens };
        check_span(plan, self.x, p.x, 0, x_rows * s.k, "x");
        let per_group = p.key.rows_per_group() as u64;
        let mut next = 0;
        for w in &p.windows {
            let np = w.grid.2 as u64;
            assert!(np > 0 && np <= plan.max_dim);
            check_span(plan, self.ids, w.ids, next, np, "ids");
            check_span(plan, self.y, w.y, next * n, np * n, "y");
            assert!(w.grid.0 as u64 <= plan.max_dim && w.grid.1 as u64 <= plan.max_dim);
            assert!(w.grid.0 as u64 * w.grid.1 as u64 * per_group >= n, "{w:?}");
            assert_eq!(w.dispatches.len(), p.runs.len());
            for (i, (run, q)) in w.dispatches.iter().enumerate() {
                let r = &p.runs[i];
                assert_eq!(*run, i);
                assert_eq!((q.row_first as u64, q.row_count as u64), (r.first, r.count));
                assert_eq!((q.pair_first as u64, q.slots as u64), (next, self.slots));
                assert_eq!((q.n_rows as u64, q.y_stride as u64), (n, n));
                assert_eq!(
                    (q.x_skip, q.y_skip, q.ids_skip),
                    (p.x.skip, w.y.skip, w.ids.skip)
                );
                assert_eq!(q.n_experts as u64 * n, s.rows);
            }
            next += np;
        }
        assert_eq!(next, pairs, "windows end before the last pair");
        Some(p)
    }
}
