//! The kernel families, one file each: its variant type (an arm of [`Variant`](super::Variant):
//! [`get_rows::GetRows`], [`matvec::MatVec`] (matvec_id's too), [`matmul::MatMul`]), its
//! constructors and rules on [`KernelKey`](super::KernelKey), the variants it compiles (`keys`),
//! its group-0 bindings (`BINDINGS`, numbered by the family), its WGSL composition (`source`)
//! and its dispatch plan, pure (no wgpu). A new variant of a
//! family is a field of its type (with its default, its rule and its name in the type's
//! `Display`), its WGSL and its plan, in that family's file; [`KernelKey::all`](super::KernelKey::all),
//! [`super::kernel_source`], the ABI and shader-validation tests and the recorder reach it through
//! the family.
//!
//! * [`get_rows`]: rows by id, bit-exact, as f32, f16 or bf16.
//! * [`matvec`]: 1 to 8 columns on the classic and the rows mapping, every precision mode; the
//!   policy and the products' plan.
//! * [`matmul`]: the tiled product for any number of columns.
//! * [`matvec_id`]: ggml's `MUL_MAT_ID`.

pub mod get_rows;
pub mod matmul;
pub mod matvec;
pub mod matvec_id;
