//! A time budget per measurement, so that a run of every format finishes in minutes on an
//! adapter where one call takes seconds (a 32-column matmul of a 151 936-row weight on lavapipe),
//! and is unchanged where calls are fast.
//!
//! A measurement times `runs` runs, each over `units` distinct buffer pairs or weight copies
//! (the rotation), after `warmup` untimed runs. With a budget of `b` seconds, a first run over a
//! single unit is thrown away (the first dispatch of a kernel pays for its compilation where the
//! driver compiles lazily, as llvmpipe does: up to a second for an unrolled k-quant matvec, which
//! a probe that counted it took for the call's own time), then one untimed probe run over a
//! single unit estimates `t`, the seconds of one unit. If the whole
//! measurement fits (`t × units × (warmup + runs) ≤ b`) it runs as planned. Otherwise the probe
//! stands for the warm-up and the measurement shrinks to fit: first the rotation (the fewest
//! units that [`BUDGET_MIN_RUNS`] runs fill the budget with, at least 1), then the runs (as many
//! as the budget holds, between [`BUDGET_MIN_RUNS`] and `runs`). Where even
//! [`BUDGET_MIN_RUNS`] runs of one unit would pass the budget, the probe itself is the
//! measurement (one run, reported as such): a call of a third of a second or more (a 32-column
//! matmul of a 151 936-row weight takes seconds on lavapipe) varies far less from run to run
//! than further runs are worth. So a measurement takes at most about 4/3 of the budget after the
//! thrown-away first call, or two calls where that is longer. A shrunk rotation matters little: a unit that takes a sizeable
//! share of a second reads far more than any cache holds for that long.

use super::timing::median_of;
use crate::gpu::timing::Timing;
use crate::Result;

/// Seconds one measurement may take by default ([`crate::bench::BenchConfig::budget`]).
pub const DEFAULT_BUDGET: f64 = 1.0;

/// The fewest timed runs of a measurement the budget has shrunk (the median of three), unless
/// that many runs of one unit would pass the budget (then the probe alone).
pub const BUDGET_MIN_RUNS: usize = 3;

/// How a measurement runs: units per timed run, untimed and timed runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Units (buffer pairs, weight copies) each run goes through.
    pub units: usize,
    /// Untimed runs first.
    pub warmup: usize,
    /// Timed runs.
    pub runs: usize,
}

/// The plan for `units`, `warmup` and `runs` within `budget` seconds, given `unit_seconds`
/// (seconds per unit, from the probe). `runs == 0`: the probe is the measurement.
pub fn plan(budget: f64, unit_seconds: f64, units: usize, warmup: usize, runs: usize) -> Plan {
    let units = units.max(1);
    let t = unit_seconds.max(0.0);
    if t * (units * (warmup + runs)) as f64 <= budget {
        return Plan {
            units,
            warmup,
            runs,
        };
    }
    let min_runs = BUDGET_MIN_RUNS.min(runs);
    if t * min_runs as f64 > budget && t.is_finite() {
        return Plan {
            units: 1,
            warmup: 0,
            runs: 0,
        };
    }
    // Whole counts that fit; a NaN or infinite estimate (a broken timer) gives the minimum.
    let fit = |x: f64| {
        if x.is_finite() {
            x.max(0.0) as usize
        } else {
            0
        }
    };
    let units = fit(budget / (t * min_runs.max(1) as f64)).clamp(1, units);
    let runs = fit(budget / (t * units as f64)).clamp(min_runs, runs);
    Plan {
        units,
        warmup: 0,
        runs,
    }
}

/// What one measurement gave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// Median seconds per unit.
    pub seconds: f64,
    /// How the runs were timed.
    pub timing: Timing,
    /// How it ran.
    pub plan: Plan,
}

/// Median seconds per unit of `run(n)` (one run over the first `n` units, returning its seconds
/// per unit), planned for `units`, `warmup` and `runs` within `budget` seconds (`None`: as
/// planned, no probe; else a first run thrown away, then the probe).
pub fn measure(
    budget: Option<f64>,
    units: usize,
    warmup: usize,
    runs: usize,
    mut run: impl FnMut(usize) -> Result<(f64, Timing)>,
) -> Result<Measured> {
    let plan = match budget {
        None => Plan {
            units: units.max(1),
            warmup,
            runs,
        },
        Some(b) => {
            run(1)?; // compiles and first touches; not what a call costs
            let (t, timing) = run(1)?;
            let plan = plan(b, t, units, warmup, runs);
            if plan.runs == 0 {
                return Ok(Measured {
                    seconds: t,
                    timing,
                    plan: Plan { runs: 1, ..plan },
                });
            }
            plan
        }
    };
    let (seconds, timing) = median_of(plan.warmup, plan.runs, || run(plan.units))?;
    Ok(Measured {
        seconds,
        timing,
        plan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_as_planned() {
        // 29 units of 1 ms, 1 + 7 runs: 0.232 s.
        assert_eq!(
            plan(1.0, 1e-3, 29, 1, 7),
            Plan {
                units: 29,
                warmup: 1,
                runs: 7
            }
        );
        assert_eq!(plan(1.0, 0.0, 1024, 1, 7).units, 1024);
    }

    #[test]
    fn shrinks_rotation_then_runs() {
        // 29 units of 30 ms (7 s as planned): 11 units fill 1 s three times, then 3 runs.
        assert_eq!(
            plan(1.0, 0.03, 29, 1, 7),
            Plan {
                units: 11,
                warmup: 0,
                runs: 3
            }
        );
        // 6 units of 0.1 s: 3 units, 3 runs.
        assert_eq!(plan(1.0, 0.1, 6, 1, 7).units, 3);
        // Few units, each short: all units, as many runs as fit.
        assert_eq!(
            plan(1.0, 0.05, 2, 1, 20),
            Plan {
                units: 2,
                warmup: 0,
                runs: 10
            }
        );
    }

    #[test]
    fn a_long_unit_is_the_probe_alone() {
        for t in [3.3, 0.9, 0.34] {
            let p = plan(1.0, t, 4, 1, 7);
            assert_eq!((p.units, p.warmup, p.runs), (1, 0, 0), "{t}");
        }
        // Three runs of one unit fit: one unit, the fewest runs.
        let p = plan(1.0, 0.3, 4, 1, 7);
        assert_eq!((p.units, p.warmup, p.runs), (1, 0, BUDGET_MIN_RUNS));
        // A broken estimate never means zero units, nor the probe alone: infinite, the
        // fewest; NaN, as planned.
        let p = plan(1.0, f64::INFINITY, 5, 1, 7);
        assert_eq!((p.units, p.runs), (1, BUDGET_MIN_RUNS));
        let p = plan(1.0, f64::NAN, 5, 1, 7);
        assert_eq!((p.units, p.runs), (5, 7));
        // Fewer runs asked than the minimum: those.
        assert_eq!(plan(1.0, 0.4, 1, 1, 2).runs, 2);
    }

    #[test]
    fn measure_runs_the_plan() {
        // The first call compiles (5 s): thrown away, the probe is the second.
        let mut calls = Vec::new();
        let m = measure(Some(1.0), 29, 1, 7, |n| {
            calls.push(n);
            Ok((if calls.len() == 1 { 5.0 } else { 0.03 }, Timing::Wall))
        })
        .unwrap();
        assert_eq!(m.plan.units, 11);
        assert_eq!(calls, [1, 1, 11, 11, 11]);
        assert_eq!(m.seconds, 0.03);
        let mut calls = Vec::new();
        measure(None, 4, 1, 5, |n| {
            calls.push(n);
            Ok((1.0, Timing::Wall))
        })
        .unwrap();
        assert_eq!(calls, [4; 6]);
        // A unit past the budget: the probe's figure, one run.
        let mut calls = Vec::new();
        let m = measure(Some(1.0), 4, 1, 7, |n| {
            calls.push(n);
            Ok((if calls.len() == 1 { 9.0 } else { 2.5 }, Timing::Timestamp))
        })
        .unwrap();
        assert_eq!(calls, [1, 1]);
        assert_eq!(
            (m.seconds, m.timing, m.plan.runs),
            (2.5, Timing::Timestamp, 1)
        );
    }
}
