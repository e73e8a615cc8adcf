//! Opening GGUF files and reading their metadata by key.
//!
//! [`GgufFile`] wraps candle's GGUF reader with the checks and messages a user needs: a file
//! that is not GGUF says so, a truncated file names the first tensor that runs past its end,
//! and a missing or mistyped metadata key is named. [`ModelError`] is the error type of the
//! whole model runtime. [`describe_gguf`] summarises a file's header for `cairn model info`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::Device;

use super::template::TemplateError;
use super::tokenizer::TokenizerError;

/// Errors of the model runtime: loading, tokenizing, running.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The model file does not exist.
    #[error("model file not found: {0}")]
    NotFound(PathBuf),
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file does not start with the GGUF magic (or is too short to).
    #[error("{path} is not a GGUF file ({reason})")]
    NotGguf {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },
    /// The file ends before its header or tensor data does.
    #[error("{path} is truncated: {detail}; download it again")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Where it ends and what was still expected.
        detail: String,
    },
    /// The GGUF header could not be parsed.
    #[error("{path} is not a valid GGUF file: {detail}")]
    BadGguf {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        detail: String,
    },
    /// A required metadata key is absent.
    #[error("{path}: missing GGUF metadata key `{key}`")]
    MissingKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
    },
    /// A metadata key has the wrong type or an impossible value.
    #[error("{path}: GGUF metadata key `{key}`: {reason}")]
    BadKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// What was wrong.
        reason: String,
    },
    /// The file's architecture is not one cairn implements.
    #[error("unsupported architecture `{arch}` in {path}; supported: {supported}")]
    UnsupportedArch {
        /// The file.
        path: PathBuf,
        /// `general.architecture`.
        arch: String,
        /// The supported architectures, comma separated.
        supported: String,
    },
    /// A tensor the architecture needs is absent or has the wrong shape or type.
    #[error("{path}: tensor `{name}`: {reason}")]
    BadTensor {
        /// The file.
        path: PathBuf,
        /// The tensor.
        name: String,
        /// What was wrong.
        reason: String,
    },
    /// The tokens do not fit the model's context window.
    #[error("the input is {tokens} tokens but the model's context holds {context}; shorten the prompt or lower --max-tokens")]
    ContextOverflow {
        /// Tokens that would be in the cache.
        tokens: usize,
        /// The context length.
        context: usize,
    },
    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary (size {vocab})")]
    BadToken {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab: usize,
    },
    /// Writing generated text failed (for example, stdout was closed).
    #[error("cannot write the output")]
    Output(#[source] std::io::Error),
    /// The tokenizer could not be built or used.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// The chat template could not be parsed or rendered.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// A tensor operation failed.
    #[error("tensor computation failed: {0}")]
    Candle(#[from] candle_core::Error),
}

/// Result type of the model runtime.
pub type Result<T, E = ModelError> = std::result::Result<T, E>;

/// An open GGUF file: its parsed header and a reader for tensor data.
pub struct GgufFile {
    /// Where the file is.
    pub path: PathBuf,
    /// Metadata and tensor infos.
    pub content: gguf_file::Content,
    /// The file's size in bytes.
    pub file_size: u64,
    reader: BufReader<File>,
}

const GGUF_MAGIC: &[u8; 4] = b"GGUF";

impl GgufFile {
    /// Opens and validates a GGUF file: magic, header, and that every tensor's data lies
    /// inside the file.
    pub fn open(path: &Path) -> Result<Self> {
        let io = |source| ModelError::Io {
            path: path.to_path_buf(),
            source,
        };
        if !path.exists() {
            return Err(ModelError::NotFound(path.to_path_buf()));
        }
        if path.is_dir() {
            return Err(ModelError::NotGguf {
                path: path.to_path_buf(),
                reason: "it is a directory".into(),
            });
        }
        let file = File::open(path).map_err(io)?;
        let file_size = file.metadata().map_err(io)?.len();
        let mut reader = BufReader::new(file);
        let mut magic = [0u8; 4];
        if let Err(e) = reader.read_exact(&mut magic) {
            return Err(ModelError::NotGguf {
                path: path.to_path_buf(),
                reason: if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    format!("only {file_size} bytes, too short for a GGUF header")
                } else {
                    e.to_string()
                },
            });
        }
        if &magic != GGUF_MAGIC {
            return Err(ModelError::NotGguf {
                path: path.to_path_buf(),
                reason: format!("bad magic \"{}\", expected \"GGUF\"", magic.escape_ascii()),
            });
        }
        use std::io::Seek;
        reader.rewind().map_err(io)?;
        let content = gguf_file::Content::read(&mut reader).map_err(|e| {
            let detail = e.to_string().lines().next().unwrap_or("").to_string();
            if is_truncation(&e) {
                ModelError::Truncated {
                    path: path.to_path_buf(),
                    detail: format!(
                        "the header ends early ({detail}); the file has {file_size} bytes"
                    ),
                }
            } else {
                ModelError::BadGguf {
                    path: path.to_path_buf(),
                    detail,
                }
            }
        })?;
        let mut gguf = GgufFile {
            path: path.to_path_buf(),
            content,
            file_size,
            reader,
        };
        gguf.check_tensor_bounds()?;
        Ok(gguf)
    }

    fn check_tensor_bounds(&mut self) -> Result<()> {
        let base = self.content.tensor_data_offset;
        let mut worst: Option<(&String, u64)> = None;
        for (name, info) in &self.content.tensor_infos {
            let n = info.shape.elem_count();
            let block = info.ggml_dtype.block_size();
            if n % block != 0 {
                return Err(self.bad_tensor(
                    name,
                    format!(
                        "{n} elements is not a multiple of the {:?} block size {block}",
                        info.ggml_dtype
                    ),
                ));
            }
            let bytes = (n / block) as u64 * info.ggml_dtype.type_size() as u64;
            let end = base.saturating_add(info.offset).saturating_add(bytes);
            if end > self.file_size && worst.is_none_or(|(_, e)| end > e) {
                worst = Some((name, end));
            }
        }
        if let Some((name, end)) = worst {
            return Err(ModelError::Truncated {
                path: self.path.clone(),
                detail: format!(
                    "tensor `{name}` needs bytes up to {end}, the file has {}",
                    self.file_size
                ),
            });
        }
        Ok(())
    }

    fn bad_tensor(&self, name: &str, reason: String) -> ModelError {
        ModelError::BadTensor {
            path: self.path.clone(),
            name: name.to_string(),
            reason,
        }
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<String> {
        self.string("general.architecture")
    }

    fn value(&self, key: &str) -> Result<&gguf_file::Value> {
        self.content
            .metadata
            .get(key)
            .ok_or_else(|| ModelError::MissingKey {
                path: self.path.clone(),
                key: key.to_string(),
            })
    }

    fn bad_key(&self, key: &str, reason: impl std::fmt::Display) -> ModelError {
        ModelError::BadKey {
            path: self.path.clone(),
            key: key.to_string(),
            reason: reason.to_string(),
        }
    }

    /// A required unsigned integer (any integer width) that must be positive.
    pub fn usize(&self, key: &str) -> Result<usize> {
        match self.opt_usize(key)? {
            Some(0) => Err(self.bad_key(key, "must be greater than 0")),
            Some(v) => Ok(v),
            None => Err(ModelError::MissingKey {
                path: self.path.clone(),
                key: key.to_string(),
            }),
        }
    }

    /// An optional unsigned integer of any width.
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        use gguf_file::Value::*;
        let Some(v) = self.content.metadata.get(key) else {
            return Ok(None);
        };
        let n: i128 = match v {
            U8(x) => *x as i128,
            I8(x) => *x as i128,
            U16(x) => *x as i128,
            I16(x) => *x as i128,
            U32(x) => *x as i128,
            I32(x) => *x as i128,
            U64(x) => *x as i128,
            I64(x) => *x as i128,
            other => {
                return Err(self.bad_key(
                    key,
                    format!("expected an integer, found {:?}", other.value_type()),
                ))
            }
        };
        if n < 0 || n > u32::MAX as i128 * 16 {
            return Err(self.bad_key(key, format!("value {n} is out of range")));
        }
        Ok(Some(n as usize))
    }

    /// An optional float (f32 or f64).
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>> {
        match self.content.metadata.get(key) {
            None => Ok(None),
            Some(gguf_file::Value::F32(v)) => Ok(Some(*v)),
            Some(gguf_file::Value::F64(v)) => Ok(Some(*v as f32)),
            Some(other) => Err(self.bad_key(
                key,
                format!("expected a float, found {:?}", other.value_type()),
            )),
        }
    }

    /// A required string.
    pub fn string(&self, key: &str) -> Result<String> {
        match self.value(key)? {
            gguf_file::Value::String(s) => Ok(s.clone()),
            other => Err(self.bad_key(
                key,
                format!("expected a string, found {:?}", other.value_type()),
            )),
        }
    }

    /// An optional string.
    pub fn opt_string(&self, key: &str) -> Result<Option<String>> {
        if self.content.metadata.contains_key(key) {
            self.string(key).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Whether the file holds a tensor of this name.
    pub fn has_tensor(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// The shape of a tensor, as candle orders it (rows, then columns).
    pub fn tensor_dims(&self, name: &str) -> Result<Vec<usize>> {
        self.content
            .tensor_infos
            .get(name)
            .map(|i| i.shape.dims().to_vec())
            .ok_or_else(|| self.bad_tensor(name, "missing from the file".into()))
    }

    /// The storage type of a tensor.
    pub fn tensor_dtype(&self, name: &str) -> Result<GgmlDType> {
        self.content
            .tensor_infos
            .get(name)
            .map(|i| i.ggml_dtype)
            .ok_or_else(|| self.bad_tensor(name, "missing from the file".into()))
    }

    /// Reads a tensor, checking its shape when `dims` is given.
    pub fn tensor(
        &mut self,
        name: &str,
        dims: Option<&[usize]>,
        device: &Device,
    ) -> Result<QTensor> {
        let actual = self.tensor_dims(name)?;
        if let Some(dims) = dims {
            if actual != dims {
                return Err(
                    self.bad_tensor(name, format!("expected shape {dims:?}, found {actual:?}"))
                );
            }
        }
        self.content
            .tensor(&mut self.reader, name, device)
            .map_err(|e| ModelError::BadTensor {
                path: self.path.clone(),
                name: name.to_string(),
                reason: format!("cannot read its data: {e}"),
            })
    }
}

/// Whether a candle error from the GGUF reader means the file ended early.
fn is_truncation(e: &candle_core::Error) -> bool {
    match e {
        candle_core::Error::Io(io) => io.kind() == std::io::ErrorKind::UnexpectedEof,
        candle_core::Error::WithBacktrace { inner, .. }
        | candle_core::Error::Context { inner, .. }
        | candle_core::Error::WithPath { inner, .. } => is_truncation(inner),
        // candle's own bounds checks: "... exceeds remaining file bytes", "only N remaining".
        candle_core::Error::Msg(m) => m.contains("remaining"),
        _ => false,
    }
}

/// What `cairn model info` shows about a GGUF file, read from its header only.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ModelInfo {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub file_size: u64,
    /// The GGUF format version (1, 2 or 3).
    pub gguf_version: u32,
    /// `general.architecture`, e.g. `llama`, `qwen2`.
    pub architecture: Option<String>,
    /// `general.name`.
    pub name: Option<String>,
    /// The number of weights: the sum of every tensor's elements.
    pub parameters: u64,
    /// How many tensors the file holds.
    pub tensor_count: usize,
    /// Tensor counts by quantization type (`Q4_K`, `F32`, ...).
    pub tensor_types: BTreeMap<String, usize>,
    /// `<arch>.context_length`: the longest context the model was trained for.
    pub context_length: Option<u64>,
    /// `<arch>.embedding_length`.
    pub embedding_length: Option<u64>,
    /// `<arch>.block_count`: the number of layers.
    pub layers: Option<u64>,
    /// `<arch>.attention.head_count`.
    pub heads: Option<u64>,
    /// `<arch>.attention.head_count_kv` (fewer than `heads` with grouped-query attention).
    pub kv_heads: Option<u64>,
    /// The number of tokens in `tokenizer.ggml.tokens` (else `<arch>.vocab_size`).
    pub vocab_size: Option<u64>,
    /// `tokenizer.ggml.model`, e.g. `gpt2` for byte-level BPE.
    pub tokenizer_model: Option<String>,
    /// `tokenizer.ggml.pre`: the pre-tokenizer's name.
    pub tokenizer_pre: Option<String>,
    /// Whether the file has its own `tokenizer.chat_template`.
    pub chat_template: bool,
    /// How many metadata keys the header holds.
    pub metadata_keys: usize,
}

/// Reads a GGUF file's header (never its weights) into a [`ModelInfo`], with the same checks
/// as loading: not GGUF, truncated and malformed files are errors naming the file.
pub fn describe_gguf(path: &Path) -> Result<ModelInfo> {
    let gguf = GgufFile::open(path)?;
    let content = &gguf.content;
    let mut parameters = 0u64;
    let mut tensor_types = BTreeMap::new();
    for t in content.tensor_infos.values() {
        parameters += t.shape.elem_count() as u64;
        *tensor_types
            .entry(dtype_name(t.ggml_dtype).to_string())
            .or_insert(0) += 1;
    }
    let architecture = gguf.opt_string("general.architecture").ok().flatten();
    // Informational: a key of the wrong type shows as absent rather than failing `info`.
    let arch_key = |k: &str| {
        architecture
            .as_deref()
            .and_then(|a| gguf.opt_usize(&format!("{a}.{k}")).ok().flatten())
            .map(|v| v as u64)
    };
    let vocab_size = match content.metadata.get("tokenizer.ggml.tokens") {
        Some(gguf_file::Value::Array(tokens)) => Some(tokens.len() as u64),
        _ => arch_key("vocab_size"),
    };
    let text = |k: &str| gguf.opt_string(k).ok().flatten();
    Ok(ModelInfo {
        path: gguf.path.clone(),
        file_size: gguf.file_size,
        gguf_version: match content.magic {
            gguf_file::VersionedMagic::GgufV1 => 1,
            gguf_file::VersionedMagic::GgufV2 => 2,
            gguf_file::VersionedMagic::GgufV3 => 3,
        },
        name: text("general.name"),
        parameters,
        tensor_count: content.tensor_infos.len(),
        tensor_types,
        context_length: arch_key("context_length"),
        embedding_length: arch_key("embedding_length"),
        layers: arch_key("block_count"),
        heads: arch_key("attention.head_count"),
        kv_heads: arch_key("attention.head_count_kv"),
        vocab_size,
        tokenizer_model: text("tokenizer.ggml.model"),
        tokenizer_pre: text("tokenizer.ggml.pre"),
        chat_template: text("tokenizer.chat_template").is_some_and(|s| !s.is_empty()),
        metadata_keys: content.metadata.len(),
        architecture,
    })
}

/// The name llama.cpp uses for a tensor type.
pub fn dtype_name(t: GgmlDType) -> &'static str {
    match t {
        GgmlDType::F32 => "F32",
        GgmlDType::F16 => "F16",
        GgmlDType::BF16 => "BF16",
        GgmlDType::Q4_0 => "Q4_0",
        GgmlDType::Q4_1 => "Q4_1",
        GgmlDType::Q5_0 => "Q5_0",
        GgmlDType::Q5_1 => "Q5_1",
        GgmlDType::Q8_0 => "Q8_0",
        GgmlDType::Q8_1 => "Q8_1",
        GgmlDType::Q2K => "Q2_K",
        GgmlDType::Q3K => "Q3_K",
        GgmlDType::Q4K => "Q4_K",
        GgmlDType::Q5K => "Q5_K",
        GgmlDType::Q6K => "Q6_K",
        GgmlDType::Q8K => "Q8_K",
    }
}
