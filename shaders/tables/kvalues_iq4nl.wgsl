// ggml `kvalues_iq4nl` (int8[16]; used by IQ4_NL, IQ4_XS), spec formats.md §4.21 and §7.
// Twin of src/formats/tables.rs `KVALUES_IQ4NL`; tests/shaders_layout_sync.rs checks them equal.
// Packed four int8 per u32 word, entry k in byte k % 4 of word k / 4; read with `table_i8` (lib/lookup.wgsl).
// Values: [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]
const KVALUES_IQ4NL: vec4<u32> = vec4<u32>(0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);
