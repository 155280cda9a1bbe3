// TQ1_0 (ggml id 34): 256 values in 54 bytes. Spec: formats.md §4.23. CPU twin: src/formats/ternary/tq1_0.rs
// Thread mapping (shared entry): 32 invocations per super-block, 8 contiguous values each, all of
// one digit n of 8 consecutive bytes except in the last two parts:
//   p < 20:       y[32n + m ..][+8], n = p / 4, m = 8 (p % 4): digit n of qs[m ..][+8]
//   20 <= p < 30: y[160 + 16n + m ..][+8], n = (p - 20) / 2, m = 8 (p % 2): digit n of qs[32 + m ..]
//   p >= 30:      y[240 + 8 (p - 30) ..][+8]: digits 2 (p - 30) and 2 (p - 30) + 1 of qh[0..4]
// Digit n of a byte: q = (byte * 3^n) mod 256, t = (q * 3) >> 8, value (t - 1) * d: one multiply
// of -1, 0 or 1 by an f16 value, exact on every GPU.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 54u;
const TQ1_0_QS: u32 = 0u;    // 48 bytes: 5 trits per byte (base-3 fixed-point fraction of 256)
const TQ1_0_QH: u32 = 48u;   // 4 bytes: 4 trits per byte
const TQ1_0_D: u32 = 52u;    // f16 scale

// The CPU's POW3 = [1, 3, 9, 27, 81, 243], one byte each, entry n in byte n % 4 of word n / 4.
const POW3: vec2<u32> = vec2<u32>(0x1B090301u, 0x0000F351u);

// Digit n (0 = most significant) of the four bytes of `w`, as t - 1 (-1, 0 or 1).
fn trits4(w: u32, n: u32) -> vec4<i32> {
    let pow3 = (POW3[n >> 2u] >> (8u * (n & 3u))) & 0xFFu;
    let q = (bytes4(w) * pow3) & vec4<u32>(0xFFu);
    return vec4<i32>((q * 3u) >> vec4<u32>(8u)) - vec4<i32>(1);
}

// The trits of part p, as t - 1: its two halves.
fn part_trits(base: u32, part: u32) -> array<vec4<i32>, 2> {
    var at = base + TQ1_0_QS + 8u * (part & 3u);   // p < 20
    var n0 = part >> 2u;
    var n1 = n0;
    if (part >= 30u) {
        at = base + TQ1_0_QH;
        n0 = 2u * (part - 30u);
        n1 = n0 + 1u;
    } else if (part >= 20u) {
        at = base + TQ1_0_QS + 32u + 8u * (part & 1u);
        n0 = (part - 20u) >> 1u;
        n1 = n0;
    }
    // For p >= 30 both halves are the four qh bytes (digits n0 and n1).
    let w1 = select(load_u32(at + 4u), load_u32(at), part >= 30u);
    return array<vec4<i32>, 2>(trits4(load_u32(at), n0), trits4(w1, n1));
}

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let d = f16_le(base + TQ1_0_D);
    let t = part_trits(base, part);
    return bits8(vec4<f32>(t[0]) * d, vec4<f32>(t[1]) * d);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, its values
// d * q (m = 0); the same trits as dequant8.
const QPART8_MIN: bool = false;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale and min per 32 values or more).
const QPART8_GROUP: u32 = 4u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let t = part_trits(base, part);
    return qpart(pack_i8(t[0]), pack_i8(t[1]), f16_le(base + TQ1_0_D), 0.0);
}
