//! Opening GGUF files and reading their metadata by key.
//!
//! [`GgufFile`] wraps candle's GGUF reader with the checks and messages a user needs: a file
//! that is not GGUF says so, a truncated file names the first tensor that runs past its end,
//! and a missing or mistyped metadata key is named. [`ModelError`] is the error type of the
//! whole model runtime.

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
    /// The file is not GGUF, or its header is corrupt.
    #[error("{path} is not a usable GGUF file: {reason}")]
    NotGguf {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// The file ends before the tensor data it declares.
    #[error("{path} is truncated: tensor `{tensor}` needs bytes up to {needed} but the file has {actual}; download it again")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// The first tensor that does not fit.
        tensor: String,
        /// The end offset it needs.
        needed: u64,
        /// The file's size.
        actual: u64,
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
                    format!("the file has only {file_size} bytes")
                } else {
                    e.to_string()
                },
            });
        }
        if &magic != GGUF_MAGIC {
            return Err(ModelError::NotGguf {
                path: path.to_path_buf(),
                reason: format!(
                    "it starts with {:?} instead of the GGUF magic \"GGUF\"",
                    String::from_utf8_lossy(&magic)
                ),
            });
        }
        use std::io::Seek;
        reader.rewind().map_err(io)?;
        let content = gguf_file::Content::read(&mut reader).map_err(|e| ModelError::NotGguf {
            path: path.to_path_buf(),
            reason: format!("corrupt or truncated header: {e}"),
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
            if end > self.file_size && worst.is_none_or(|(_, e)| end < e) {
                worst = Some((name, end));
            }
        }
        if let Some((name, end)) = worst {
            return Err(ModelError::Truncated {
                path: self.path.clone(),
                tensor: name.clone(),
                needed: end,
                actual: self.file_size,
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
