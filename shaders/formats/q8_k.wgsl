// Q8_K (ggml id 15): 256 values in 292 bytes. Spec: formats.md §4.8. CPU twin: src/formats/kquant/q8_k.rs
// Thread mapping (shared entry): 32 invocations per super-block, 8 contiguous values each: part p
// decodes qs[8p ..][+8]. `bsums` is redundant and ignored, as on the CPU.
// y = d * int8(qs) with an f32 `d`: unlike the f16-scaled formats this product can round (24 + 8
// bits), and it is an f32 subnormal whenever d is, which a GPU may flush. So for finite d it is
// built with integer operations as the correctly rounded (nearest even) f32, subnormals and
// overflow to Inf included, independent of the adapter's multiply and flushing; only Inf and NaN
// scales take the float multiply (Inf * 0 = NaN, Inf * q = +-Inf, NaN stays NaN).

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 292u;
const Q8_K_D: u32 = 0u;        // f32 scale
const Q8_K_QS: u32 = 4u;       // int8[256], one per value
const Q8_K_BSUMS: u32 = 260u;  // int16[16], sums of 16 qs (ignored)

// The f32 bits of the finite `d` (bits `db`, exponent field below 255) times the int8 codes `q`,
// rounded to nearest even. With e the exponent field and M the significand (implicit bit included
// when e > 0), d = M * 2^(max(e, 1) - 150), so d * q = n * 2^-149 * 2^(max(e, 1) - 1) with the
// exact integer n = M * |q| < 2^31. For n < 2^24 the bits of n * 2^-149 are n itself (subnormals
// and the first binade); above, n is cut to 24 significant bits, s = lead - 23 bits lower, and
// the bits are (s << 23) + the rounded significand (a carry moves into the exponent). Multiplying
// a normal result by 2^(max(e, 1) - 1) adds to the exponent field; reaching 255 is Inf.
fn q8_k_mul(db: u32, q: vec4<i32>) -> vec4<u32> {
    let e = (db >> 23u) & 0xFFu;
    let sig = (db & MANT_MASK_F32) | select(0u, 0x00800000u, e != 0u);
    let n = vec4<u32>(sig) * vec4<u32>(abs(q));
    let s = max(firstLeadingBit(n | vec4<u32>(1u)), vec4<u32>(23u)) - vec4<u32>(23u);
    let r = n >> s;
    let rem = n - (r << s);
    let half_ulp = (vec4<u32>(1u) << s) >> vec4<u32>(1u);   // 0 when s = 0 (exact)
    let up = (rem > half_ulp) | ((rem == half_ulp) & (half_ulp != vec4<u32>(0u)) & ((r & vec4<u32>(1u)) == vec4<u32>(1u)));
    let bits = (s << vec4<u32>(23u)) + r + select(vec4<u32>(0u), vec4<u32>(1u), up);
    let scaled = min(bits + vec4<u32>((max(e, 1u) - 1u) << 23u), vec4<u32>(EXP_MASK_F32));
    let mag = select(vec4<u32>(0u), scaled, n != vec4<u32>(0u));
    let neg = select(vec4<u32>(0u), vec4<u32>(0x80000000u), q < vec4<i32>(0));
    return (vec4<u32>(db & 0x80000000u) ^ neg) | mag;
}

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let db = load_u32(base + Q8_K_D);
    let at = base + Q8_K_QS + 8u * part;
    let lo = sbytes4(load_u32(at));
    let hi = sbytes4(load_u32(at + 4u));
    if ((db & EXP_MASK_F32) == EXP_MASK_F32) {
        let d = bitcast<f32>(db);
        return bits8(d * vec4<f32>(lo), d * vec4<f32>(hi));
    }
    return array<vec4<u32>, 2>(q8_k_mul(db, lo), q8_k_mul(db, hi));
}
