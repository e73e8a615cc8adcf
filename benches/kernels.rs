//! Benchmarks of the CPU kernels on the matrix shapes of the two presets, with random
//! weights: one token (decode: weight bytes streamed per second, to set against the
//! machine's memory bandwidth) and a 512-token batch (prefill: multiply-adds per second),
//! for every instruction set the CPU has. The instruction set is fixed once per process, so the
//! instruction sets other than the best one are measured through the single-row kernel
//! directly (`dot/…`), as is the matmul of the best one (`matmul/…`). `bandwidth/read` is
//! the yardstick for the decode figures: every thread of cairn's pool summing its share of a
//! 256 MiB buffer, far larger than any cache.

use cairn::model::cpu::kernels::{self, Format, Isa, Q8Row};
use cairn::model::cpu::matmul::{self, Acts, QMatrix, Stored};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u32 ^ seed).wrapping_mul(2654435761).rotate_left(13);
            (h % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn matrix(stored: Stored, rows: usize, cols: usize) -> QMatrix {
    let dtype = match stored {
        Stored::Q4_1 => GgmlDType::Q4_1,
        Stored::Q5_0 => GgmlDType::Q5_0,
        Stored::Q8_0 => GgmlDType::Q8_0,
        Stored::Q4K => GgmlDType::Q4K,
        Stored::Q6K => GgmlDType::Q6K,
    };
    let t = Tensor::from_vec(values(rows * cols, 1), (rows, cols), &Device::Cpu).unwrap();
    let q = QTensor::quantize(&t, dtype).unwrap();
    QMatrix::from_bytes(stored, rows, cols, &q.data().unwrap()).unwrap()
}

/// (name, stored type, rows, cols): the presets' matrices.
const SHAPES: &[(&str, Stored, usize, usize)] = &[
    ("smollm2.attn_q", Stored::Q4_1, 576, 576),
    ("smollm2.ffn_up", Stored::Q4_1, 1536, 576),
    ("smollm2.ffn_down", Stored::Q4_1, 576, 1536),
    ("smollm2.output", Stored::Q8_0, 49152, 576),
    ("qwen.attn_q", Stored::Q5_0, 896, 896),
    ("qwen.ffn_up", Stored::Q5_0, 4864, 896),
    ("qwen.ffn_down_q4k", Stored::Q4K, 896, 4864),
    ("qwen.ffn_down_q6k", Stored::Q6K, 896, 4864),
    ("qwen1.5b.ffn_up_q4k", Stored::Q4K, 8960, 1536),
    ("qwen1.5b.ffn_down_q6k", Stored::Q6K, 1536, 8960),
];

fn matmuls(c: &mut Criterion) {
    let mut group = c.benchmark_group("matmul");
    group.sample_size(10);
    for &(name, stored, rows, cols) in SHAPES {
        let m = matrix(stored, rows, cols);
        for n in [1usize, 512] {
            if n > 1 && name.ends_with("output") {
                continue; // prefill runs the output projection for the last token only
            }
            let mut acts = Acts::default();
            acts.quantize(&values(n * cols, 2), n, cols, &[&m]);
            let mut y = vec![0f32; n * rows];
            if n == 1 {
                group.throughput(Throughput::Bytes(m.bytes() as u64));
            } else {
                group.throughput(Throughput::Elements((2 * rows * cols * n) as u64));
            }
            let id = format!("{name}/{}/n{n}", Isa::detect().name());
            group.bench_function(BenchmarkId::from_parameter(id), |b| {
                b.iter(|| matmul::matmul(&[&m], &acts, &mut [&mut y]))
            });
        }
    }
    group.finish();
}

fn dots(c: &mut Criterion) {
    let mut group = c.benchmark_group("dot");
    let cols = 4864;
    let x = values(cols, 3);
    let blocks = cols / kernels::QK;
    let (mut qs, mut d, mut s) = (vec![0i8; cols], vec![0f32; blocks], vec![0f32; blocks]);
    kernels::quantize_row(&x, &mut qs, &mut d, &mut s);
    let row = [Q8Row {
        qs: &qs,
        d: &d,
        s: &s,
    }];
    // The AVX-512 kernel reads the pair layout, made once per matmul in cairn.
    let np = kernels::pairs(blocks);
    let (mut qp, mut dp, mut sp) = (
        vec![0u8; np * kernels::PAIR_BYTES],
        vec![0f32; 2 * np],
        vec![0f32; 2 * np],
    );
    kernels::pair_layout(&row[0], &mut qp, &mut dp, &mut sp);
    let mut ptrs = kernels::XPtrs::new(&row);
    ptrs.qp[0] = qp.as_ptr();
    ptrs.dp[0] = dp.as_ptr();
    ptrs.sp[0] = sp.as_ptr();
    for (format, stored) in [
        (Format::Q4_1, Stored::Q4_1),
        (Format::Q5_0, Stored::Q5_0),
        (Format::Q8_0, Stored::Q8_0),
    ] {
        let w = matrix(stored, 1, cols);
        let raw = raw_row(&w, format, cols);
        group.throughput(Throughput::Bytes(raw.len() as u64));
        for isa in Isa::all_supported() {
            let id = format!("{format:?}/{}", isa.name());
            group.bench_function(BenchmarkId::from_parameter(id), |b| {
                // SAFETY: `isa` is supported; the row and activations hold `blocks` blocks,
                // the pair layout included.
                b.iter(|| unsafe { kernels::dot_raw(isa, format, raw.as_ptr(), blocks, &ptrs) })
            });
        }
    }
    group.finish();
}

/// The row's blocks as stored (re-made from its dequantized values for the dot benches).
fn raw_row(m: &QMatrix, format: Format, cols: usize) -> Vec<u8> {
    let mut v = vec![0f32; cols];
    m.dequantize_row(0, &mut v);
    let dtype = match format {
        Format::Q4_1 => GgmlDType::Q4_1,
        Format::Q5_0 => GgmlDType::Q5_0,
        Format::Q8_0 => GgmlDType::Q8_0,
    };
    let t = Tensor::from_vec(v, (1, cols), &Device::Cpu).unwrap();
    QTensor::quantize(&t, dtype)
        .unwrap()
        .data()
        .unwrap()
        .to_vec()
}

fn bandwidth(c: &mut Criterion) {
    let words = (256usize << 20) / 8;
    let buf: Vec<u64> = (0..words as u64).collect();
    let pool = cairn::model::cpu::pool::global();
    let pieces = pool.threads();
    let mut group = c.benchmark_group("bandwidth");
    group.sample_size(10);
    group.throughput(Throughput::Bytes((words * 8) as u64));
    group.bench_function("read", |b| {
        b.iter(|| {
            let total = std::sync::atomic::AtomicU64::new(0);
            pool.run(pieces, &|p| {
                let part = &buf[p * words / pieces..(p + 1) * words / pieces];
                let mut lanes = [0u64; 8];
                for chunk in part.chunks_exact(8) {
                    for (l, &v) in lanes.iter_mut().zip(chunk) {
                        *l = l.wrapping_add(v);
                    }
                }
                let sum = lanes.iter().fold(0u64, |a, &v| a.wrapping_add(v));
                total.fetch_add(sum, std::sync::atomic::Ordering::Relaxed);
            });
            std::hint::black_box(total.into_inner())
        })
    });
    group.finish();
}

criterion_group!(benches, bandwidth, matmuls, dots);
criterion_main!(benches);
