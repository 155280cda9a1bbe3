// dequant8 and qpart8 of the grid formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) from the
// format's `grid_part(base, part) -> GridPart` (lib/iquant.wgsl): the part's values, and on the
// integer path (kernels/matvec_q8.wgsl, chunk_int8.wgsl) its codes ±g with d = db, m = 0. The
// format file sets QPART8_GROUP.

const QPART8_MIN: bool = false;

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return grid_signed8(grid_part(base, part));
}

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    return grid_qpart8(grid_part(base, part));
}
