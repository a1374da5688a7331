//! Randomness, as the executor hands it to scripts.
//!
//! # Design
//! Scripts own no randomness: each CPU's stream comes from the executor, derived from one
//! root seed with [`cpu_seed`], so a run replays from `(workload, params, cpus, seed)`.
//! [`Rng`] is one required method plus the few distributions the workloads use, as
//! provided methods so that a `&mut dyn Rng` is enough.
//!
//! What it cannot promise: [`Rng::normal`] and [`Rng::lognormal`] use `ln`, `cos` and
//! `exp` from the platform's libm, so their last bits may differ between platforms (not
//! between runs on one platform).

/// A source of uniformly distributed 64-bit words, plus derived distributions.
pub trait Rng {
    /// The next uniformly distributed word.
    fn next_u64(&mut self) -> u64;

    /// Uniform in `0..n`, by Lemire's multiply-high (bias below n / 2^64, negligible).
    ///
    /// # Panics
    /// If `n == 0`.
    fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Rng::below(0)");
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`, with 53 random bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `true` with probability `percent` / 100 (`percent >= 100` is always `true`).
    fn percent(&mut self, percent: u32) -> bool {
        self.below(100) < u64::from(percent)
    }

    /// `true` with probability `per_mille` / 1000.
    fn per_mille(&mut self, per_mille: u32) -> bool {
        self.below(1000) < u64::from(per_mille)
    }

    /// Standard normal, by Box–Muller (one of the pair; simple beats fast here).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln is finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Log-normal with the given median (= e^mu) and shape `sigma`.
    fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, passes BigCrush; the dry run's
/// generator and a fine per-CPU stream for the executors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }
}

impl Rng for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The seed of `cpu`'s stream in a run with root seed `root`. Both executors use it, so
/// a workload sees the same random streams on threads, in the simulator and in the dry
/// run.
pub fn cpu_seed(root: u64, cpu: u32) -> u64 {
    let mut mix = SplitMix64::new(root ^ u64::from(cpu).wrapping_mul(0xD1B5_4A32_D192_ED03));
    mix.next_u64();
    mix.next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // First outputs for seed 0 from the reference implementation.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_and_unit_stay_in_range() {
        let mut r = SplitMix64::new(7);
        for n in 1..200 {
            assert!(r.below(n) < n);
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
    }

    #[test]
    fn lognormal_median_is_close() {
        let mut r = SplitMix64::new(42);
        let mut v: Vec<f64> = (0..20_001).map(|_| r.lognormal(1000.0, 1.0)).collect();
        v.sort_by(f64::total_cmp);
        let median = v[v.len() / 2];
        assert!((900.0..1100.0).contains(&median), "median {median}");
    }

    #[test]
    fn cpu_streams_differ() {
        assert_ne!(cpu_seed(1, 0), cpu_seed(1, 1));
        assert_ne!(cpu_seed(1, 0), cpu_seed(2, 0));
        assert_eq!(cpu_seed(3, 5), cpu_seed(3, 5));
    }
}
