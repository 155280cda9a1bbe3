//! Reading NumPy `.npy` files (the command line's `apply --input`). The header is parsed here
//! rather than by npyz, whose reader multiplies the file's shape unchecked.
//!
//! Format (NumPy's `format.py`): `\x93NUMPY`, major and minor version bytes, the header length
//! (u16 in version 1, u32 in versions 2 and 3, little-endian), then the header: a Python dict
//! literal `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`, padded with spaces
//! and a newline; the raw data follows.
//!
//! What it guarantees, on any bytes (the `npy` fuzz target checks it):
//!
//! * no function panics, indexes out of bounds or overflows; errors are reasons (`String`) for a
//!   message that names the file, one printable line (text from the file is escaped);
//! * [`Npy::parse`] reads only the slice it is given and allocates in proportion to the header
//!   alone (at most [`MAX_DIMS`] dims, strings copied from the header): nothing is sized by a
//!   count in the file;
//! * when [`Npy::check_data`] accepts, the element size is not 0 and the data is exactly
//!   [`Npy::count`] × size bytes, so the count is at most the data's length;
//! * [`Npy::f32_values`] and [`Npy::int_values`] return exactly [`Npy::count`] values, in C
//!   order, when the dtype is theirs and [`Npy::check_data`] accepts, and nothing otherwise; they
//!   allocate no more than the data's length in values.

/// Dimensions NumPy allows at most; a shape with more is refused.
pub const MAX_DIMS: usize = 64;

/// A parsed `.npy` file: its dtype, shape and order, and its data bytes.
#[derive(Debug)]
pub struct Npy<'a> {
    /// The dtype.
    pub descr: Descr,
    /// The shape (empty for a scalar).
    pub shape: Vec<u64>,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran: bool,
    /// The bytes after the header (exactly `count × size` once [`Npy::check_data`] accepts).
    data: &'a [u8],
}

/// A simple dtype: byte order, kind and size (`<f4`, `|u1`, `>i8`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descr {
    /// The descr string as written.
    pub text: String,
    /// NumPy's kind character: `f` float, `i` signed, `u` unsigned, `b` bool, ...
    pub kind: char,
    /// Bytes per element (for the kinds read here); 0 when the descr gives none or no plain
    /// number (`<M8[ns]`).
    pub size: usize,
    /// Big-endian data (`>`; `=` is this machine's order, `|` and `<` little).
    pub big_endian: bool,
}

impl Descr {
    /// A signed or unsigned integer of 1, 2, 4 or 8 bytes.
    pub fn is_integer(&self) -> bool {
        matches!(self.kind, 'i' | 'u') && matches!(self.size, 1 | 2 | 4 | 8)
    }

    /// float32.
    pub fn is_f32(&self) -> bool {
        self.kind == 'f' && self.size == 4
    }

    /// NumPy's name of the dtype, for messages.
    pub fn numpy_name(&self) -> String {
        // The size comes from the file (`<f2305843009213693952`): its bits may not fit a usize.
        let bits = match self.size.checked_mul(8) {
            Some(b) => b.to_string(),
            None => format!("({} bytes)", self.size),
        };
        match self.kind {
            'f' => format!("float{bits}"),
            'i' => format!("int{bits}"),
            'u' => format!("uint{bits}"),
            'c' => format!("complex{bits}"),
            'b' => "bool".into(),
            'U' | 'S' | 'a' => "a string dtype".into(),
            'O' => "object (pickled)".into(),
            'M' | 'm' => "a date/time dtype".into(),
            _ => "an unsupported dtype".into(),
        }
    }
}

impl<'a> Npy<'a> {
    /// Parses `bytes`, a whole `.npy` file. The error is a reason for a message that names the
    /// file.
    pub fn parse(bytes: &'a [u8]) -> Result<Npy<'a>, String> {
        const MAGIC: &[u8] = b"\x93NUMPY";
        if bytes.len() < 10 || &bytes[..6] != MAGIC {
            return Err("not a .npy file (it does not start with \\x93NUMPY)".into());
        }
        let (major, minor) = (bytes[6], bytes[7]);
        let (len, start): (usize, usize) = match major {
            1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
            2 | 3 if bytes.len() >= 12 => (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            ),
            2 | 3 => return Err("the .npy header is truncated".into()),
            _ => return Err(format!("unsupported .npy format version {major}.{minor}")),
        };
        let end = start
            .checked_add(len)
            .filter(|&e| e <= bytes.len())
            .ok_or("the .npy header is truncated")?;
        let header = std::str::from_utf8(&bytes[start..end])
            .map_err(|_| "the .npy header is not text".to_string())?;
        let (descr, fortran, shape) = parse_header(header)?;
        let descr = parse_descr(&descr)?;
        let npy = Npy {
            descr,
            shape,
            fortran,
            data: &bytes[end..],
        };
        Ok(npy)
    }

    /// The number of elements (the product of the shape), if it fits a u64.
    pub fn count(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }

    /// The bytes after the header: the data, unchecked until [`Npy::check_data`] accepts.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Checks that the element size is known and the data is exactly `count × size` bytes; call
    /// after checking the dtype.
    pub fn check_data(&self) -> Result<(), String> {
        if self.descr.size == 0 {
            return Err(format!("dtype {:?} has no element size", self.descr.text));
        }
        let need = self
            .count()
            .and_then(|n| n.checked_mul(self.descr.size as u64))
            .ok_or_else(|| format!("shape {:?} is too large", self.shape))?;
        if self.data.len() as u64 != need {
            return Err(format!(
                "holds {} bytes of data where shape {:?} of {} takes {need}",
                self.data.len(),
                self.shape,
                printable(&self.descr.text)
            ));
        }
        Ok(())
    }

    /// The values as f32, in C (row-major) order: a Fortran-order array is reordered. Exactly
    /// [`Npy::count`] values when the dtype is float32 and [`Npy::check_data`] accepts; empty
    /// otherwise.
    pub fn f32_values(&self) -> Vec<f32> {
        if !self.descr.is_f32() || self.check_data().is_err() {
            return Vec::new();
        }
        let big = self.descr.big_endian;
        let values: Vec<f32> = self
            .data
            .chunks_exact(4)
            .map(|c| {
                let b = [c[0], c[1], c[2], c[3]];
                f32::from_bits(if big {
                    u32::from_be_bytes(b)
                } else {
                    u32::from_le_bytes(b)
                })
            })
            .collect();
        self.c_order(values)
    }

    /// The values of an integer dtype (1, 2, 4 or 8 bytes, signed or not), widened to i128, in C
    /// order. Exactly [`Npy::count`] values when [`Descr::is_integer`] and [`Npy::check_data`]
    /// accepts; empty otherwise.
    pub fn int_values(&self) -> Vec<i128> {
        if !self.descr.is_integer() || self.check_data().is_err() {
            return Vec::new();
        }
        let size = self.descr.size;
        let (signed, big) = (self.descr.kind == 'i', self.descr.big_endian);
        // 0, 32, 48 or 56: `size` is 1, 2, 4 or 8.
        let shift = 64 - 8 * size as u32;
        let values: Vec<i128> = self
            .data
            .chunks_exact(size)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..size].copy_from_slice(c);
                if big {
                    b[..size].reverse();
                }
                let u = u64::from_le_bytes(b);
                if signed {
                    // Sign-extend from `size` bytes.
                    (((u << shift) as i64) >> shift) as i128
                } else {
                    u as i128
                }
            })
            .collect();
        self.c_order(values)
    }

    /// `values` (in file order, one per element: the data is checked) in C order. A Fortran-order
    /// array is reordered; with fewer than two dims above 1 both orders are the same.
    fn c_order<T: Copy>(&self, values: Vec<T>) -> Vec<T> {
        let n = values.len();
        if !self.fortran || n == 0 || self.shape.iter().filter(|&&d| d > 1).count() < 2 {
            return values;
        }
        // Every dim is at most n (their product is n, none is 0), so each fits a usize, as do
        // the strides (partial products); the running offset below stays under 2n.
        let Ok(dims) = self
            .shape
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<usize>, _>>()
        else {
            return values;
        };
        if dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(n) {
            return values;
        }
        // Fortran strides: the first dim is contiguous.
        let mut strides = Vec::with_capacity(dims.len());
        let mut step = 1usize;
        for &d in &dims {
            strides.push(step);
            step *= d;
        }
        // Walk the elements in C order (the last dim fastest), keeping each one's file offset.
        let mut index = vec![0usize; dims.len()];
        let mut offset = 0usize;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(values[offset]);
            for k in (0..dims.len()).rev() {
                index[k] += 1;
                offset += strides[k];
                if index[k] < dims[k] {
                    break;
                }
                // Dim k wraps: back to its start, and carry into the dim before it.
                offset -= strides[k] * dims[k];
                index[k] = 0;
            }
        }
        out
    }
}

/// `s` with control characters escaped (as `{:?}` would, without the quotes), for messages.
fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(char::is_control) {
        std::borrow::Cow::Owned(s.escape_debug().to_string())
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// One value of the header dict.
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
}

/// `descr`, `fortran_order` and `shape` of the header dict.
fn parse_header(text: &str) -> Result<(String, bool, Vec<u64>), String> {
    let bad = |what: &str| format!("the .npy header is not a dict NumPy writes ({what})");
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    p.ws();
    if !p.eat(b'{') {
        return Err(bad("no `{`"));
    }
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string().ok_or_else(|| bad("a key is not a string"))?;
        p.ws();
        if !p.eat(b':') {
            return Err(bad("no `:` after a key"));
        }
        p.ws();
        if key == "descr" && p.peek() == Some(b'[') {
            return Err("structured dtypes (a list descr) are not supported".into());
        }
        let value = p
            .value()
            .ok_or_else(|| bad(&format!("the value of {key:?}")))?;
        match (key.as_str(), value) {
            ("descr", Value::Str(s)) if descr.is_none() => descr = Some(s),
            ("fortran_order", Value::Bool(b)) if fortran.is_none() => fortran = Some(b),
            ("shape", Value::Tuple(t)) if shape.is_none() => shape = Some(t),
            _ => return Err(bad(&format!("key {key:?}"))),
        }
        p.ws();
        if !p.eat(b',') {
            p.ws();
            if p.eat(b'}') {
                break;
            }
            return Err(bad("no `,` between entries"));
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err(bad("text after the dict"));
    }
    match (descr, fortran, shape) {
        (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
        _ => Err(bad("descr, fortran_order and shape are not all there")),
    }
}

/// A dtype string: `[<>|=]` kind size.
fn parse_descr(text: &str) -> Result<Descr, String> {
    let mut chars = text.chars();
    let (order, rest) = match chars.next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, chars.as_str()),
        _ => ('=', text),
    };
    let mut rest = rest.chars();
    let kind = rest
        .next()
        .ok_or_else(|| format!("dtype {text:?} is empty"))?;
    let digits = rest.as_str();
    // Digits only (`str::parse` would take `+4`); anything else (`[ns]`, empty, too big) is 0.
    let size = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse::<usize>().unwrap_or(0)
    } else {
        0
    };
    let big_endian = order == '>' || (order == '=' && cfg!(target_endian = "big"));
    Ok(Descr {
        text: text.to_string(),
        kind,
        size: if kind == 'b' { 1 } else { size },
        big_endian,
    })
}

/// A cursor over the header text.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn eat_word(&mut self, w: &str) -> bool {
        if self
            .s
            .get(self.i..)
            .is_some_and(|s| s.starts_with(w.as_bytes()))
        {
            self.i += w.len();
            true
        } else {
            false
        }
    }

    /// A quoted string without escapes.
    fn string(&mut self) -> Option<String> {
        let q = self.peek().filter(|&c| c == b'\'' || c == b'"')?;
        self.i += 1;
        let start = self.i;
        while let Some(c) = self.peek() {
            if c == q {
                let s = std::str::from_utf8(&self.s[start..self.i])
                    .ok()?
                    .to_string();
                self.i += 1;
                return Some(s);
            }
            if c == b'\\' {
                return None;
            }
            self.i += 1;
        }
        None
    }

    /// A non-negative integer (Python 2's `L` suffix allowed), checked against u64.
    fn int(&mut self) -> Option<u64> {
        let start = self.i;
        let mut v: u64 = 0;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
            self.i += 1;
        }
        if self.i == start {
            return None;
        }
        self.eat(b'L');
        Some(v)
    }

    fn value(&mut self) -> Option<Value> {
        match self.peek()? {
            b'\'' | b'"' => self.string().map(Value::Str),
            b'(' => {
                self.i += 1;
                let mut dims = Vec::new();
                loop {
                    self.ws();
                    if self.eat(b')') {
                        return Some(Value::Tuple(dims));
                    }
                    if dims.len() == MAX_DIMS {
                        return None;
                    }
                    dims.push(self.int()?);
                    self.ws();
                    if !self.eat(b',') {
                        self.ws();
                        return self.eat(b')').then_some(Value::Tuple(dims));
                    }
                }
            }
            _ if self.eat_word("True") => Some(Value::Bool(true)),
            _ if self.eat_word("False") => Some(Value::Bool(false)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn parses_what_numpy_writes() {
        let data: Vec<u8> = [1.0f32, -2.0, 3.5, 4.0, 5.0, 6.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let bytes = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n",
            &data,
        );
        let npy = Npy::parse(&bytes).unwrap();
        assert!(npy.descr.is_f32());
        assert_eq!(npy.shape, [2, 3]);
        npy.check_data().unwrap();
        assert_eq!(npy.f32_values(), [1.0, -2.0, 3.5, 4.0, 5.0, 6.0]);
    }

    #[test]
    fn fortran_order_is_transposed() {
        // [[1, 2, 3], [4, 5, 6]] in column-major order.
        let data: Vec<u8> = [1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let bytes = file(
            "{'descr': '>f4', 'fortran_order': True, 'shape': (2, 3)}",
            &data,
        );
        let npy = Npy::parse(&bytes).unwrap();
        assert_eq!(npy.f32_values(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }

    #[test]
    fn integers_of_every_width_and_order() {
        for (descr, data, want) in [
            ("|u1", vec![255u8, 0], vec![255i128, 0]),
            ("|i1", vec![255u8, 1], vec![-1, 1]),
            ("<i2", vec![0xfe, 0xff], vec![-2]),
            (">u2", vec![0x01, 0x02], vec![258]),
            ("<i8", (-5i64).to_le_bytes().to_vec(), vec![-5]),
            (
                "<u8",
                u64::MAX.to_le_bytes().to_vec(),
                vec![u64::MAX as i128],
            ),
            (">i4", 7i32.to_be_bytes().to_vec(), vec![7]),
        ] {
            let n = want.len();
            let bytes = file(
                &format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({n},), }}"),
                &data,
            );
            let npy = Npy::parse(&bytes).unwrap();
            assert!(npy.descr.is_integer(), "{descr}");
            npy.check_data().unwrap();
            assert_eq!(npy.int_values(), want, "{descr}");
        }
    }

    #[test]
    fn hostile_headers_are_errors() {
        let huge = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }",
            &[],
        );
        let npy = Npy::parse(&huge).unwrap();
        assert!(npy.check_data().unwrap_err().contains("too large"));
        let overflow = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
            &[],
        );
        assert!(Npy::parse(&overflow).is_err());
        for bad in [
            &b"\x93NUMPX\x01\x00\x00\x00"[..],
            b"\x93NUMPY\x01\x00\xff\x00{",
            b"\x93NUMPY\x09\x00\x00\x00",
        ] {
            assert!(Npy::parse(bad).is_err());
        }
        for header in [
            "{'descr': '<f4', 'shape': (2,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk",
        ] {
            assert!(Npy::parse(&file(header, &[0; 8])).is_err(), "{header}");
        }
        let short = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
            &[0; 8],
        );
        assert!(Npy::parse(&short).unwrap().check_data().is_err());
        // File text in a message is escaped: one printable line.
        let control = file(
            "{'descr': '<f4\n\u{1b}[2J', 'fortran_order': False, 'shape': (3,), }",
            &[0; 8],
        );
        let err = Npy::parse(&control).unwrap().check_data().unwrap_err();
        assert!(!err.chars().any(char::is_control), "{err}");
    }

    #[test]
    fn fortran_order_of_any_rank() {
        // A 2×3×4 array a[i][j][k] = 100i + 10j + k, written column-major (i fastest).
        let (d0, d1, d2) = (2, 3, 4);
        let mut file_order = Vec::new();
        for k in 0..d2 {
            for j in 0..d1 {
                for i in 0..d0 {
                    file_order.push((100 * i + 10 * j + k) as f32);
                }
            }
        }
        let data: Vec<u8> = file_order.iter().flat_map(|v| v.to_le_bytes()).collect();
        let bytes = file(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 4), }",
            &data,
        );
        let npy = Npy::parse(&bytes).unwrap();
        npy.check_data().unwrap();
        let want: Vec<f32> = (0..d0)
            .flat_map(|i| {
                (0..d1).flat_map(move |j| (0..d2).map(move |k| (100 * i + 10 * j + k) as f32))
            })
            .collect();
        assert_eq!(npy.f32_values(), want);
        // Dims of 1 change nothing: (1, 2, 1, 3) Fortran is a transposed 2×3.
        let bytes = file(
            "{'descr': '<u1', 'fortran_order': True, 'shape': (1, 2, 1, 3), }",
            &[1, 4, 2, 5, 3, 6],
        );
        let npy = Npy::parse(&bytes).unwrap();
        assert_eq!(npy.int_values(), [1, 2, 3, 4, 5, 6]);
    }

    /// Inputs that panicked (or could) before the reader moved into the library: an element
    /// size whose bits overflow, integer accessors on sizes they cannot widen, accessors on
    /// unchecked data (a Fortran transpose indexing past the values), a size-0 dtype with a huge
    /// shape passing the data check.
    #[test]
    fn accessors_never_panic() {
        let bytes = file(
            "{'descr': '<f2305843009213693952', 'fortran_order': False, 'shape': (1,), }",
            &[0; 4],
        );
        let npy = Npy::parse(&bytes).unwrap();
        assert_eq!(npy.descr.numpy_name(), "float(2305843009213693952 bytes)");
        assert!(npy.check_data().is_err());
        assert!(npy.f32_values().is_empty() && npy.int_values().is_empty());

        for descr in ["<i16", "<u3", "<i0", "<i", "|V8", "<M8[ns]"] {
            let bytes = file(
                &format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2,), }}"),
                &[0; 32],
            );
            let npy = Npy::parse(&bytes).unwrap();
            assert!(npy.int_values().is_empty(), "{descr}");
            assert!(npy.f32_values().is_empty(), "{descr}");
        }

        // Fortran order, data one value short: nothing, where the transpose read past the end.
        let bytes = file(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
            &[0; 20],
        );
        let npy = Npy::parse(&bytes).unwrap();
        assert!(npy.check_data().is_err());
        assert!(npy.f32_values().is_empty());
        // ... and a shape whose product overflows a usize.
        let bytes = file(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (4294967296, 4294967296), }",
            &[0; 8],
        );
        assert!(Npy::parse(&bytes).unwrap().f32_values().is_empty());

        // Size 0: no data would have matched any shape.
        let bytes = file(
            "{'descr': '|V0', 'fortran_order': False, 'shape': (65536, 65536), }",
            &[],
        );
        let err = Npy::parse(&bytes).unwrap().check_data().unwrap_err();
        assert!(err.contains("no element size"), "{err}");
    }

    #[test]
    fn descr_sizes_are_digits() {
        for (descr, size) in [("<f4", 4), ("<f+4", 0), ("<f 4", 0), ("<f", 0), ("|b1", 1)] {
            assert_eq!(parse_descr(descr).unwrap().size, size, "{descr}");
        }
        assert!(!parse_descr("<f+4").unwrap().is_f32());
        assert!(parse_descr("<").is_err());
        assert!(parse_descr("").is_err());
    }
}
