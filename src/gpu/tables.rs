//! The engine's lookup-table buffer: the i-quant grids of [`crate::formats::tables`], uploaded
//! once per engine into a small read-only storage buffer bound at `@group(0) @binding(3)` of
//! every dispatch (shaders that need no table simply do not declare it).
//!
//! The data has one source, `formats::tables`: this module lays the grids out as `u32` words
//! (u64 entries as lo/hi pairs, so byte j of an entry is byte j % 4 of word j / 4) and
//! `shaders/tables/iq_grids.wgsl` holds only the matching word offsets, which
//! `tests/cpu/shaders_layout_sync.rs` checks against [`LAYOUT`].
//!
//! Why a storage buffer: a large `const` array indexed at run time is copied by naga into
//! per-invocation memory, and copying up to 4096 words into workgroup memory for every 512-value
//! workgroup costs more than the lookups it saves (`benches/gpu_tables.rs` measures the three
//! placements). `ksigns_iq2xs` needs no table (a popcount) and the 16-entry `kvalues` are
//! `vec4<u32>` constants, which the GPU-shaped matvec variants copy into workgroup memory once
//! per workgroup (`shaders/lib/lookup_wg.wgsl`, [`crate::gpu::kernels::MatVec::lookup_wg`]).

use crate::formats::tables;

/// One table in the buffer: its WGSL offset constant, first word and length in words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableSlot {
    /// The WGSL constant holding `word` (`<NAME>_AT` in `shaders/tables/iq_grids.wgsl`).
    pub wgsl_name: &'static str,
    /// First word.
    pub word: u32,
    /// Length in words.
    pub words: u32,
}

const fn slot(wgsl_name: &'static str, word: u32, words: usize) -> TableSlot {
    TableSlot {
        wgsl_name,
        word,
        words: words as u32,
    }
}

const IQ2XXS: TableSlot = slot("IQ2XXS_GRID_AT", 0, 2 * tables::IQ2XXS_GRID.len());
const IQ2XS: TableSlot = slot("IQ2XS_GRID_AT", IQ2XXS.word + IQ2XXS.words, 2 * 512);
const IQ2S: TableSlot = slot("IQ2S_GRID_AT", IQ2XS.word + IQ2XS.words, 2 * 1024);
const IQ3XXS: TableSlot = slot("IQ3XXS_GRID_AT", IQ2S.word + IQ2S.words, 256);
const IQ3S: TableSlot = slot("IQ3S_GRID_AT", IQ3XXS.word + IQ3XXS.words, 512);
const IQ1S: TableSlot = slot("IQ1S_GRID_AT", IQ3S.word + IQ3S.words, 2 * 2048);

/// The tables in buffer order: iq2xxs, iq2xs, iq2s (u64 pairs), iq3xxs, iq3s (u32), iq1s (u64
/// pairs of int8 bytes).
pub const LAYOUT: [TableSlot; 6] = [IQ2XXS, IQ2XS, IQ2S, IQ3XXS, IQ3S, IQ1S];

/// Words in the buffer (8448: 33 KiB).
pub const WORDS: usize = (IQ1S.word + IQ1S.words) as usize;

fn pairs(t: &[u64]) -> impl Iterator<Item = u32> + '_ {
    t.iter().flat_map(|&v| [v as u32, (v >> 32) as u32])
}

/// The buffer's contents, [`LAYOUT`] in order.
pub fn words() -> Vec<u32> {
    let mut w = Vec::with_capacity(WORDS);
    w.extend(pairs(&tables::IQ2XXS_GRID));
    w.extend(pairs(&tables::IQ2XS_GRID));
    w.extend(pairs(&tables::IQ2S_GRID));
    w.extend(tables::IQ3XXS_GRID);
    w.extend(tables::IQ3S_GRID);
    w.extend(pairs(&tables::IQ1S_GRID));
    debug_assert_eq!(w.len(), WORDS);
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_contiguous_and_filled_in_order() {
        let w = words();
        assert_eq!(w.len(), WORDS);
        let mut next = 0;
        for s in LAYOUT {
            assert_eq!(s.word, next, "{}", s.wgsl_name);
            next += s.words;
        }
        assert_eq!(next as usize, WORDS);
        let at = |s: TableSlot, i: usize| w[s.word as usize + i];
        assert_eq!(
            at(IQ2S, 2 * 1023 + 1),
            (tables::IQ2S_GRID[1023] >> 32) as u32
        );
        assert_eq!(at(IQ3S, 511), tables::IQ3S_GRID[511]);
        assert_eq!(at(IQ1S, 2 * 2047), tables::IQ1S_GRID[2047] as u32);
    }
}
