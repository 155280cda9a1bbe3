//! The uniform `Params` of every kernel as `#[repr(C)]` bytemuck structs, one per WGSL
//! `struct Params`, member for member. `params!` writes each struct and its [`KernelParams`]
//! table of member names and byte offsets; a test (`tests/cpu/kernel_abi.rs`) reads every
//! kernel's WGSL through naga and checks its `Params` members, offsets and size against these
//! tables, so a slip on either side fails without a GPU.
//!
//! Every member is a `u32` (WGSL's uniform layout then equals C's: 4-byte members, no padding),
//! and a struct is at most [`MAX_PARAMS_BYTES`].

/// The largest `Params` a kernel (ours or an engine's own, through
/// [`super::Recorder::dispatch`]) may have: the bytes each dispatch binds of the recording's
/// uniform buffer.
pub const MAX_PARAMS_BYTES: usize = 256;

/// A kernel's uniform parameters: a plain struct of `u32`s whose layout is the WGSL struct's.
pub trait KernelParams: bytemuck::Pod {
    /// Each member's name and byte offset, in declaration order.
    const FIELDS: &'static [(&'static str, usize)];
}

/// One `#[repr(C)]` params struct with its [`KernelParams`] table; every member is a `u32`.
macro_rules! params {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident: u32,)* }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: u32,)*
        }

        impl KernelParams for $name {
            const FIELDS: &'static [(&'static str, usize)] =
                &[$((stringify!($field), std::mem::offset_of!($name, $field)),)*];
        }

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
        /// Padding (0).
        pub pad: u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_list_every_member_at_its_offset() {
        assert_eq!(MatMulParams::FIELDS.len(), 8);
        assert_eq!(MatMulParams::FIELDS[7], ("n_cols", 28));
        assert_eq!(
            std::mem::size_of::<MatVecParams>(),
            4 * MatVecParams::FIELDS.len()
        );
        assert_eq!(GetRowsParams::FIELDS[0], ("k", 0));
        let p = MatMulParams {
            n_cols: 9,
            ..MatMulParams::default()
        };
        assert_eq!(bytemuck::bytes_of(&p)[28..32], 9u32.to_le_bytes());
    }
}
