//! The uniform `Params` of every kernel as `#[repr(C)]` bytemuck structs, one per WGSL
//! `struct Params`, member for member. `params!` writes each struct and its [`KernelParams`]
//! table of member names, byte offsets and scalar types; a test (`tests/cpu/kernel_abi.rs`)
//! reads every kernel's WGSL through naga and checks its `Params` members, offsets, types and
//! size against these tables, so a slip on either side fails without a GPU.
//!
//! Every member is a 4-byte scalar, `u32`, `i32` or `f32` ([`ParamType`]; WGSL's uniform layout
//! then equals C's: no padding), and a struct is at most [`MAX_PARAMS_BYTES`].

/// The largest `Params` a kernel (ours or an engine's own, through
/// [`super::Recorder::dispatch`]) may have: the bytes each dispatch binds of the recording's
/// uniform buffer.
pub const MAX_PARAMS_BYTES: usize = 256;

/// The scalar type of a `Params` member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamScalar {
    /// `u32`.
    U32,
    /// `i32`.
    I32,
    /// `f32`.
    F32,
}

/// A type a `Params` member may have: a 4-byte scalar, laid out in a WGSL uniform as in C.
pub trait ParamType: bytemuck::Pod {
    /// Its WGSL scalar.
    const SCALAR: ParamScalar;
}

impl ParamType for u32 {
    const SCALAR: ParamScalar = ParamScalar::U32;
}

impl ParamType for i32 {
    const SCALAR: ParamScalar = ParamScalar::I32;
}

impl ParamType for f32 {
    const SCALAR: ParamScalar = ParamScalar::F32;
}

/// One member of a `Params` struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamField {
    /// Its name, as in the WGSL.
    pub name: &'static str,
    /// Its byte offset.
    pub offset: usize,
    /// Its scalar type.
    pub scalar: ParamScalar,
}

/// A kernel's uniform parameters: a plain struct of 4-byte scalars whose layout is the WGSL
/// struct's.
pub trait KernelParams: bytemuck::Pod {
    /// Each member, in declaration order.
    const FIELDS: &'static [ParamField];
}

/// One `#[repr(C)]` params struct with its [`KernelParams`] table; every member is a
/// [`ParamType`]. Equality is of the bytes (the uniform the GPU reads).
macro_rules! params {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl KernelParams for $name {
            const FIELDS: &'static [ParamField] = &[$(ParamField {
                name: stringify!($field),
                offset: std::mem::offset_of!($name, $field),
                scalar: <$ty as ParamType>::SCALAR,
            },)*];
        }

        impl PartialEq for $name {
            fn eq(&self, other: &$name) -> bool {
                bytemuck::bytes_of(self) == bytemuck::bytes_of(other)
            }
        }

        impl Eq for $name {}

        const _: () = assert!(std::mem::size_of::<$name>() <= MAX_PARAMS_BYTES);
    };
}

params! {
    /// `shaders/kernels/get_rows.wgsl`: one dispatch's window of gathered rows.
    pub struct GetRowsParams {
        /// Values per row (K).
        pub k: u32,
        /// Values this dispatch's output window holds (ids × K).
        pub n_out: u32,
        /// Bytes per weight row.
        pub row_bytes: u32,
        /// Bytes from the start of the weight binding to row `row_first`.
        pub w_skip: u32,
        /// First weight row bound.
        pub row_first: u32,
        /// Weight rows bound.
        pub row_count: u32,
        /// Rows of the weight (ids at or past it give NaN).
        pub n_rows: u32,
        /// Index in the ids binding of this window's first id.
        pub ids_skip: u32,
    }
}

params! {
    /// `shaders/kernels/matvec.wgsl`, for both `matvec` and `matvec_id` (one struct in one file).
    pub struct MatVecParams {
        /// Values per row (K).
        pub k: u32,
        /// Rows this dispatch computes (matvec), or rows per expert (matvec_id).
        pub n_rows: u32,
        /// Bytes per weight row.
        pub row_bytes: u32,
        /// Bytes from the start of the weight binding to this dispatch's first row.
        pub w_skip: u32,
        /// Index in the x binding of `x[0][0]`.
        pub x_skip: u32,
        /// Index in the y binding of this dispatch's first output.
        pub y_skip: u32,
        /// Distance in y between columns (N).
        pub y_stride: u32,
        /// matvec_id: global row of the weight binding's first row.
        pub row_first: u32,
        /// matvec_id: rows bound.
        pub row_count: u32,
        /// matvec_id: experts (E).
        pub n_experts: u32,
        /// matvec_id: slots per token.
        pub slots: u32,
        /// matvec_id: 1 when x has one row per (token, slot), 0 for one per token.
        pub x_per_slot: u32,
        /// matvec_id: the (token, slot) pair of `workgroup_id.z = 0`.
        pub pair_first: u32,
        /// matvec_id: index in the ids binding of that pair.
        pub ids_skip: u32,
    }
}

params! {
    /// `shaders/kernels/matmul.wgsl`: one dispatch's rows and columns of Y.
    pub struct MatMulParams {
        /// Values per row (K).
        pub k: u32,
        /// Rows this dispatch computes.
        pub n_rows: u32,
        /// Bytes per weight row.
        pub row_bytes: u32,
        /// Bytes from the start of the weight binding to this dispatch's first row.
        pub w_skip: u32,
        /// Index in the x binding of this dispatch's first column.
        pub x_skip: u32,
        /// Index in the y binding of (first column, first row).
        pub y_skip: u32,
        /// Distance in y between columns (N).
        pub y_stride: u32,
        /// Columns this dispatch computes.
        pub n_cols: u32,
    }
}

params! {
    /// `shaders/kernels/quantize_q8.wgsl`: x of the integer matvec path as int8 codes.
    pub struct QuantizeParams {
        /// Blocks of 32 values to quantise.
        pub blocks: u32,
        /// Index in the x binding of the first value.
        pub x_skip: u32,
        /// Index in the codes binding of the first block's scale (the codes start at word 0).
        pub d_at: u32,
        /// Index in the codes binding of the first block's sums of codes (Σq of values 0..16 and
        /// 16..32 as the low and high i16 of a word).
        pub s_at: u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_list_every_member_at_its_offset() {
        assert_eq!(MatMulParams::FIELDS.len(), 8);
        assert_eq!(
            MatMulParams::FIELDS[7],
            ParamField {
                name: "n_cols",
                offset: 28,
                scalar: ParamScalar::U32
            }
        );
        assert_eq!(
            std::mem::size_of::<MatVecParams>(),
            4 * MatVecParams::FIELDS.len()
        );
        assert_eq!(GetRowsParams::FIELDS[0].name, "k");
        let p = MatMulParams {
            n_cols: 9,
            ..MatMulParams::default()
        };
        assert_eq!(bytemuck::bytes_of(&p)[28..32], 9u32.to_le_bytes());
    }

    params! {
        /// Members of every type.
        pub struct Mixed {
            /// A count.
            pub n: u32,
            /// An offset.
            pub delta: i32,
            /// A scale.
            pub eps: f32,
        }
    }

    #[test]
    fn members_may_be_signed_or_float() {
        let scalars: Vec<_> = Mixed::FIELDS.iter().map(|f| (f.offset, f.scalar)).collect();
        assert_eq!(
            scalars,
            [
                (0, ParamScalar::U32),
                (4, ParamScalar::I32),
                (8, ParamScalar::F32)
            ]
        );
        let p = Mixed {
            n: 1,
            delta: -2,
            eps: 0.5,
        };
        assert_eq!(bytemuck::bytes_of(&p)[4..8], (-2i32).to_le_bytes());
        assert_eq!(bytemuck::bytes_of(&p)[8..12], 0.5f32.to_le_bytes());
        // Equality is of the bytes the GPU reads: NaN equals itself, -0 is not +0.
        let nan = Mixed { eps: f32::NAN, ..p };
        assert_eq!(nan, nan);
        assert_ne!(Mixed { eps: -0.0, ..p }, Mixed { eps: 0.0, ..p });
    }
}
