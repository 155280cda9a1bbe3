//! The one PRNG of the tests: splitmix64, deterministic and dependency-free (the same generator as
//! `selftest::finite_blocks`, which [`random_blocks`] wraps).

use gguf_dequant::Format;

/// splitmix64 from a seed.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fills `b` with random bytes.
    pub fn fill(&mut self, b: &mut [u8]) {
        for x in b.iter_mut() {
            *x = self.next_u64() as u8;
        }
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0; n];
        self.fill(&mut b);
        b
    }
}

/// `n` random bytes from `seed` (every bit pattern: NaN and Inf scales included).
pub fn bytes(n: usize, seed: u64) -> Vec<u8> {
    Rng(seed).bytes(n)
}

/// `n_blocks` random blocks of `format` whose f16/f32 scale fields are finite (the validator of
/// ggml rejects other blocks). One-value formats keep every bit pattern, NaN and Inf included.
pub fn random_blocks(format: Format, n_blocks: usize, seed: u64) -> Vec<u8> {
    gguf_dequant::selftest::finite_blocks(format, n_blocks, seed ^ (format.id() as u64) << 32)
}
