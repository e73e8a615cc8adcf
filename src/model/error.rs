//! [`ModelError`], the error type of the whole model runtime: loading a GGUF file,
//! tokenizing, running a forward pass, generating. Each variant says what failed;
//! [`ModelError::Tensor`] is only for failures inside a tensor computation.

use std::path::PathBuf;

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
    /// A call needs tokens to run and was given none.
    #[error("{what} needs at least one token")]
    NoTokens {
        /// The call (`feed`, `append`, `forward`).
        what: &'static str,
    },
    /// Logits were asked of a session that has none (nothing fed since it was made or cut).
    #[error("the session has no logits: feed it tokens first")]
    NoLogits,
    /// A session state or snapshot of one engine was used with another.
    #[error("a {what} of the {found} engine was used with the {expected} engine")]
    EngineMismatch {
        /// `session state` or `snapshot`.
        what: &'static str,
        /// The engine it belongs to.
        found: &'static str,
        /// The engine it was used with.
        expected: &'static str,
    },
    /// A snapshot that does not fit the state it is written to (a delta after another prefix).
    #[error("a saved state does not fit: {0}")]
    Snapshot(String),
    /// The device asked for cannot be used (not compiled in, absent, or its driver failed).
    #[error("cannot run on {device}: {reason}")]
    Device {
        /// The device, as `cuda:0`.
        device: String,
        /// Why, and what to do.
        reason: String,
    },
    /// Constrained decoding failed.
    #[error("constrained decoding failed: {0}")]
    Constraint(String),
    /// A tensor computation (candle) failed.
    #[error("tensor computation failed: {0}")]
    Tensor(#[from] candle_core::Error),
}

/// Result type of the model runtime.
pub type Result<T, E = ModelError> = std::result::Result<T, E>;
