//! Metadata values: the 13 GGUF value types, strings kept as raw bytes, and typed arrays.

use std::borrow::Cow;
use std::fmt;

/// A GGUF metadata value type, numbered as on disk (`enum gguf_type` in ggml's `gguf.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    /// Unsigned 8-bit integer.
    U8 = 0,
    /// Signed 8-bit integer.
    I8 = 1,
    /// Unsigned 16-bit integer.
    U16 = 2,
    /// Signed 16-bit integer.
    I16 = 3,
    /// Unsigned 32-bit integer.
    U32 = 4,
    /// Signed 32-bit integer.
    I32 = 5,
    /// IEEE binary32.
    F32 = 6,
    /// Boolean stored as one byte, 0 or 1.
    Bool = 7,
    /// String: u64 length and that many bytes.
    String = 8,
    /// Array: u32 element type, u64 count, then the items.
    Array = 9,
    /// Unsigned 64-bit integer.
    U64 = 10,
    /// Signed 64-bit integer.
    I64 = 11,
    /// IEEE binary64.
    F64 = 12,
}

impl ValueType {
    /// Every value type, in id order.
    pub const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::String,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    /// The value type with on-disk id `id`, if there is one.
    pub const fn from_id(id: u32) -> Option<ValueType> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::String,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    /// The on-disk id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// Lower-case name: `"u8"`, `"i32"`, `"f64"`, `"bool"`, `"string"`, `"array"`, ...
    pub const fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }

    /// The fewest bytes one item of this type takes in a file: its size for fixed-size types, the
    /// u64 length for a string, the u32 type and u64 count for an array. Used to bound counts
    /// against the bytes left in the file before anything is allocated.
    pub const fn min_size(self) -> u64 {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 | ValueType::String => 8,
            ValueType::Array => 12,
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A GGUF string: raw bytes, not necessarily UTF-8.
///
/// Keys and tensor names must be UTF-8 (the reader rejects them otherwise), but string *values* are
/// kept as bytes because real vocabularies contain tokens that are not valid UTF-8 on their own.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GgufString(Vec<u8>);

impl GgufString {
    /// A string holding `bytes`.
    pub fn new(bytes: impl Into<Vec<u8>>) -> GgufString {
        GgufString(bytes.into())
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The string, if it is valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// The string with invalid UTF-8 sequences replaced by U+FFFD.
    pub fn to_string_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the string is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The raw bytes, by value.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl fmt::Debug for GgufString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_str() {
            Some(s) => fmt::Debug::fmt(s, f),
            None => write!(f, "b{:?}", self.to_string_lossy()),
        }
    }
}

impl fmt::Display for GgufString {
    /// Lossy: invalid UTF-8 is shown as U+FFFD.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

impl From<&str> for GgufString {
    fn from(s: &str) -> Self {
        GgufString(s.as_bytes().to_vec())
    }
}

impl From<String> for GgufString {
    fn from(s: String) -> Self {
        GgufString(s.into_bytes())
    }
}

impl From<&[u8]> for GgufString {
    fn from(b: &[u8]) -> Self {
        GgufString(b.to_vec())
    }
}

impl From<Vec<u8>> for GgufString {
    fn from(b: Vec<u8>) -> Self {
        GgufString(b)
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f32`.
    F32(f32),
    /// `f64`.
    F64(f64),
    /// `bool`.
    Bool(bool),
    /// `string` (raw bytes; see [`GgufString`]).
    String(GgufString),
    /// `array` of one element type.
    Array(Array),
}

impl Value {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F32(_) => ValueType::F32,
            Value::F64(_) => ValueType::F64,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
        }
    }

    /// Any integer type whose value is non-negative, widened to `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer type whose value fits, widened to `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => None,
        }
    }

    /// `f32` or `f64`, as `f64`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// A `bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// A string value that is valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => s.as_str(),
            _ => None,
        }
    }

    /// A string value, whatever its bytes.
    pub fn as_gguf_string(&self) -> Option<&GgufString> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// An array value.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl From<$t> for Value {
            fn from(x: $t) -> Value {
                Value::$v(x)
            }
        }
    )*};
}

value_from! {
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64, i64 => I64,
    f32 => F32, f64 => F64, bool => Bool, GgufString => String, Array => Array,
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.into())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s.into())
    }
}

/// A typed array: one vector per element type, so host memory stays a small multiple of the bytes
/// the file spends on the items (a `Vec<Value>` would cost 32 bytes per one-byte item).
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// `u8` items.
    U8(Vec<u8>),
    /// `i8` items.
    I8(Vec<i8>),
    /// `u16` items.
    U16(Vec<u16>),
    /// `i16` items.
    I16(Vec<i16>),
    /// `u32` items.
    U32(Vec<u32>),
    /// `i32` items.
    I32(Vec<i32>),
    /// `u64` items.
    U64(Vec<u64>),
    /// `i64` items.
    I64(Vec<i64>),
    /// `f32` items.
    F32(Vec<f32>),
    /// `f64` items.
    F64(Vec<f64>),
    /// `bool` items.
    Bool(Vec<bool>),
    /// `string` items.
    String(Vec<GgufString>),
    /// Nested arrays; each has its own element type.
    Array(Vec<Array>),
}

macro_rules! array_dispatch {
    ($self:expr, $v:ident => $e:expr) => {
        match $self {
            Array::U8($v) => $e,
            Array::I8($v) => $e,
            Array::U16($v) => $e,
            Array::I16($v) => $e,
            Array::U32($v) => $e,
            Array::I32($v) => $e,
            Array::U64($v) => $e,
            Array::I64($v) => $e,
            Array::F32($v) => $e,
            Array::F64($v) => $e,
            Array::Bool($v) => $e,
            Array::String($v) => $e,
            Array::Array($v) => $e,
        }
    };
}

impl Array {
    /// Number of items.
    pub fn len(&self) -> usize {
        array_dispatch!(self, v => v.len())
    }

    /// Whether the array has no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F32(_) => ValueType::F32,
            Array::F64(_) => ValueType::F64,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
        }
    }

    /// Item `i` as a [`Value`] (cloned), or `None` past the end.
    pub fn get(&self, i: usize) -> Option<Value> {
        Some(match self {
            Array::U8(v) => Value::U8(*v.get(i)?),
            Array::I8(v) => Value::I8(*v.get(i)?),
            Array::U16(v) => Value::U16(*v.get(i)?),
            Array::I16(v) => Value::I16(*v.get(i)?),
            Array::U32(v) => Value::U32(*v.get(i)?),
            Array::I32(v) => Value::I32(*v.get(i)?),
            Array::U64(v) => Value::U64(*v.get(i)?),
            Array::I64(v) => Value::I64(*v.get(i)?),
            Array::F32(v) => Value::F32(*v.get(i)?),
            Array::F64(v) => Value::F64(*v.get(i)?),
            Array::Bool(v) => Value::Bool(*v.get(i)?),
            Array::String(v) => Value::String(v.get(i)?.clone()),
            Array::Array(v) => Value::Array(v.get(i)?.clone()),
        })
    }

    /// The items as [`Value`]s (each cloned), in order.
    pub fn iter(&self) -> impl Iterator<Item = Value> + '_ {
        (0..self.len()).filter_map(move |i| self.get(i))
    }
}
