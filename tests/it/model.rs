//! The model runtime on tiny random-weight GGUF files of both architectures: loading, the
//! forward pass, and the KV cache's prefix reuse, truncation and snapshots.

use std::sync::Arc;

use cairn::model::gguf::GgufFile;
use cairn::model::{self, Engine, LoadOptions, Model, ModelError, Session};

use crate::common::{tiny_model, TinySpec, VOCAB};

fn load(spec: &TinySpec, requantize: bool) -> (tempfile::TempDir, Arc<Model>) {
    load_with(spec, Engine::Native, requantize)
}

fn load_with(spec: &TinySpec, engine: Engine, requantize: bool) -> (tempfile::TempDir, Arc<Model>) {
    let (dir, path) = tiny_model(spec);
    let mut gguf = GgufFile::open(&path).expect("open tiny gguf");
    let opts = LoadOptions {
        requantize,
        engine,
        ..LoadOptions::default()
    };
    let model = model::load(&mut gguf, &opts).expect("load tiny model");
    (dir, Arc::new(model))
}

fn logits(session: &mut Session, tokens: &[u32]) -> Vec<f32> {
    session.feed(tokens).expect("feed").to_vec()
}

fn assert_close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(worst <= 1e-4, "{what}: logits differ by up to {worst}");
}

fn specs() -> Vec<TinySpec> {
    vec![TinySpec::llama(), TinySpec::qwen2()]
}

const PREFIX: [u32; 7] = [256, 72, 101, 108, 108, 111, 32];
const SUFFIX: [u32; 6] = [119, 111, 114, 108, 100, 33];

#[test]
fn tiny_models_of_both_architectures_load_and_give_finite_logits() {
    for spec in specs() {
        let (_d, model) = load(&spec, true);
        assert_eq!(model.config.arch, spec.arch);
        assert_eq!(model.config.vocab, VOCAB);
        let mut s = Session::new(model);
        let l = logits(&mut s, &PREFIX);
        assert_eq!(l.len(), VOCAB);
        assert!(
            l.iter().all(|x| x.is_finite()),
            "{}: non-finite logits",
            spec.arch
        );
        assert!(
            l.iter().any(|x| *x != l[0]),
            "{}: constant logits",
            spec.arch
        );
    }
}

#[test]
fn feeding_a_longer_sequence_reuses_the_prefix_and_matches_a_fresh_session() {
    for spec in specs() {
        let (_d, model) = load(&spec, true);
        let full: Vec<u32> = PREFIX.iter().chain(&SUFFIX).copied().collect();

        let mut reused = Session::new(model.clone());
        logits(&mut reused, &PREFIX);
        let after = logits(&mut reused, &full);
        assert_eq!(
            reused.last_feed().reused,
            PREFIX.len(),
            "{}: prefix not reused",
            spec.arch
        );
        assert_eq!(reused.last_feed().computed, SUFFIX.len());

        // A fresh session fed the same chunks one after the other.
        let mut fresh = Session::new(model.clone());
        fresh.feed(&PREFIX).expect("feed");
        let chunked = fresh.append(&SUFFIX).expect("append").to_vec();
        assert_close(&after, &chunked, spec.arch);

        // And the whole sequence in one go, and one token at a time.
        let mut whole = Session::new(model.clone());
        assert_close(&after, &logits(&mut whole, &full), spec.arch);
        let mut single = Session::new(model.clone()).with_chunk(1);
        assert_close(&after, &logits(&mut single, &full), spec.arch);
    }
}

#[test]
fn truncating_and_refeeding_equals_a_fresh_session() {
    for spec in specs() {
        let (_d, model) = load(&spec, true);
        let mut s = Session::new(model.clone());
        let long: Vec<u32> = PREFIX.iter().chain(&SUFFIX).copied().collect();
        logits(&mut s, &long);
        // A different continuation after the prefix: the cache is cut back to the prefix.
        let other: Vec<u32> = PREFIX.iter().chain(&[65, 66, 67]).copied().collect();
        let a = logits(&mut s, &other);
        assert_eq!(s.last_feed().reused, PREFIX.len());
        let mut fresh = Session::new(model.clone());
        assert_close(&a, &logits(&mut fresh, &other), spec.arch);

        // Explicit truncation, then the same tokens again.
        s.truncate(3);
        assert_eq!(s.tokens(), &other[..3]);
        assert_eq!(s.cache().len(), 3);
        let b = logits(&mut s, &other);
        assert_close(&a, &b, spec.arch);

        // Feeding exactly what is cached gives the same logits without recomputation.
        let c = logits(&mut s, &other);
        assert_eq!(s.last_feed().computed, 0);
        assert_close(&a, &c, spec.arch);
    }
}

#[test]
fn snapshot_and_restore_bring_back_the_same_state() {
    let (_d, model) = load(&TinySpec::qwen2(), true);
    let mut s = Session::new(model.clone());
    let at_prefix = logits(&mut s, &PREFIX);
    let snap = s.snapshot().expect("snapshot");
    let full: Vec<u32> = PREFIX.iter().chain(&SUFFIX).copied().collect();
    logits(&mut s, &full);
    s.restore(&snap).expect("restore");
    assert_eq!(s.tokens(), &PREFIX);
    let again = s.append(&SUFFIX).expect("append").to_vec();
    let mut fresh = Session::new(model);
    assert_close(&again, &logits(&mut fresh, &full), "restore");
    let _ = at_prefix;
}

#[test]
fn the_cache_grows_past_its_first_allocation_without_changing_results() {
    // 300 tokens force growth past the initial 256 positions on a 512-token context.
    let spec = TinySpec {
        context: 512,
        ..TinySpec::llama()
    };
    let (_d, model) = load(&spec, true);
    let tokens: Vec<u32> = (0..300u32).map(|i| (i * 7 + 3) % 256).collect();
    let mut grown = Session::new(model.clone()).with_chunk(64);
    let a = logits(&mut grown, &tokens);
    assert!(grown.cache().capacity() >= 300);
    // Keys and values are held as f16: two bytes each (an f32 cache took twice the memory).
    let kv = grown.cache();
    assert_eq!(
        kv.allocated_bytes(),
        2 * kv.layers() * kv.capacity() * kv.width() * 2
    );
    let mut one = Session::new(model).with_chunk(512);
    assert_close(&a, &logits(&mut one, &tokens), "growth");
}

#[test]
fn a_sequence_longer_than_the_context_is_a_clear_error() {
    let (_d, model) = load(&TinySpec::llama(), true);
    let mut s = Session::new(model);
    let tokens = vec![65u32; 97];
    let err = s
        .feed(&tokens)
        .expect_err("must not fit a 96-token context");
    assert!(
        matches!(
            err,
            ModelError::ContextOverflow {
                tokens: 97,
                context: 96
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("97 tokens"), "{err}");
    // The session is still usable afterwards.
    assert!(s.feed(&tokens[..96]).is_ok());
    let err = s.append(&[65]).expect_err("full");
    assert!(matches!(err, ModelError::ContextOverflow { .. }));
}

#[test]
fn keeping_q4_1_as_stored_gives_close_logits_to_requantized() {
    let (_d, requant) = load_with(&TinySpec::llama(), Engine::Candle, true);
    let (_e, kept) = load_with(&TinySpec::llama(), Engine::Candle, false);
    assert!(requant.report.stats.requantized > 0);
    assert_eq!(kept.report.stats.requantized, 0);
    let a = logits(&mut Session::new(requant), &PREFIX);
    let b = logits(&mut Session::new(kept), &PREFIX);
    // Both are quantized (Q4_1 weights with Q8_1 activations vs Q8_0 with Q8_0), so they
    // differ by quantization noise: a relative L2 error of a few percent on random weights.
    let diff: f32 = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f32>()
        .sqrt();
    let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!(
        diff / norm < 0.1,
        "requantized logits drift by {} relative",
        diff / norm
    );
}

/// The native forward pass against the candle one on the same weights. For the formats the
/// native kernels run as stored, both quantize activations the same way (8 bits per 32
/// values, f16 scales) and round keys and values to f16 the same way, so they agree up to the
/// order of float additions, for a prefill of several tokens and each decode step after it:
/// to 1e-4 at most steps, and within a relative 2% where a key or value lies so near an f16
/// rounding boundary that the two orders round it apart (one step of the 42 here, 0.08 at
/// most, on a 2-core AMD EPYC; a wrong kernel is off by the logits' own size, about 2).
/// Formats without a native kernel (F16, Q4_0) are re-quantized to Q8_0 at load, so they
/// differ by that quantization noise only.
#[test]
fn native_engine_logits_match_the_candle_engine() {
    use candle_core::quantized::GgmlDType;
    let mut specs = specs();
    for dtype in [
        GgmlDType::Q5_0,
        GgmlDType::Q8_0,
        GgmlDType::F16,
        GgmlDType::Q4_0,
    ] {
        specs.push(TinySpec {
            dtype,
            ..TinySpec::llama()
        });
    }
    for spec in specs {
        let (_d, native) = load_with(&spec, Engine::Native, false);
        let (_e, candle) = load_with(&spec, Engine::Candle, false);
        assert_eq!(native.engine(), Engine::Native);
        assert_eq!(candle.engine(), Engine::Candle);
        let converted = matches!(spec.dtype, GgmlDType::F16 | GgmlDType::Q4_0);
        assert_eq!(
            native.report.stats.requantized > 0,
            converted,
            "{:?}",
            spec.dtype
        );
        // The report names the types it converted; what it did not convert is the file's own
        // pages, mapped, not copied.
        let name = cairn::model::gguf::dtype_name(spec.dtype);
        let named: usize = native
            .report
            .stats
            .requantized_types
            .iter()
            .filter(|(t, _)| *t == name)
            .map(|(_, n)| n)
            .sum();
        assert_eq!(named, native.report.stats.requantized, "{:?}", spec.dtype);
        if !converted {
            assert_eq!(
                native.report.stats.mapped_bytes,
                native.report.stats.weight_bytes
            );
        }
        let (mut a, mut b) = (Session::new(native), Session::new(candle));
        let mut tokens = PREFIX.to_vec();
        let steps = SUFFIX.len() + 1;
        let mut close = 0;
        for step in 0..steps {
            let (x, y) = (logits(&mut a, &tokens), logits(&mut b, &tokens));
            let what = format!("{} {:?} step {step}", spec.arch, spec.dtype);
            let diff: f32 = x.iter().zip(&y).map(|(p, q)| (p - q) * (p - q)).sum();
            let norm: f32 = y.iter().map(|q| q * q).sum();
            let rel = (diff / norm).sqrt();
            let bound = if converted { 0.15 } else { 0.02 };
            assert!(rel < bound, "{what}: relative L2 difference {rel}");
            let worst = x
                .iter()
                .zip(&y)
                .map(|(p, q)| (p - q).abs())
                .fold(0f32, f32::max);
            close += usize::from(worst <= 1e-4);
            if let Some(&t) = SUFFIX.get(step) {
                tokens.push(t);
            }
        }
        if !converted {
            assert!(
                close + 2 >= steps,
                "{} {:?}: only {close} of {steps} steps agree to 1e-4",
                spec.arch,
                spec.dtype,
            );
        }
    }
}

#[test]
fn out_of_vocabulary_token_ids_are_rejected() {
    let (_d, model) = load(&TinySpec::qwen2(), true);
    let mut s = Session::new(model);
    let err = s.feed(&[1, 2, 100_000]).expect_err("bad id");
    assert!(err.to_string().contains("100000"), "{err}");
}

/// Issue 19: `Policy::reason` stops at each `EXPRESSION =` the model writes and writes the
/// calculator's value after it; the model goes on from that value.
#[test]
fn reasoning_gets_the_calculators_value_after_each_equals_sign() {
    use cairn::agent::{ModelPolicy, Policy};
    let lm = crate::common::preset_model("qwen2.5-coder-0.5b").clone();
    let mut policy = ModelPolicy::new(lm, Default::default()).unwrap();
    assert!(policy.can_reason());
    let messages = cairn::agent::reason::messages(
        "A farm packs 1234 eggs into boxes of 6, and sells each box for 3 dollars. How much does it earn from the full boxes?",
        &[],
        &[],
        &[],
        &[],
    );
    let r = policy
        .reason(&messages, 400, None)
        .unwrap()
        .expect("the model policy reasons");
    assert!(r.complete, "{r:?}");
    assert!(!r.checked.is_empty(), "{r:?}");
    for (expr, value) in &r.checked {
        let want = cairn::tools::calculator::evaluate(expr).unwrap();
        assert_eq!(
            value.parse::<f64>().unwrap(),
            (want.as_f64() * 1e4).round() / 1e4,
            "{expr}"
        );
        assert!(r.text.contains(&format!("= {value}")), "{}", r.text);
    }
    assert!(r.prompt_tokens > 0 && r.generated_tokens > 0);
}
