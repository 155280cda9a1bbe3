// ggml `kvalues_fp4` (int8[16]; used by MXFP4, NVFP4 (E2M1 values, doubled)), spec formats.md §2.4 and §7.
// Twin of src/formats/tables.rs `KVALUES_FP4`; tests/shaders_layout_sync.rs checks them equal.
// Packed four int8 per u32 word, entry k in byte k % 4 of word k / 4; read with `table_i8` (lib/lookup.wgsl).
// Values: [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]
const KVALUES_FP4: vec4<u32> = vec4<u32>(0x03020100u, 0x0C080604u, 0xFDFEFF00u, 0xF4F8FAFCu);
