//! Block field layout tables: the named byte offsets of each format, written once per format and
//! mirrored by the `<FMT>_<FIELD>` constants of its WGSL twin.

/// How the bytes of a block field are interpreted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// IEEE binary16 scale, little-endian.
    F16,
    /// IEEE binary32 scale, little-endian.
    F32,
    /// Unsigned little-endian integer of the field's length (1, 2 or 4 bytes).
    Uint,
    /// Packed codes, signs, sub-scales or other bytes decoded by the format's own rule.
    Bytes,
}

/// One named field of a block: `len` bytes at byte `offset` from the block start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The ggml field name (`d`, `dmin`, `scales`, `qs`, ...).
    pub name: &'static str,
    /// Byte offset from the start of the block.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
    /// How the bytes are interpreted.
    pub kind: FieldKind,
}

impl Field {
    /// An f16 field at `offset`.
    pub const fn f16(name: &'static str, offset: usize) -> Field {
        Field {
            name,
            offset,
            len: 2,
            kind: FieldKind::F16,
        }
    }
    /// An f32 field at `offset`.
    pub const fn f32(name: &'static str, offset: usize) -> Field {
        Field {
            name,
            offset,
            len: 4,
            kind: FieldKind::F32,
        }
    }
    /// An unsigned little-endian integer field of `len` bytes at `offset`.
    pub const fn uint(name: &'static str, offset: usize, len: usize) -> Field {
        Field {
            name,
            offset,
            len,
            kind: FieldKind::Uint,
        }
    }
    /// A run of `len` packed bytes at `offset`.
    pub const fn bytes(name: &'static str, offset: usize, len: usize) -> Field {
        Field {
            name,
            offset,
            len,
            kind: FieldKind::Bytes,
        }
    }
}

/// The end of the last field: a compile-time check that the fields tile the block exactly, used as
/// `const _: () = assert!(field::tiles(FIELDS, BYTES));` in each format module.
pub const fn tiles(fields: &[Field], bytes: usize) -> bool {
    let mut at = 0;
    let mut i = 0;
    while i < fields.len() {
        if fields[i].offset != at {
            return false;
        }
        at += fields[i].len;
        i += 1;
    }
    at == bytes
}
