//! How many distinct buffer pairs one timed run rotates through, so that the adapter's caches
//! cannot hold what it reads: the pure planning behind [`crate::bench::run`].
//!
//! A timed run records `pairs` dequantisations (and, timed apart, `pairs` buffer copies and
//! `pairs` shader copies), each over its own source and output buffer, and reports the time per
//! dequantisation. `pairs` is the fewest for which `pairs × traffic` reaches the adapter's
//! target ([`target_for`]: 1 GiB on a discrete GPU, 256 MiB elsewhere), bounded by
//! [`MAX_PAIRS`] and by [`HOST_CAP`] bytes of buffers alive at once, and at least 1.

/// Traffic target of one timed run on a discrete GPU: 1 GiB, more than any GPU's caches.
pub const DISCRETE_TARGET: u64 = 1 << 30;

/// Traffic target on every other adapter (integrated, virtual, software, other): 256 MiB, more
/// than the last-level cache of the CPUs that run software adapters and of integrated GPUs'
/// system caches, and small enough to keep a run of every format on a software adapter in
/// minutes. wgpu reports no memory size, so the device type stands for it.
pub const SHARED_TARGET: u64 = 256 << 20;

/// The most bytes of buffers one measurement keeps alive (on a software adapter that is host
/// memory, and uploads stage through host memory everywhere): 2 GiB.
pub const HOST_CAP: u64 = 2 << 30;

/// The most buffer pairs a timed run rotates through (bounds the recording work of tiny sizes).
pub const MAX_PAIRS: u64 = 1024;

/// The traffic target of one timed run on an adapter of `device_type`.
pub fn target_for(device_type: wgpu::DeviceType) -> u64 {
    match device_type {
        wgpu::DeviceType::DiscreteGpu => DISCRETE_TARGET,
        _ => SHARED_TARGET,
    }
}

/// What one timed run of a measurement rotates through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// Distinct source/output buffer pairs, each used once per timed run.
    pub pairs: u64,
    /// The traffic target the count was planned for.
    pub target_bytes: u64,
    /// Bytes one timed run moves: `pairs × traffic`.
    pub bytes_per_run: u64,
}

/// The rotation for a measurement moving `traffic` bytes (read + written) per dequantisation
/// whose buffer pair takes `pair_bytes`: `ceil(target / traffic)` pairs, at most [`MAX_PAIRS`]
/// and at most `host_cap / pair_bytes`, at least 1.
pub fn plan_rotation(traffic: u64, pair_bytes: u64, target: u64, host_cap: u64) -> Rotation {
    let wanted = target.div_ceil(traffic.max(1));
    let pairs = wanted
        .min(MAX_PAIRS)
        .min(host_cap / pair_bytes.max(1))
        .max(1);
    Rotation {
        pairs,
        target_bytes: target,
        bytes_per_run: pairs.saturating_mul(traffic),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn enough_pairs_to_reach_the_target() {
        // 4 MiB of f16 from Q4_0: 1.125 MiB in + 2 MiB out.
        let traffic = 3 * MIB + MIB / 8;
        let r = plan_rotation(traffic, traffic, DISCRETE_TARGET, HOST_CAP);
        assert_eq!(r.pairs, 328);
        assert!(r.bytes_per_run >= DISCRETE_TARGET);
        assert!((r.pairs - 1) * traffic < DISCRETE_TARGET, "the fewest");
        let r = plan_rotation(traffic, traffic, SHARED_TARGET, HOST_CAP);
        assert_eq!(r.pairs, 82);
        assert_eq!(r.target_bytes, SHARED_TARGET);
        // Exactly a divisor: no extra pair.
        assert_eq!(plan_rotation(MIB, MIB, 256 * MIB, HOST_CAP).pairs, 256);
    }

    #[test]
    fn bounded_by_the_cap_the_pair_limit_and_one() {
        // Tiny cases stop at MAX_PAIRS, short of the target.
        let r = plan_rotation(64 << 10, 64 << 10, DISCRETE_TARGET, HOST_CAP);
        assert_eq!(r.pairs, MAX_PAIRS);
        assert_eq!(r.bytes_per_run, MAX_PAIRS * (64 << 10));
        // The host cap counts buffer bytes, which may exceed the traffic.
        assert_eq!(plan_rotation(MIB, 8 * MIB, 1 << 40, 64 * MIB).pairs, 8);
        // A case larger than the target, or than the cap, still runs once.
        assert_eq!(
            plan_rotation(2 << 30, 2 << 30, SHARED_TARGET, HOST_CAP).pairs,
            1
        );
        assert_eq!(
            plan_rotation(MIB, 4 << 30, SHARED_TARGET, HOST_CAP).pairs,
            1
        );
        assert_eq!(
            plan_rotation(0, 0, SHARED_TARGET, HOST_CAP).pairs,
            MAX_PAIRS
        );
    }

    #[test]
    fn discrete_gpus_get_a_gibibyte() {
        assert_eq!(target_for(wgpu::DeviceType::DiscreteGpu), 1 << 30);
        for t in [
            wgpu::DeviceType::IntegratedGpu,
            wgpu::DeviceType::VirtualGpu,
            wgpu::DeviceType::Cpu,
            wgpu::DeviceType::Other,
        ] {
            assert_eq!(target_for(t), 256 << 20, "{t:?}");
        }
    }
}
