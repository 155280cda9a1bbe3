// dequant8 and qpart8 of IQ1_S and IQ1_M from the format's `delta_part(base, part) ->
// DeltaPart` (lib/iquant.wgsl): the part's values, and on the integer path
// (kernels/matvec_q8.wgsl, chunk_int8.wgsl) its codes 8 g ± 1 with d = dl / 8, m = 0. The format
// file sets QPART8_GROUP.

const QPART8_MIN: bool = false;

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return delta_dequant8(delta_part(base, part));
}

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    return delta_qpart8(delta_part(base, part));
}
