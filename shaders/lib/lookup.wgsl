// Lookups in the format's 16-entry int8 table `KVALUES` (a vec4<u32> constant, entry k in byte
// k % 4 of word k / 4; the format file names which: IQ4_NL and IQ4_XS KVALUES_IQ4NL, NVFP4
// KVALUES_FP4), four codes (each 0..15) at a time. Read from the constant by `table_i8`, as
// every kernel composes it; the matvec kernels on the rows mapping compose lookup_wg.wgsl in its
// place (src/gpu/kernels/family/matvec.rs): the same values from workgroup memory.

// Entries c.x, c.y, c.z, c.w as f32 (exact: |entry| <= 127).
fn lookup4_f32(c: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(table4(KVALUES, c));
}

// Entries c.x, c.y, c.z, c.w packed as four int8 bytes (the integer path's codes).
fn lookup4_i8(c: vec4<u32>) -> u32 {
    return pack_i8(table4(KVALUES, c));
}

// Nothing to set up: kernels call this first, in uniform control flow.
fn lookup_begin(i: u32) {}
