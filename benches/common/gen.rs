//! Deterministic random blocks for the benchmarks (`benches/cpu.rs`) and
//! `examples/cpu_throughput.rs`: random bytes, with every scale field forced to a finite, normal
//! value so that no decode runs into Inf, NaN or subnormal arithmetic.

use gguf_dequant::formats::field::FieldKind;
use gguf_dequant::Format;

/// xorshift64*: small, fast, reproducible.
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// A finite, normal f16: random sign and mantissa, exponent 1..=30.
fn finite_f16(r: &mut Rng) -> u16 {
    let x = r.next_u64();
    let exp = 1 + (x >> 16) % 30;
    ((x & 0x8000) | (exp << 10) | (x & 0x3FF)) as u16
}

/// `n_blocks` random blocks of `format`, scales finite.
pub fn random_blocks(format: Format, n_blocks: usize, seed: u64) -> Vec<u8> {
    let spec = format.spec();
    let mut r = Rng::new(seed);
    let mut v = vec![0u8; n_blocks * spec.bytes];
    for c in v.chunks_mut(8) {
        let x = r.next_u64().to_le_bytes();
        c.copy_from_slice(&x[..c.len()]);
    }
    for b in v.chunks_exact_mut(spec.bytes) {
        for f in spec.fields {
            match f.kind {
                FieldKind::F16 => {
                    b[f.offset..f.offset + 2].copy_from_slice(&finite_f16(&mut r).to_le_bytes())
                }
                FieldKind::F32 => {
                    let x = r.next_u64() as u32;
                    let bits = (x & 0x807F_FFFF) | ((100 + (x >> 8) % 56) << 23);
                    b[f.offset..f.offset + 4].copy_from_slice(&bits.to_le_bytes());
                }
                // MXFP4's E8M0 exponent: keep the scale normal (2^-64 .. 2^63).
                FieldKind::Uint if format == Format::MXFP4 => {
                    b[f.offset] = 64 + (r.next_u64() % 128) as u8;
                }
                _ => {}
            }
        }
        // IQ1_M hides its f16 scale in the top nibbles of `scales`: clear the top exponent bit.
        if format == Format::IQ1_M {
            b[spec.bytes - 1] &= 0xBF;
        }
    }
    v
}
