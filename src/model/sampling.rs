//! Choosing the next token from logits: [`Sampler::Greedy`] or [`Sampler::Random`] with
//! temperature, top-k and top-p, from a seeded generator so a run can be repeated.

/// Sampling settings as the user gives them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f32,
    /// Keep only the k most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches p (1.0 = all).
    pub top_p: f32,
    /// Seed of the random generator.
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            seed: 42,
        }
    }
}

impl SamplingParams {
    /// Checks the values, naming the bad one.
    pub fn validate(&self) -> Result<(), String> {
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(format!(
                "--temperature must be 0 or more, got {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!("--top-p must be in (0, 1], got {}", self.top_p));
        }
        Ok(())
    }
}

/// A small, fast, seedable generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How the next token is chosen.
#[derive(Debug, Clone)]
pub enum Sampler {
    /// The most likely token (ties go to the lowest id).
    Greedy,
    /// A draw from the tempered, truncated distribution.
    Random {
        /// Divides the logits.
        temperature: f32,
        /// Keep the k most likely (0 = all).
        top_k: usize,
        /// Nucleus threshold.
        top_p: f32,
        /// The generator.
        rng: Rng,
    },
}

impl Sampler {
    /// The sampler for these settings: greedy when the temperature is 0.
    pub fn new(p: &SamplingParams) -> Self {
        if p.temperature <= 0.0 {
            Sampler::Greedy
        } else {
            Sampler::Random {
                temperature: p.temperature,
                top_k: p.top_k,
                top_p: p.top_p,
                rng: Rng::new(p.seed),
            }
        }
    }

    /// Picks a token. Logits of `-inf` (masked tokens) are never picked unless every logit is.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        match self {
            Sampler::Greedy => argmax(logits),
            Sampler::Random {
                temperature,
                top_k,
                top_p,
                rng,
            } => {
                let mut cand: Vec<(u32, f32)> = logits
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.is_finite())
                    .map(|(i, &l)| (i as u32, l))
                    .collect();
                if cand.is_empty() {
                    return argmax(logits);
                }
                cand.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                if *top_k > 0 && cand.len() > *top_k {
                    cand.truncate(*top_k);
                }
                let max = cand[0].1;
                let mut probs: Vec<f64> = cand
                    .iter()
                    .map(|(_, l)| (((l - max) / *temperature) as f64).exp())
                    .collect();
                let sum: f64 = probs.iter().sum();
                probs.iter_mut().for_each(|p| *p /= sum);
                let mut keep = probs.len();
                if *top_p < 1.0 {
                    let mut acc = 0.0;
                    for (i, p) in probs.iter().enumerate() {
                        acc += p;
                        if acc >= *top_p as f64 {
                            keep = i + 1;
                            break;
                        }
                    }
                }
                let total: f64 = probs[..keep].iter().sum();
                let mut r = rng.next_f64() * total;
                for i in 0..keep {
                    r -= probs[i];
                    if r <= 0.0 {
                        return cand[i].0;
                    }
                }
                cand[keep - 1].0
            }
        }
    }
}

/// The index of the largest value (the first on ties; NaN never wins).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut best_v = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best_v {
            best = i;
            best_v = v;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_largest_and_skips_masked() {
        let mut s = Sampler::Greedy;
        assert_eq!(s.sample(&[0.1, 3.0, f32::NEG_INFINITY, 2.9]), 1);
    }

    #[test]
    fn same_seed_same_draws_and_masked_never_drawn() {
        let p = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 7,
        };
        let logits = [1.0, f32::NEG_INFINITY, 1.0, 0.5];
        let draws = |p: &SamplingParams| {
            let mut s = Sampler::new(p);
            (0..200).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        let a = draws(&p);
        assert_eq!(a, draws(&p));
        assert!(!a.contains(&1));
        assert!(a.contains(&0) && a.contains(&2) && a.contains(&3));
    }

    #[test]
    fn top_k_one_is_greedy() {
        let p = SamplingParams {
            temperature: 5.0,
            top_k: 1,
            top_p: 1.0,
            seed: 1,
        };
        let mut s = Sampler::new(&p);
        for _ in 0..50 {
            assert_eq!(s.sample(&[0.0, 0.2, 0.1]), 1);
        }
    }
}
