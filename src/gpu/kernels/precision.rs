//! The precision contract of the kernels that sum (matvec, and matmul where it runs as matvecs):
//! named modes, each with its CPU twin in [`crate::ops`] and its stated bound against the f64
//! reference. A mode a kernel cannot honour falls back to [`Precision::Exact`] (the tightest
//! bound), never to a looser mode; [`Precision::honoured`] says which mode a call gets.

use super::{int_dot_min, Op};
use crate::Format;

/// How a kernel that sums may compute: the arithmetic, and with it the bound its results hold
/// against the f64 reference ([`crate::ops::reference_in`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Every weight decoded to its f32 value (bit-exact with the CPU codec), then multiplied and
    /// summed in f32: `|y − y_ref| ≤ K·2⁻²³·Σ|w·x| + K·2⁻¹²⁵` ([`crate::ops::mul_mat`]).
    #[default]
    Exact,
    /// Block and sub-block scales taken out of the inner sums, as llama.cpp computes: per
    /// 8-value part of a weight (values `d·q + m`, q small integers), `d·Σ q·x + m·Σ x` in f32.
    /// The offset term can cancel the scaled values, so the bound is over
    /// `Σ(|w| + 2·|m|)·|x|`, not `Σ|w·x|` ([`crate::ops::mul_mat_factored`]). matvec of the
    /// formats of [`super::INT_DOT_FORMATS`].
    Factored,
    /// x quantised to int8 per 32 values and each part's codes dotted with x's through
    /// `dot4I8Packed`, as llama.cpp's `mmvq` ([`crate::ops::mul_mat_int_dot`]). matvec of the
    /// formats of [`super::INT_DOT_FORMATS`] with K a multiple of 32.
    Int8,
    /// Reserved for tensor-core matmul (f16 operands, f32 sums): no kernel honours it yet, so
    /// every call falls back to `exact`.
    Mixed16,
}

impl Precision {
    /// Every mode, in order of their names.
    pub const ALL: [Precision; 4] = [
        Precision::Exact,
        Precision::Factored,
        Precision::Int8,
        Precision::Mixed16,
    ];

    /// The mode's name: `exact`, `factored`, `int8` or `mixed16`.
    pub const fn name(self) -> &'static str {
        match self {
            Precision::Exact => "exact",
            Precision::Factored => "factored",
            Precision::Int8 => "int8",
            Precision::Mixed16 => "mixed16",
        }
    }

    /// The mode a matvec row of `op` on a weight of `format` with `k` values per row gets when
    /// this one is asked for: this one where a kernel honours it, else [`Precision::Exact`].
    /// `factored` and `int8` need a format whose parts are `d·q + m` (a `qpart8` decoder:
    /// [`super::INT_DOT_FORMATS`]) and op `matvec` (also `matmul` on adapters that run it as
    /// matvecs); `int8` also K a multiple of 32 (x's quantisation blocks); `mixed16` none yet.
    pub const fn honoured(self, op: Op, format: Format, k: u64) -> Precision {
        let parts = matches!(op, Op::MatVec | Op::MatMul) && int_dot_min(format).is_some();
        match self {
            Precision::Factored if parts => Precision::Factored,
            Precision::Int8 if parts && k.is_multiple_of(32) => Precision::Int8,
            _ => Precision::Exact,
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    /// A mode's name ([`Precision::name`]), in any case.
    fn from_str(s: &str) -> Result<Precision, String> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<_> = Precision::ALL.iter().map(|p| p.name()).collect();
                format!("precision '{s}': expected one of {}", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Precision::ALL {
            assert_eq!(p.to_string().parse::<Precision>(), Ok(p));
            assert_eq!(p.name().to_uppercase().parse::<Precision>(), Ok(p));
        }
        let e = "fast".parse::<Precision>().unwrap_err();
        assert!(e.contains("exact, factored, int8, mixed16"), "{e}");
        assert_eq!(Precision::default(), Precision::Exact);
    }

    #[test]
    fn modes_fall_back_to_exact_only() {
        use Precision::*;
        let h = |p: Precision, op, f| p.honoured(op, f, 4096);
        assert_eq!(h(Factored, Op::MatVec, Format::Q4_K), Factored);
        assert_eq!(h(Factored, Op::MatMul, Format::Q8_0), Factored);
        assert_eq!(h(Int8, Op::MatVec, Format::Q6_K), Int8);
        // No parts of d·q + m: f32 values, MXFP4 (no qpart8), or another kernel.
        assert_eq!(h(Factored, Op::MatVec, Format::F16), Exact);
        assert_eq!(h(Int8, Op::MatVec, Format::MXFP4), Exact);
        assert_eq!(h(Factored, Op::MatVecId, Format::Q4_K), Exact);
        assert_eq!(h(Factored, Op::GetRows, Format::Q4_K), Exact);
        // x quantised per 32 values.
        assert_eq!(Int8.honoured(Op::MatVec, Format::Q4_0, 4096 + 16), Exact);
        assert_eq!(h(Mixed16, Op::MatMul, Format::F16), Exact);
        for p in Precision::ALL {
            assert_eq!(h(p, Op::MatVec, Format::BF16), Exact);
        }
    }
}
