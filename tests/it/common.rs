//! Helpers shared by the integration tests: tiny random-weight GGUF files written on the spot
//! (both architectures, with a byte-level tokenizer and a ChatML template), and the `cairn`
//! binary as a command.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

/// Shape and storage of a tiny test model.
#[derive(Debug, Clone)]
pub struct TinySpec {
    /// `llama` or `qwen2`.
    pub arch: &'static str,
    /// Storage type of the matrices.
    pub dtype: GgmlDType,
    /// Context length written into the metadata.
    pub context: usize,
    /// Seed of the random weights.
    pub seed: u64,
    /// Write a separate output.weight (else tied embeddings).
    pub untied: bool,
}

impl TinySpec {
    /// A tiny llama (Q4_1 matrices, like the SmolLM2 preset).
    pub fn llama() -> Self {
        TinySpec {
            arch: "llama",
            dtype: GgmlDType::Q4_1,
            context: 96,
            seed: 1,
            untied: false,
        }
    }

    /// A tiny qwen2 (Q8_0 matrices, biases, untied output).
    pub fn qwen2() -> Self {
        TinySpec {
            arch: "qwen2",
            dtype: GgmlDType::Q8_0,
            context: 96,
            seed: 2,
            untied: true,
        }
    }
}

pub const EMBED: usize = 64;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
pub const FF: usize = 128;
pub const LAYERS: usize = 2;
/// 256 byte tokens, then `<|im_start|>`, `<|im_end|>`, `<|endoftext|>`.
pub const VOCAB: usize = 259;

/// GPT-2's byte-to-character table, which byte-level BPE vocabularies are written in.
pub fn byte_to_char(b: u8) -> char {
    let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    if printable {
        return b as char;
    }
    let mut n = 0u32;
    for x in 0..=255u8 {
        let p = (33..=126).contains(&x) || (161..=172).contains(&x) || (174..=255).contains(&x);
        if !p {
            if x == b {
                return char::from_u32(256 + n).expect("valid char");
            }
            n += 1;
        }
    }
    unreachable!()
}

fn rand_tensor(shape: &[usize], seed: &mut u64, scale: f32) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (((*seed >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0) * scale
        })
        .collect();
    Tensor::from_vec(v, shape, &Device::Cpu).expect("tensor")
}

/// Writes a tiny random-weight GGUF of `spec` to `path`.
pub fn write_tiny_gguf(path: &Path, spec: &TinySpec) {
    let mut seed = spec.seed;
    let hd = EMBED / HEADS;
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let mat = |name: String, rows: usize, cols: usize, dtype: GgmlDType, seed: &mut u64| {
        let t = rand_tensor(&[rows, cols], seed, 0.5);
        (name, QTensor::quantize(&t, dtype).expect("quantize"))
    };
    tensors.push(mat(
        "token_embd.weight".into(),
        VOCAB,
        EMBED,
        spec.dtype,
        &mut seed,
    ));
    if spec.untied {
        tensors.push(mat(
            "output.weight".into(),
            VOCAB,
            EMBED,
            spec.dtype,
            &mut seed,
        ));
    }
    let vec_t = |len: usize, seed: &mut u64, base: f32| {
        let t = (rand_tensor(&[len], seed, 0.1) + base as f64).expect("add");
        QTensor::quantize(&t, GgmlDType::F32).expect("f32")
    };
    tensors.push(("output_norm.weight".into(), vec_t(EMBED, &mut seed, 1.0)));
    for i in 0..LAYERS {
        let p = format!("blk.{i}");
        tensors.push((
            format!("{p}.attn_norm.weight"),
            vec_t(EMBED, &mut seed, 1.0),
        ));
        tensors.push((format!("{p}.ffn_norm.weight"), vec_t(EMBED, &mut seed, 1.0)));
        tensors.push(mat(
            format!("{p}.attn_q.weight"),
            HEADS * hd,
            EMBED,
            spec.dtype,
            &mut seed,
        ));
        tensors.push(mat(
            format!("{p}.attn_k.weight"),
            KV_HEADS * hd,
            EMBED,
            spec.dtype,
            &mut seed,
        ));
        tensors.push(mat(
            format!("{p}.attn_v.weight"),
            KV_HEADS * hd,
            EMBED,
            spec.dtype,
            &mut seed,
        ));
        tensors.push(mat(
            format!("{p}.attn_output.weight"),
            EMBED,
            HEADS * hd,
            spec.dtype,
            &mut seed,
        ));
        tensors.push(mat(
            format!("{p}.ffn_gate.weight"),
            FF,
            EMBED,
            spec.dtype,
            &mut seed,
        ));
        tensors.push(mat(
            format!("{p}.ffn_up.weight"),
            FF,
            EMBED,
            spec.dtype,
            &mut seed,
        ));
        tensors.push(mat(
            format!("{p}.ffn_down.weight"),
            EMBED,
            FF,
            spec.dtype,
            &mut seed,
        ));
        if spec.arch == "qwen2" {
            tensors.push((
                format!("{p}.attn_q.bias"),
                vec_t(HEADS * hd, &mut seed, 0.0),
            ));
            tensors.push((
                format!("{p}.attn_k.bias"),
                vec_t(KV_HEADS * hd, &mut seed, 0.0),
            ));
            tensors.push((
                format!("{p}.attn_v.bias"),
                vec_t(KV_HEADS * hd, &mut seed, 0.0),
            ));
        }
    }
    let a = spec.arch;
    let mut tokens: Vec<Value> = (0..=255u8)
        .map(|b| Value::String(byte_to_char(b).to_string()))
        .collect();
    for s in ["<|im_start|>", "<|im_end|>", "<|endoftext|>"] {
        tokens.push(Value::String(s.into()));
    }
    let mut types: Vec<Value> = (0..256).map(|_| Value::I32(1)).collect();
    types.extend([Value::I32(3), Value::I32(3), Value::I32(3)]);
    let template = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
    let md: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(a.into())),
        ("general.name".into(), Value::String(format!("tiny-{a}"))),
        (
            format!("{a}.context_length"),
            Value::U32(spec.context as u32),
        ),
        (format!("{a}.embedding_length"), Value::U32(EMBED as u32)),
        (format!("{a}.block_count"), Value::U32(LAYERS as u32)),
        (format!("{a}.feed_forward_length"), Value::U32(FF as u32)),
        (
            format!("{a}.attention.head_count"),
            Value::U32(HEADS as u32),
        ),
        (
            format!("{a}.attention.head_count_kv"),
            Value::U32(KV_HEADS as u32),
        ),
        (
            format!("{a}.attention.layer_norm_rms_epsilon"),
            Value::F32(1e-5),
        ),
        (format!("{a}.rope.freq_base"), Value::F32(10000.0)),
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        (
            "tokenizer.ggml.pre".into(),
            Value::String(if a == "qwen2" { "qwen2" } else { "smollm" }.into()),
        ),
        ("tokenizer.ggml.tokens".into(), Value::Array(tokens)),
        ("tokenizer.ggml.token_type".into(), Value::Array(types)),
        ("tokenizer.ggml.merges".into(), Value::Array(vec![])),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(257)),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(256)),
        (
            "tokenizer.chat_template".into(),
            Value::String(template.into()),
        ),
    ];
    let md_refs: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut f = std::fs::File::create(path).expect("create gguf");
    gguf_file::write(&mut f, &md_refs, &t_refs).expect("write gguf");
}

/// A temp dir with a tiny model of `spec` in it; returns (dir guard, model path).
pub fn tiny_model(spec: &TinySpec) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("tiny-{}.gguf", spec.arch));
    write_tiny_gguf(&path, spec);
    (dir, path)
}

/// The `cairn` binary with a private, empty home and offline mode, so a test never touches
/// the user's cache or the network unless it asks to.
pub fn cairn(home: &Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("cairn").expect("cairn binary");
    cmd.env("CAIRN_HOME", home)
        .env("CAIRN_OFFLINE", "1")
        .env_remove("CAIRN_MODEL")
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_HOME", home.join("hf"))
        .env_remove("HF_HUB_CACHE")
        .env("CAIRN_THREADS", "2");
    cmd
}

/// The path of a preset model, fetched once into the user's cache (checksummed) and reused
/// by every later test and test run. The fetch takes a lock, so tests running in parallel
/// (or two test runs) never download the same file twice or see a half-written one.
pub fn preset_path(name: &str) -> PathBuf {
    use cairn::model::fetch::{fetch_preset, preset};
    let config = cairn::config::Config::default();
    let p = preset(name).unwrap_or_else(|| panic!("no preset named {name}"));
    // Progress and notes on the test's stderr, as `cairn model fetch` shows them.
    let printer = cairn::cli::Printer::from_config(&config);
    let opts = cairn::cli::commands::fetch_options(&config, &printer);
    fetch_preset(p, &opts).unwrap_or_else(|e| panic!("cannot get preset {name}: {e:#}"))
}

/// A preset loaded once per test binary and shared by the tests that need real weights.
pub fn preset_model(name: &'static str) -> &'static cairn::model::LoadedModel {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static MODELS: OnceLock<Mutex<HashMap<&'static str, &'static cairn::model::LoadedModel>>> =
        OnceLock::new();
    let map = MODELS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut guard = map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(m) = guard.get(name) {
        return m;
    }
    let path = preset_path(name);
    let lm = cairn::model::LoadedModel::load(&path, None, &cairn::model::LoadOptions::default())
        .unwrap_or_else(|e| panic!("cannot load preset {name}: {e:#}"));
    let leaked: &'static cairn::model::LoadedModel = Box::leak(Box::new(lm));
    guard.insert(name, leaked);
    leaked
}

/// `cairn batch` over `tasks.jsonl` in `dir`, writing `out.jsonl` and the memory file
/// `mem.sqlite` there: two jobs, two short rounds, quiet, offline, one thread per job. Used by
/// the tests that kill or load a batch.
pub fn two_job_batch(dir: &Path, model: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.current_dir(dir)
        .env("CAIRN_HOME", dir.join("home"))
        .env("CAIRN_OFFLINE", "1")
        .env("CAIRN_THREADS", "1")
        .args([
            "batch",
            "-q",
            "--jobs",
            "2",
            "--max-rounds",
            "2",
            "--max-tokens",
            "32",
            "--memory",
            "mem.sqlite",
            "--out",
            "out.jsonl",
            "tasks.jsonl",
            "--model",
        ])
        .arg(model)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}

/// One agent step for a scripted policy: `action` with `args`.
pub fn step(action: &str, args: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"thought": "next", "action": action, "args": args})
}

/// A scripted `final_answer` step.
pub fn answer(text: &str) -> serde_json::Value {
    step("final_answer", serde_json::json!({ "answer": text }))
}
