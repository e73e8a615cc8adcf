//! Micro-benchmarks of the session layer on a tiny random-weight model (written on the spot,
//! so no download): one decode step at several cache lengths, and a follow-up prompt fed with
//! prefix reuse versus from an empty cache. Throughput of the real presets is `cairn bench`.

use std::sync::Arc;

use cairn::model::gguf::GgufFile;
use cairn::model::{self, LoadOptions, Model, Session};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

#[path = "../tests/it/common.rs"]
mod common;

fn tiny(context: usize) -> (tempfile::TempDir, Arc<Model>) {
    let spec = common::TinySpec {
        context,
        ..common::TinySpec::qwen2()
    };
    let (dir, path) = common::tiny_model(&spec);
    let mut gguf = GgufFile::open(&path).expect("open");
    let model = model::load(&mut gguf, &LoadOptions::default()).expect("load");
    (dir, Arc::new(model))
}

fn tokens(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| (i * 7 + 3) % 256).collect()
}

fn decode_step(c: &mut Criterion) {
    let (_d, model) = tiny(4096);
    let mut group = c.benchmark_group("decode_step");
    for len in [16usize, 256, 2048] {
        let mut s = Session::new(model.clone());
        s.feed(&tokens(len)).expect("prefill");
        group.bench_with_input(BenchmarkId::from_parameter(len), &len, |b, &len| {
            b.iter(|| {
                s.append(&[65]).expect("step");
                s.truncate(len);
            })
        });
    }
    group.finish();
}

fn prefix_reuse(c: &mut Criterion) {
    let (_d, model) = tiny(4096);
    let history = tokens(1024);
    let mut next = history.clone();
    next.extend(tokens(32));
    let mut group = c.benchmark_group("follow_up_prompt_1024+32");
    let mut warm = Session::new(model.clone());
    group.bench_function("reused_prefix", |b| {
        b.iter(|| {
            warm.feed(&history).expect("history");
            warm.feed(&next).expect("follow-up")[0]
        })
    });
    group.bench_function("from_empty", |b| {
        b.iter(|| {
            let mut cold = Session::new(model.clone());
            cold.feed(&next).expect("follow-up")[0]
        })
    });
    group.finish();
}

criterion_group!(benches, decode_step, prefix_reuse);
criterion_main!(benches);
