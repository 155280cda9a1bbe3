//! The one generator of test and benchmark blocks: deterministic pseudo-random blocks of any
//! format, with their scale fields (found through the format's `FIELDS`) kept finite, or finite
//! and normal.

use super::field::FieldKind;
use super::Format;

/// splitmix64: a small deterministic generator (Steele, Lea and Flood), good enough to fill
/// blocks and pick shapes; not for anything secret.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub const fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fills `bytes` with the little-endian bytes of successive [`Rng::next_u64`] values.
    pub fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let x = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&x[..chunk.len()]);
        }
    }
}

/// `n_blocks` pseudo-random blocks of `format` from `seed` whose f16 and f32 scale fields are
/// finite, as ggml's validator requires of real files. One-value formats keep every bit pattern,
/// NaN and Inf included.
pub fn finite_blocks(format: Format, n_blocks: usize, seed: u64) -> Vec<u8> {
    let spec = format.spec();
    let mut bytes = vec![0u8; n_blocks * spec.bytes];
    Rng::new(seed).fill(&mut bytes);
    for block in bytes.chunks_exact_mut(spec.bytes) {
        for field in spec.fields {
            // Clearing the exponent's second-highest bit turns an all-ones exponent (Inf/NaN)
            // into a finite one.
            let high = match field.kind {
                FieldKind::F16 => field.offset + 1,
                FieldKind::F32 => field.offset + 3,
                _ => continue,
            };
            if let Some(b) = block.get_mut(high) {
                *b &= !0x40;
            }
        }
    }
    bytes
}

/// `n_blocks` pseudo-random blocks of `format` from `seed` whose scales and one-value elements
/// are finite and normal, so that no decoder runs into Inf, NaN or subnormal arithmetic (what a
/// benchmark wants: the speed of ordinary data).
pub fn normal_blocks(format: Format, n_blocks: usize, seed: u64) -> Vec<u8> {
    let spec = format.spec();
    let mut rng = Rng::new(seed);
    let mut v = vec![0u8; n_blocks * spec.bytes];
    rng.fill(&mut v);
    // One-value formats: finite, normal values as well (the CPU widens them through f32).
    match format {
        Format::F32 => {
            for w in v.chunks_exact_mut(4) {
                let x = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                w.copy_from_slice(&normal_f32(x).to_le_bytes());
            }
        }
        Format::F16 => {
            for w in v.chunks_exact_mut(2) {
                let x = u16::from_le_bytes([w[0], w[1]]);
                let h = (x & 0x83FF) | ((1 + (x >> 10) % 30) << 10);
                w.copy_from_slice(&h.to_le_bytes());
            }
        }
        Format::BF16 => {
            for w in v.chunks_exact_mut(2) {
                let x = u16::from_le_bytes([w[0], w[1]]);
                let h = (x & 0x807F) | ((100 + (x >> 7) % 56) << 7);
                w.copy_from_slice(&h.to_le_bytes());
            }
        }
        Format::F8_E4M3 => {
            for b in v.iter_mut() {
                *b = (*b & 0x87) | ((1 + (*b >> 3) % 14) << 3);
            }
        }
        _ => {}
    }
    for b in v.chunks_exact_mut(spec.bytes) {
        for f in spec.fields {
            match f.kind {
                FieldKind::F16 => {
                    let x = rng.next_u64();
                    let exp = 1 + (x >> 16) % 30;
                    let h = ((x & 0x8000) | (exp << 10) | (x & 0x3FF)) as u16;
                    b[f.offset..f.offset + 2].copy_from_slice(&h.to_le_bytes());
                }
                FieldKind::F32 => {
                    let bits = normal_f32(rng.next_u64() as u32);
                    b[f.offset..f.offset + 4].copy_from_slice(&bits.to_le_bytes());
                }
                FieldKind::Uint if format == Format::MXFP4 => {
                    b[f.offset] = 64 + (rng.next_u64() % 128) as u8;
                }
                _ => {}
            }
        }
        if format == Format::IQ1_M {
            b[spec.bytes - 1] &= 0xBF;
        }
    }
    v
}

/// `x`'s sign and mantissa with an exponent in 2⁻²⁷ .. 2²⁸: a normal f32 far from overflow.
fn normal_f32(x: u32) -> u32 {
    (x & 0x807F_FFFF) | ((100 + (x >> 8) % 56) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_finite_or_normal_as_promised() {
        for &f in Format::ALL {
            for (blocks, normal) in [
                (finite_blocks(f, 50, 7), false),
                (normal_blocks(f, 50, 7), true),
            ] {
                assert_eq!(blocks.len(), 50 * f.block_bytes(), "{f}");
                for b in blocks.chunks_exact(f.block_bytes()) {
                    for field in f.spec().fields {
                        let v = match field.kind {
                            FieldKind::F16 => {
                                half::f16::from_le_bytes([b[field.offset], b[field.offset + 1]])
                                    .to_f32()
                            }
                            FieldKind::F32 => f32::from_le_bytes(
                                b[field.offset..field.offset + 4].try_into().unwrap(),
                            ),
                            _ => continue,
                        };
                        assert!(v.is_finite(), "{f} {}", field.name);
                        assert!(!normal || v.is_normal(), "{f} {}", field.name);
                    }
                }
            }
        }
    }
}
