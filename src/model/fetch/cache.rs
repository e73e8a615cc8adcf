//! The cache folder's bookkeeping: finding a preset's file (in the models folder or the Hugging
//! Face cache), checking it by size and SHA-256, the `<file>.sha256` stamps that record a
//! check, and the per-preset lock file.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

use super::error::{io_err, FetchError};
use super::hf::hf_cached_file;
use super::presets::Preset;
use super::progress::Progress;
use super::FetchOptions;

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
    if let Some(hf) = hf_cached_file(&opts.hf, p.hf_repo, p.hf_file) {
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

/// The SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, io::Error> {
    hash_with_progress(path, &mut Progress::new(None, String::new(), 0))
}

/// Bytes as lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The stamp of a file in the models folder: `<file>.sha256` next to it.
pub(super) fn stamp_path_local(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".sha256");
    file.with_file_name(name)
}

/// The stamp of a preset's file in the Hugging Face cache. That cache is not ours to write
/// into, so the stamp lives in the models folder: `<file>.hf.sha256`.
pub(super) fn stamp_path_hf(p: &Preset, opts: &FetchOptions) -> PathBuf {
    opts.models_dir.join(format!("{}.hf.sha256", p.file_name))
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

/// Whether `stamp` records `sha256` for `file` as it is now (same size, time and path).
fn stamp_matches(stamp: &Path, file: &Path, sha256: &str) -> bool {
    let Ok(text) = fs::read_to_string(stamp) else {
        return false;
    };
    match (Stamp::parse(&text), Stamp::of(file, sha256)) {
        (Some(recorded), Ok(now)) => recorded == now,
        _ => false,
    }
}

/// Records that `file` (as it is now) has hashed to `sha256`.
pub(super) fn write_stamp(stamp: &Path, file: &Path, sha256: &str) -> Result<(), FetchError> {
    let s = Stamp::of(file, sha256).map_err(io_err(format!("cannot read {}", file.display())))?;
    fs::write(stamp, s.render()).map_err(io_err(format!("cannot write {}", stamp.display())))
}

/// The fast path: a cached file whose stamp says it was hashed and has not changed since.
pub(super) fn verified_by_stamp(p: &Preset, opts: &FetchOptions) -> Option<PathBuf> {
    let local = opts.models_dir.join(p.file_name);
    if stamp_matches(&stamp_path_local(&local), &local, p.sha256) {
        return Some(local);
    }
    let hf = hf_cached_file(&opts.hf, p.hf_repo, p.hf_file)?;
    stamp_matches(&stamp_path_hf(p, opts), &hf, p.sha256).then_some(hf)
}

/// The full check, under the lock: a cached file of the right size is hashed unless its stamp
/// is current. A bad file in the models folder is deleted; one in the Hugging Face cache is
/// left alone (it is not ours) but is an error all the same.
pub(super) fn cached_and_verified(
    p: &Preset,
    opts: &FetchOptions,
) -> Result<Option<PathBuf>, FetchError> {
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
    if let Some(hf) = hf_cached_file(&opts.hf, p.hf_repo, p.hf_file) {
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
pub(super) enum BadFile {
    /// The file has this many bytes, not the preset's.
    Size(u64),
    /// The file's SHA-256 is this, not the preset's.
    Hash(String),
    /// The file could not be read (or stamped).
    Io(FetchError),
}

impl BadFile {
    /// The error for `path`, failing `p`'s check, with `detail` saying what was done about it.
    pub(super) fn into_error(self, path: &Path, p: &Preset, detail: String) -> FetchError {
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

/// Checks `file` against the preset: its size, then its SHA-256 unless `stamp` is current;
/// a match is stamped.
pub(super) fn check_file(
    p: &Preset,
    file: &Path,
    stamp: &Path,
    opts: &FetchOptions,
) -> Result<(), BadFile> {
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
        opts.progress.as_ref(),
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

/// Hashes a file, counting its bytes on `progress`.
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
pub(super) fn lock_preset(p: &Preset, opts: &FetchOptions) -> Result<File, FetchError> {
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
            opts.note(&format!(
                "waiting for another cairn that is fetching {} ({})",
                p.name,
                path.display()
            ));
        }
        Err(fs::TryLockError::Error(e)) => {
            return Err(io_err(format!("cannot lock {}", path.display()))(e))
        }
    }
    file.lock()
        .map_err(io_err(format!("cannot lock {}", path.display())))?;
    Ok(file)
}
