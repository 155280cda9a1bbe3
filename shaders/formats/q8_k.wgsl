// Q8_K (ggml id 15): 256 values in 292 bytes. Spec: formats.md §4.8. CPU twin: src/formats/kquant/q8_k.rs
// Thread mapping (shared entry): 32 invocations per super-block, 8 contiguous values each: part p
// decodes qs[8p ..][+8]. `bsums` is redundant and ignored, as on the CPU.
// y = d * int8(qs) with an f32 `d`: unlike the f16-scaled formats this product can round (24 + 8
// bits). WGSL's f32 multiply is correctly rounded, so for a normal, infinite or NaN `d` (a normal d
// times a nonzero int8 is never subnormal) it is the CPU's product. A subnormal `d` a GPU may
// flush, so for a zero exponent field the product is rebuilt from integers scaled into the
// normal range. Both are computed and one is selected: no branch, so the matvec kernels' unrolled
// blocks stay straight-line code (32 copies of a branch made SwiftShader 1.6x slower).

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 292u;
const Q8_K_D: u32 = 0u;        // f32 scale
const Q8_K_QS: u32 = 4u;       // int8[256], one per value
const Q8_K_BSUMS: u32 = 260u;  // int16[16], sums of 16 qs (ignored)

// The f32 bits of `d` (bits `db`, exponent field 0: subnormal or zero) times the int8 codes `q`,
// correctly rounded. d = M * 2^-149 with the significand M < 2^23, so d * q = M q 2^-149. The f32
// product p = M |q| (exact factors, p < 2^30) is correctly rounded to 24 bits and never
// subnormal. Below 2^24 it is the exact integer n = M |q|, whose bits as a u32 are those of
// n * 2^-149 (subnormals and the first binade); from 2^24 on, p * 2^-149 is normal and its bits
// are p's with the exponent field lowered by 149 (the same rounding: a power of two apart).
fn q8_k_mul_subnormal(db: u32, q: vec4<i32>) -> vec4<u32> {
    let p = abs(f32(db & MANT_MASK_F32) * vec4<f32>(q));
    let scaled = bitcast<vec4<u32>>(p) - vec4<u32>(149u << 23u);
    let mag = select(scaled, vec4<u32>(p), p < vec4<f32>(16777216.0));
    let neg = select(vec4<u32>(0u), vec4<u32>(0x80000000u), q < vec4<i32>(0));
    return (vec4<u32>(db & 0x80000000u) ^ neg) | mag;
}

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let db = load_word(base + Q8_K_D);
    let at = base + Q8_K_QS + 8u * part;
    let lo = sbytes4(load_word(at));
    let hi = sbytes4(load_word(at + 4u));
    let d = bitcast<f32>(db);
    let product = bits8(d * vec4<f32>(lo), d * vec4<f32>(hi));
    let subnormal = (db & EXP_MASK_F32) == 0u;
    return array<vec4<u32>, 2>(
        select(product[0], q8_k_mul_subnormal(db, lo), subnormal),
        select(product[1], q8_k_mul_subnormal(db, hi), subnormal),
    );
}
