//! Reading NumPy `.npy` inputs (`apply --input`). The header is parsed here rather than by npyz,
//! whose reader multiplies the file's shape unchecked: every count is checked, the data must be
//! exactly what the header describes, and nothing is allocated before that is known.
//!
//! Format (NumPy's `format.py`): `\x93NUMPY`, major and minor version bytes, the header length
//! (u16 in version 1, u32 in versions 2 and 3, little-endian), then the header: a Python dict
//! literal `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`, padded with spaces
//! and a newline; the raw data follows.

/// Dimensions NumPy allows at most.
const MAX_DIMS: usize = 64;

/// A parsed `.npy` file: its dtype, shape and order, and its data bytes.
#[derive(Debug)]
pub struct Npy<'a> {
    /// The dtype.
    pub descr: Descr,
    /// The shape (empty for a scalar).
    pub shape: Vec<u64>,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran: bool,
    /// The data, exactly `count × size` bytes.
    data: &'a [u8],
}

/// A simple dtype: byte order, kind and size (`<f4`, `|u1`, `>i8`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descr {
    /// The descr string as written.
    pub text: String,
    /// NumPy's kind character: `f` float, `i` signed, `u` unsigned, `b` bool, ...
    pub kind: char,
    /// Bytes per element (for the kinds read here).
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
        let bits = self.size * 8;
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

    /// Checks that the data is exactly `count × size` bytes; call after checking the dtype.
    pub fn check_data(&self) -> Result<(), String> {
        let need = self
            .count()
            .and_then(|n| n.checked_mul(self.descr.size as u64))
            .ok_or_else(|| format!("shape {:?} is too large", self.shape))?;
        if self.data.len() as u64 != need {
            return Err(format!(
                "holds {} bytes of data where shape {:?} of {} takes {need}",
                self.data.len(),
                self.shape,
                self.descr.text
            ));
        }
        Ok(())
    }

    /// The values as f32, in C (row-major) order; the dtype must be float32 and the data checked.
    /// A Fortran-order array of 2 dims is transposed.
    pub fn f32_values(&self) -> Vec<f32> {
        let values: Vec<f32> = self
            .data
            .chunks_exact(4)
            .map(|c| {
                let b = [c[0], c[1], c[2], c[3]];
                f32::from_bits(if self.descr.big_endian {
                    u32::from_be_bytes(b)
                } else {
                    u32::from_le_bytes(b)
                })
            })
            .collect();
        self.c_order(values)
    }

    /// The values of an integer dtype, widened to i128, in C order; the data must be checked.
    pub fn int_values(&self) -> Vec<i128> {
        let size = self.descr.size;
        let signed = self.descr.kind == 'i';
        let values: Vec<i128> = self
            .data
            .chunks_exact(size)
            .map(|c| {
                let mut b = [0u8; 8];
                if self.descr.big_endian {
                    for (i, &x) in c.iter().rev().enumerate() {
                        b[i] = x;
                    }
                } else {
                    b[..size].copy_from_slice(c);
                }
                let u = u64::from_le_bytes(b);
                let shift = 64 - 8 * size as u32;
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

    /// `values` (in file order) in C order: a Fortran-order matrix is transposed; 0 and 1 dims
    /// are the same in both orders. (More dims in Fortran order are left as they are: callers
    /// refuse more than 2 dims.)
    fn c_order<T: Copy>(&self, values: Vec<T>) -> Vec<T> {
        match self.shape[..] {
            [rows, cols] if self.fortran && rows > 1 && cols > 1 => {
                let (rows, cols) = (rows as usize, cols as usize);
                // File element (r, c) is at c * rows + r.
                (0..rows * cols)
                    .map(|i| values[(i % cols) * rows + i / cols])
                    .collect()
            }
            _ => values,
        }
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
    let size = if digits.is_empty() {
        0
    } else {
        digits.parse::<usize>().unwrap_or(0)
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
        if self.s[self.i..].starts_with(w.as_bytes()) {
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
    }
}
