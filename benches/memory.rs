//! Memory micro-benchmarks on a real file in WAL mode: recalling the top 5 facts out of
//! 100 000 (target under 5 ms), and appending one committed step (target under 1 ms).
//!
//! The facts are 8–16 words drawn from a 5 000-word vocabulary with a skewed (Zipf-like)
//! frequency, spread over ten sessions plus global ones and over thirty days of age, so a
//! query matches a few hundred to a few thousand facts as a real one would.

use std::hint::black_box;
use std::time::{Duration, SystemTime};

use cairn::memory::{FactScope, MemoryStore, NewFact, SessionId, StepRecord};
use criterion::{criterion_group, criterion_main, Criterion};

const FACTS: usize = 100_000;
const VOCAB: usize = 5_000;

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    /// A word index skewed towards small indices (common words).
    fn word(&mut self) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((VOCAB as f64).powf(u) as usize).min(VOCAB - 1)
    }
}

fn word(i: usize) -> String {
    const SYL: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "de", "fo", "gu", "ha", "ji", "pe", "qu",
        "zo",
    ];
    let mut w = String::new();
    let mut n = i + 16;
    while n > 0 {
        w.push_str(SYL[n % 16]);
        n /= 16;
    }
    w
}

fn build(dir: &std::path::Path) -> (MemoryStore, Vec<SessionId>) {
    let store = MemoryStore::open(&dir.join("memory.sqlite")).expect("open memory");
    let sessions: Vec<SessionId> = (0..10)
        .map(|i| store.session(&format!("s{i}")).expect("session"))
        .collect();
    let mut rng = Lcg(7);
    let now = SystemTime::now();
    let mut batch = Vec::with_capacity(10_000);
    for i in 0..FACTS {
        let len = 8 + (rng.next() % 9) as usize;
        let text: Vec<String> = (0..len).map(|_| word(rng.word())).collect();
        let scope = if i % 11 == 0 {
            FactScope::Global
        } else {
            FactScope::Session(sessions[i % sessions.len()])
        };
        batch.push(NewFact {
            text: format!("{} {i}", text.join(" ")),
            scope,
            source_step: None,
            created_at: Some(now - Duration::from_secs(rng.next() % (30 * 24 * 3600))),
        });
        if batch.len() == 10_000 {
            store.add_facts(&batch).expect("add facts");
            batch.clear();
        }
    }
    store.add_facts(&batch).expect("add facts");
    (store, sessions)
}

fn bench_memory(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, sessions) = build(dir.path());
    let mut rng = Lcg(99);
    // Queries of 3 words from the middle of the vocabulary, plus a few stop words.
    let queries: Vec<String> = (0..32)
        .map(|_| {
            let w: Vec<String> = (0..3)
                .map(|_| word(50 + (rng.next() as usize % 2_000)))
                .collect();
            format!("what is the {} of {} and {}", w[0], w[1], w[2])
        })
        .collect();
    let mut i = 0usize;
    c.bench_function("recall top 5 of 100k facts", |b| {
        b.iter(|| {
            i += 1;
            let q = &queries[i % queries.len()];
            black_box(
                store
                    .recall(sessions[i % sessions.len()], q, 5, 0.9)
                    .expect("recall"),
            )
        })
    });
    c.bench_function("search top 5 of 100k facts, read-only", |b| {
        b.iter(|| {
            i += 1;
            let q = &queries[i % queries.len()];
            black_box(store.search_facts(q, 5, 0.9).expect("search"))
        })
    });

    let turn = store
        .begin_turn(sessions[0], "a long task")
        .expect("begin turn");
    let record = StepRecord {
        round: 1,
        thought: "count the rows of the sales table".into(),
        action: "sql".into(),
        args_json: r#"{"query":"SELECT COUNT(*) FROM sales WHERE year = 2023"}"#.into(),
        observation: "COUNT(*)\n1234\n".repeat(20),
        outcome: "ok".into(),
        error_class: None,
        latency_ms: 12,
        prompt_tokens: 900,
        generated_tokens: 40,
    };
    c.bench_function("append one step (committed, WAL)", |b| {
        b.iter(|| black_box(store.record_step(turn, &record).expect("record step")))
    });
}

criterion_group!(benches, bench_memory);
criterion_main!(benches);
