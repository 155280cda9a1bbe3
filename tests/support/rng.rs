//! The tests' random data, from the library's one generator (`formats::sample`: splitmix64 and the
//! block generator that [`random_blocks`] wraps).

use gguf_dequant::Format;

pub use gguf_dequant::formats::sample::Rng;

/// `n` random bytes from `rng`.
pub fn take(rng: &mut Rng, n: usize) -> Vec<u8> {
    let mut b = vec![0; n];
    rng.fill(&mut b);
    b
}

/// `n` random bytes from `seed` (every bit pattern: NaN and Inf scales included).
pub fn bytes(n: usize, seed: u64) -> Vec<u8> {
    take(&mut Rng::new(seed), n)
}

/// `n_blocks` random blocks of `format` whose f16/f32 scale fields are finite (the validator of
/// ggml rejects other blocks). One-value formats keep every bit pattern, NaN and Inf included.
pub fn random_blocks(format: Format, n_blocks: usize, seed: u64) -> Vec<u8> {
    gguf_dequant::formats::sample::finite_blocks(
        format,
        n_blocks,
        seed ^ (format.id() as u64) << 32,
    )
}
