//! The machine's memory read bandwidth as the CPU engine's threads see it: the bound on
//! decode speed, which reads every weight once per token. `cairn bench` divides a model's
//! bytes read per token by it to say how close decoding comes to that bound.

use std::time::Instant;

/// Bytes streamed per measurement: far more than any CPU's caches hold.
const BUFFER_BYTES: usize = 512 << 20;

/// Reads a 512 MiB buffer with every thread of [`super::pool::global`], each a contiguous
/// share, `repetitions` times after one warm-up, and returns the best rate in bytes/s.
pub fn measure(repetitions: usize) -> f64 {
    let words = BUFFER_BYTES / 8;
    // Written (not zeroed lazily by the OS), so that reads touch real pages.
    let buf: Vec<u64> = (0..words as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9))
        .collect();
    let pool = super::pool::global();
    let pieces = pool.threads() * 4;
    let chunk = words.div_ceil(pieces);
    let read = |p: usize| {
        let part = &buf[(p * chunk).min(words)..((p + 1) * chunk).min(words)];
        std::hint::black_box(sum(part));
    };
    let mut best = 0f64;
    for r in 0..=repetitions.max(1) {
        let t = Instant::now();
        pool.run(pieces, &read);
        let rate = BUFFER_BYTES as f64 / t.elapsed().as_secs_f64();
        if r > 0 {
            best = best.max(rate);
        }
    }
    best
}

super::multiversion! {
    /// The wrapping sum of `v`: a plain reduction, which the compiler vectorises with
    /// contiguous loads. (Summing chunks of eight into eight lanes was vectorised across the
    /// chunks with gathers under AVX-512, which on an AMD Zen 4 read at a sixth of the
    /// memory's rate and made the bound look three times lower than the decode speed.)
    fn sum(v: &[u64]) -> u64 {
        v.iter().fold(0u64, |a, &x| a.wrapping_add(x))
    }
}
