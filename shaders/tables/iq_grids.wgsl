// The i-quant grids (spec formats.md §7), read from the engine's read-only table buffer at
// binding 3. The data has one source, src/formats/tables.rs: src/gpu/tables.rs lays it out as u32
// words and uploads it once per engine; this file holds only the word offsets, which
// tests/shaders_layout_sync.rs checks against `gpu::tables::LAYOUT`.
// u64 entries are lo/hi word pairs: byte j of an entry is byte j % 4 of word j / 4.
//
// Placement: a storage buffer rather than a `const` array (which naga copies into per-invocation
// memory when indexed at run time) or a workgroup copy (up to 4096 words per 512-value workgroup);
// benches/gpu_tables.rs times the three.

@group(0) @binding(3) var<storage, read> grids: array<u32>;

const IQ2XXS_GRID_AT: u32 = 0u;      // iq2xxs_grid: 256 u64, bytes in {8, 25, 43}
const IQ2XS_GRID_AT: u32 = 512u;     // iq2xs_grid: 512 u64, bytes in {8, 25, 43}
const IQ2S_GRID_AT: u32 = 1536u;     // iq2s_grid: 1024 u64, bytes in {8, 25, 43}
const IQ3XXS_GRID_AT: u32 = 3584u;   // iq3xxs_grid: 256 u32, bytes in {4, 12, ..., 52, 62}
const IQ3S_GRID_AT: u32 = 3840u;     // iq3s_grid: 512 u32, bytes in {1, 3, ..., 15}
const IQ1S_GRID_AT: u32 = 4352u;     // iq1s_grid: 2048 u64 of int8 bytes in {-1, 0, 1}

// Entry `i` of the u64 grid at word `at`, as (lo, hi) words: elements 0..4 and 4..8.
fn grid64(at: u32, i: u32) -> vec2<u32> {
    return vec2<u32>(grids[at + 2u * i], grids[at + 2u * i + 1u]);
}

// Entry `i` of the u32 grid at word `at`: four elements.
fn grid32(at: u32, i: u32) -> u32 {
    return grids[at + i];
}
