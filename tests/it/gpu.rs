//! The candle engine on an NVIDIA GPU (`--device cuda`), against the CPU on the same weights.
//! Built only with `--features cuda` and run only where a GPU is:
//! `cargo test --release --features cuda -- --ignored gpu` (every test here is `#[ignore]`d
//! and named `gpu_…`, so a CUDA build on a machine without a GPU still passes its tests).

use std::sync::Arc;

use cairn::decode::bench::{self, BenchOptions};
use cairn::decode::generate::StopReason;
use cairn::model::gguf::GgufFile;
use cairn::model::{self, DeviceSpec, Engine, LoadOptions, LoadedModel, Model, Session};

use crate::common::{preset_model, preset_path, tiny_model, TinySpec};
use crate::presets::{divergence, greedy, references};

fn cuda() -> LoadOptions {
    LoadOptions {
        device: DeviceSpec::Cuda(0).open().expect("open cuda:0"),
        engine: Engine::Candle,
        ..LoadOptions::default()
    }
}

fn tiny_on(spec: &TinySpec, opts: &LoadOptions) -> (tempfile::TempDir, Arc<Model>) {
    let (dir, path) = tiny_model(spec);
    let mut gguf = GgufFile::open(&path).expect("open tiny gguf");
    (
        dir,
        Arc::new(model::load(&mut gguf, opts).expect("load tiny model")),
    )
}

/// Relative L2 distance of two logit vectors.
fn rel_l2(a: &[f32], b: &[f32]) -> f32 {
    let diff: f32 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f32>()
        .sqrt();
    let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    diff / norm.max(f32::MIN_POSITIVE)
}

/// Tiny random-weight models of each architecture and stored type: the GPU's logits after a
/// prefill and after each decode step are the CPU engine's, up to quantization noise (the two
/// quantize activations differently), and the KV cache on the device carries from step to
/// step (a wrong cache would drift at once).
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --features cuda -- --ignored gpu"]
fn gpu_tiny_models_match_the_cpu_engine() {
    use candle_core::quantized::GgmlDType;
    for base in [TinySpec::llama(), TinySpec::qwen2()] {
        let arch = base.arch;
        for dtype in [
            GgmlDType::Q4_1,
            GgmlDType::Q5_0,
            GgmlDType::Q8_0,
            GgmlDType::F16,
        ] {
            let spec = TinySpec {
                dtype,
                ..base.clone()
            };
            let (_d, cpu) = tiny_on(&spec, &LoadOptions::default());
            let (_e, gpu) = tiny_on(&spec, &cuda());
            assert_eq!(gpu.report.device, "cuda:0");
            let (mut a, mut b) = (Session::new(cpu), Session::new(gpu));
            let mut tokens: Vec<u32> = vec![256, 72, 101, 108, 108, 111, 32];
            for step in 0..6 {
                let x = a.feed(&tokens).expect("cpu feed").to_vec();
                let y = b.feed(&tokens).expect("gpu feed").to_vec();
                let d = rel_l2(&x, &y);
                assert!(
                    d < 0.1,
                    "{arch} {dtype:?} step {step}: logits differ by {d} relative"
                );
                tokens.push(cairn::model::sampling::argmax(&x));
            }
        }
    }
}

/// A snapshot of a session on the GPU restores the same logits and cache.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --features cuda -- --ignored gpu"]
fn gpu_session_snapshot_restores_the_cache() {
    let (_d, gpu) = tiny_on(&TinySpec::qwen2(), &cuda());
    let mut s = Session::new(gpu);
    let before = s.feed(&[256, 72, 101, 108]).expect("feed").to_vec();
    let snap = s.snapshot().expect("snapshot");
    let next = s.append(&[108]).expect("append").to_vec();
    s.restore(&snap).expect("restore");
    assert_eq!(s.logits().expect("logits"), &before[..]);
    assert_eq!(s.append(&[108]).expect("append again"), &next[..]);
}

/// The presets on the GPU against the CPU engine's greedy continuations of the reference
/// prompts: at least 4 of 5 agree for 20 tokens (or to the end-of-generation token), and
/// where one leaves it is at a near-tie.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --features cuda -- --ignored gpu"]
fn gpu_presets_greedy_match_the_cpu_engine_for_20_tokens() {
    for preset in ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] {
        let cpu = preset_model(preset);
        let gpu = LoadedModel::load(&preset_path(preset), None, &cuda()).expect("load on cuda");
        let (mut agree, mut report) = (0, String::new());
        for r in references(preset) {
            let prompt = r.prompt.trim_end_matches('\n');
            let ours = greedy(cpu, prompt, 20);
            let text = cpu.tokenizer.decode(&ours.tokens).expect("decode");
            let eos = ours.stop == StopReason::Eos;
            match divergence(&gpu, prompt, &text, eos, 20) {
                None => agree += 1,
                Some((step, margin, at)) => report.push_str(&format!(
                    "{prompt:?}: the GPU leaves the CPU's {text:?} after {at:?} (step {step}) by {margin}\n"
                )),
            }
        }
        assert!(
            agree >= 4,
            "{preset}: only {agree}/5 agree for 20 tokens:\n{report}"
        );
    }
}

/// `cairn bench` on the GPU says where it ran, how long the logits copy takes and how much
/// of the GPU's memory is in use. On a tiny model written here, so that it needs no preset.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --features cuda -- --ignored gpu"]
fn gpu_bench_reports_the_device_and_the_logits_copy() {
    let (_dir, path) = tiny_model(&TinySpec::qwen2());
    let lm = LoadedModel::load(&path, None, &cuda()).expect("load on cuda");
    let opts = BenchOptions {
        prompt_tokens: 16,
        gen_tokens: 8,
        repetitions: 1,
        ..BenchOptions::default()
    };
    let r = bench::run(&lm, 1, &opts, &mut |_| {}).expect("bench");
    assert_eq!(r.device, "cuda:0");
    assert_eq!(r.engine, "candle");
    let copy = r.logits_copy_us.expect("the logits copy is timed on a GPU");
    assert!(copy.median > 0.0);
    assert!(r.logits_copy_share.is_some_and(|s| s > 0.0 && s < 1.0));
    assert!(r
        .gpu_memory_bytes
        .is_some_and(|b| b as usize > r.weight_bytes));
    assert!(r.decode_tok_s.median > 0.0 && r.prefill_tok_s.median > 0.0);
}
