//! The tokenizer built from GGUF metadata: every reference vector produced by llama.cpp for both
//! presets (exact ids, exact round trip, streaming), end-of-generation ids, special tokens, the
//! tokenizer.json override, and the errors for broken metadata (on tiny GGUFs written here).

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::OnceLock;

use cairn::model::tokenizer::{TokenKind, Tokenizer, TokenizerError};
use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

/// The preset's GGUF metadata and the tokenizer built from it, read once per test run.
pub fn preset(name: &str) -> &'static (Content, Tokenizer) {
    static QWEN: OnceLock<(Content, Tokenizer)> = OnceLock::new();
    static SMOL: OnceLock<(Content, Tokenizer)> = OnceLock::new();
    let cell = match name {
        "qwen2.5-coder-0.5b" => &QWEN,
        "smollm2-135m" => &SMOL,
        other => panic!("unknown preset {other}"),
    };
    cell.get_or_init(|| {
        let path = crate::common::preset_path(name);
        let mut file = std::fs::File::open(&path)
            .unwrap_or_else(|e| panic!("preset {name} not found at {}: {e}", path.display()));
        let content = Content::read(&mut file).expect("GGUF header");
        let tokenizer = Tokenizer::from_gguf(&content).expect("tokenizer from GGUF");
        (content, tokenizer)
    })
}

/// A GGUF holding only the given metadata and one tiny F32 tensor, read back.
pub fn tiny_gguf(metadata: &[(&str, Value)]) -> Content {
    let tensor = QTensor::quantize(
        &Tensor::zeros(4, candle_core::DType::F32, &Device::Cpu).unwrap(),
        GgmlDType::F32,
    )
    .unwrap();
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let mut bytes = Cursor::new(Vec::new());
    gguf_file::write(&mut bytes, &metadata, &[("t", &tensor)]).unwrap();
    bytes.set_position(0);
    Content::read(&mut bytes).unwrap()
}

/// Tokenizer metadata for a five-token vocabulary: `a`, `b`, ` ` (as `Ġ`), `ab`, and the
/// control token `<|im_end|>`, plus `extra` tokens (control ones when they look like `<|…|>`).
pub fn tiny_tokenizer_metadata(extra: &[&str]) -> Vec<(&'static str, Value)> {
    let mut tokens = vec!["a", "b", "\u{120}", "ab", "<|im_end|>"];
    tokens.extend_from_slice(extra);
    let types = tokens
        .iter()
        .map(|t| Value::I32(if t.starts_with("<|") { 3 } else { 1 }))
        .collect();
    vec![
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String("qwen2".into())),
        (
            "tokenizer.ggml.tokens",
            Value::Array(
                tokens
                    .iter()
                    .map(|t| Value::String(t.to_string()))
                    .collect(),
            ),
        ),
        ("tokenizer.ggml.token_type", Value::Array(types)),
        (
            "tokenizer.ggml.merges",
            Value::Array(vec![Value::String("a b".into())]),
        ),
        ("tokenizer.ggml.eos_token_id", Value::U32(4)),
    ]
}

fn with(
    mut md: Vec<(&'static str, Value)>,
    key: &'static str,
    value: Option<Value>,
) -> Vec<(&'static str, Value)> {
    md.retain(|(k, _)| *k != key);
    if let Some(v) = value {
        md.push((key, v));
    }
    md
}

#[derive(serde::Deserialize)]
struct Vector {
    text: String,
    ids: Vec<u32>,
}

fn vectors(preset: &str) -> Vec<Vector> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/tokens-{preset}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn check_reference_vectors(name: &str) {
    let (_, tok) = preset(name);
    let vectors = vectors(name);
    assert!(
        vectors.len() >= 40,
        "{name}: expected the full reference set"
    );
    let mut failures = Vec::new();
    for v in &vectors {
        let ids = tok.encode(&v.text).unwrap();
        if ids != v.ids {
            failures.push(format!(
                "encode {:?}\n  got      {ids:?}\n  llama.cpp {:?}",
                v.text, v.ids
            ));
        }
        let text = tok.decode(&v.ids).unwrap();
        if text != v.text {
            failures.push(format!("decode {:?} gave {text:?}", v.text));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn qwen_encodes_every_reference_vector_like_llama_cpp() {
    check_reference_vectors("qwen2.5-coder-0.5b");
}

#[test]
fn smollm_encodes_every_reference_vector_like_llama_cpp() {
    // Regression guard: candle's GGUF tokenizer adds a leading space for SmolLM2 ("hello" would
    // become " hello"); llama.cpp does not.
    check_reference_vectors("smollm2-135m");
}

fn check_stream_decoder(name: &str) {
    let (_, tok) = preset(name);
    let mut held_back = 0;
    for v in vectors(name) {
        let mut decoder = tok.stream_decoder();
        let mut streamed = String::new();
        for &id in &v.ids {
            match decoder.push(id).unwrap() {
                Some(piece) => {
                    assert!(
                        !piece.contains('\u{FFFD}'),
                        "{name}: {:?} split a character: {piece:?}",
                        v.text
                    );
                    streamed.push_str(&piece);
                }
                None => held_back += 1,
            }
        }
        assert!(
            !decoder.has_pending(),
            "{name}: {:?} left bytes held back",
            v.text
        );
        assert_eq!(decoder.finish(), None);
        assert_eq!(streamed, v.text, "{name}: streamed text differs");
        assert_eq!(streamed, tok.decode(&v.ids).unwrap());
    }
    // The Chinese, Japanese and emoji vectors split characters over tokens.
    assert!(held_back > 0, "{name}: no vector exercised held-back bytes");
}

#[test]
fn qwen_stream_decoder_reproduces_every_vector() {
    check_stream_decoder("qwen2.5-coder-0.5b");
}

#[test]
fn smollm_stream_decoder_reproduces_every_vector() {
    check_stream_decoder("smollm2-135m");
}

#[test]
fn stream_decoder_flushes_an_unfinished_character_on_finish() {
    let (_, tok) = preset("smollm2-135m");
    // "🦀" is four bytes; SmolLM2 spells it with several byte tokens.
    let ids = tok.encode("🦀").unwrap();
    assert!(
        ids.len() > 1,
        "expected 🦀 to need several tokens, got {ids:?}"
    );
    let mut decoder = tok.stream_decoder();
    for &id in &ids[..ids.len() - 1] {
        assert_eq!(decoder.push(id).unwrap(), None);
    }
    assert!(decoder.has_pending());
    assert_eq!(decoder.finish().as_deref(), Some("\u{FFFD}"));
    assert_eq!(decoder.finish(), None);
}

#[test]
fn eos_ids_include_im_end_for_both_presets() {
    for (name, expected) in [
        ("qwen2.5-coder-0.5b", vec![151645, 151643]),
        ("smollm2-135m", vec![2, 0]),
    ] {
        let (_, tok) = preset(name);
        let im_end = tok.id_of("<|im_end|>").unwrap();
        assert!(
            tok.eos_ids().contains(&im_end),
            "{name}: {:?}",
            tok.eos_ids()
        );
        assert_eq!(tok.eos_ids(), expected.as_slice(), "{name}");
        assert_eq!(tok.eos_token().as_deref(), Some("<|im_end|>"), "{name}");
        assert!(!tok.add_bos(), "{name}");
    }
    assert_eq!(
        preset("qwen2.5-coder-0.5b").1.bos_token().as_deref(),
        Some("<|endoftext|>")
    );
    assert_eq!(
        preset("smollm2-135m").1.bos_token().as_deref(),
        Some("<|im_start|>")
    );
}

#[test]
fn control_user_defined_and_unused_tokens() {
    let (_, tok) = preset("qwen2.5-coder-0.5b");
    assert_eq!(tok.vocab_size(), 151936);
    let im_start = tok.id_of("<|im_start|>").unwrap();
    assert_eq!(im_start, 151644);
    assert!(tok.is_special(im_start));
    assert_eq!(tok.token_bytes(im_start).unwrap(), b"<|im_start|>");

    // Qwen's <tool_call> is user-defined: one id, but text rather than control.
    let tool_call = tok.id_of("<tool_call>").unwrap();
    assert_eq!(tok.token_kind(tool_call), Some(TokenKind::UserDefined));
    assert!(!tok.is_special(tool_call));
    assert_eq!(tok.encode("<tool_call>").unwrap(), vec![tool_call]);
    assert_eq!(tok.decode(&[tool_call]).unwrap(), "<tool_call>");

    // Padding placeholders decode to nothing, as in llama.cpp.
    assert_eq!(tok.token_kind(151700), Some(TokenKind::Unused));
    assert_eq!(tok.token_bytes(151700).unwrap(), Vec::<u8>::new());

    let hello = tok.id_of("\u{120}hello").unwrap();
    assert_eq!(hello, 23811);
    assert!(!tok.is_special(hello));
    assert_eq!(tok.token_bytes(hello).unwrap(), b" hello");
    assert_eq!(tok.token_bytes(151936), None);
    assert!(matches!(
        tok.decode(&[151936]),
        Err(TokenizerError::UnknownId { id: 151936, .. })
    ));
    assert!(tok.stream_decoder().push(151936).is_err());
}

#[test]
fn tokenizer_is_clone_send_sync() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    check::<Tokenizer>();
    check::<cairn::model::tokenizer::StreamDecoder>();
}

#[test]
fn tokenizer_json_override_matches_the_gguf_tokenizer() {
    let (_, tok) = preset("smollm2-135m");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    tok.inner().save(&path, false).unwrap();
    let loaded = Tokenizer::from_file(&path).unwrap();
    assert_eq!(loaded.vocab_size(), tok.vocab_size());
    for v in vectors("smollm2-135m") {
        assert_eq!(loaded.encode(&v.text).unwrap(), v.ids, "{:?}", v.text);
        assert_eq!(loaded.decode(&v.ids).unwrap(), v.text);
    }
    let im_end = tok.id_of("<|im_end|>").unwrap();
    assert!(loaded.eos_ids().contains(&im_end), "{:?}", loaded.eos_ids());
    assert_eq!(loaded.eos_token().as_deref(), Some("<|im_end|>"));
    assert!(loaded.is_special(im_end));
}

#[test]
fn tokenizer_json_that_does_not_exist_names_the_file() {
    let err =
        Tokenizer::from_file(std::path::Path::new("/nonexistent/tokenizer.json")).unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/tokenizer.json"),
        "{err}"
    );
}

#[test]
fn tiny_tokenizer_merges_and_parses_control_tokens() {
    let tok = Tokenizer::from_gguf(&tiny_gguf(&tiny_tokenizer_metadata(&[]))).unwrap();
    assert_eq!(tok.encode("ab<|im_end|>ba").unwrap(), vec![3, 4, 1, 0]);
    assert_eq!(tok.encode("a b").unwrap(), vec![0, 2, 1]);
    assert_eq!(tok.decode(&[3, 2, 4]).unwrap(), "ab <|im_end|>");
    assert_eq!(tok.eos_ids(), &[4]);
    assert_eq!(tok.bos_token(), None);
}

#[test]
fn unknown_pre_tokenizer_is_named_with_the_supported_ones() {
    let md = with(
        tiny_tokenizer_metadata(&[]),
        "tokenizer.ggml.pre",
        Some(Value::String("tekken-9".into())),
    );
    let err = Tokenizer::from_gguf(&tiny_gguf(&md)).unwrap_err();
    assert!(
        matches!(&err, TokenizerError::UnknownPre { pre } if pre == "tekken-9"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("tekken-9") && msg.contains("qwen2") && msg.contains("smollm"),
        "{msg}"
    );
}

#[test]
fn missing_tokens_key_is_named() {
    let md = with(tiny_tokenizer_metadata(&[]), "tokenizer.ggml.tokens", None);
    let err = Tokenizer::from_gguf(&tiny_gguf(&md)).unwrap_err();
    assert!(
        matches!(
            err,
            TokenizerError::MissingKey {
                key: "tokenizer.ggml.tokens"
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("tokenizer.ggml.tokens"), "{err}");
}

#[test]
fn non_bpe_tokenizer_model_is_refused_by_name() {
    let md = with(
        tiny_tokenizer_metadata(&[]),
        "tokenizer.ggml.model",
        Some(Value::String("llama".into())),
    );
    let err = Tokenizer::from_gguf(&tiny_gguf(&md)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("`llama`") && msg.contains("byte-level BPE"),
        "{msg}"
    );
}

#[test]
fn malformed_metadata_is_an_error_not_a_panic() {
    let base = tiny_tokenizer_metadata(&[]);
    let cases = [
        (
            "tokenizer.ggml.token_type",
            Value::Array(vec![Value::I32(1)]),
        ),
        (
            "tokenizer.ggml.merges",
            Value::Array(vec![Value::String("nospace".into())]),
        ),
        (
            "tokenizer.ggml.tokens",
            Value::String("not an array".into()),
        ),
        ("tokenizer.ggml.eos_token_id", Value::U32(99)),
        ("tokenizer.ggml.pre", Value::U32(1)),
    ];
    for (key, value) in cases {
        let err =
            Tokenizer::from_gguf(&tiny_gguf(&with(base.clone(), key, Some(value)))).unwrap_err();
        assert!(err.to_string().contains(key), "{key}: {err}");
    }
}
