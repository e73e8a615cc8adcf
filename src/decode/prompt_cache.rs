//! The prompt cache: the KV cache of a prompt's fixed beginning (the agent's system text: its
//! rules and the tools' descriptions, a thousand tokens and more) kept in a file, so that the
//! next process with the same model, the same tools and the same beginning reads it in a few
//! milliseconds instead of computing it again. Without it every `cairn run` spent about ten
//! seconds of a 2-core machine on the same prefix before its first step.
//!
//! A file holds one prefix: a header (the identity below, the prefix's tokens, the length and
//! SHA-256 of the payload) and the payload (the state of [`crate::model::Session`] after the
//! prefix: every layer's keys and values, and the logits). Its name is a hash of the identity
//! and the tokens. A prefix in parts (the system message, then the worked example the task is
//! shown) is kept as a file of the first part whole and one per later part holding only its
//! own positions (`from` in the header): the dozen worked examples share the one system
//! message's file, and each adds 10–20 MB instead of another whole state. The identity is what the numbers depend on: the model file (path, size,
//! modification time), the cairn build (the executable's size and modification time), the
//! kernels in use and the thread count; any other value and the file is another one. Reading
//! checks the header's identity and tokens against the prompt's, the payload's length and
//! digest, and every count against the model, so a stale, foreign or damaged file is an error
//! the caller reports, never a state that is used. Files are written whole under a temporary
//! name and renamed, so a process that stops mid-write leaves no half file; the least recently
//! used are removed past [`MAX_FILES`] files or [`MAX_BYTES`]. Only the native engine's state is kept.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use sha2::{Digest, Sha256};

use crate::model::fetch::hex;
use crate::model::session::SessionSnapshot;
use crate::model::{LoadedModel, Session};

/// The first bytes of a prompt cache file (and its format's version).
const MAGIC: &[u8; 8] = b"CAIRNKV2";

/// The most prompt cache files kept in the folder; past that the least recently used go.
pub const MAX_FILES: usize = 32;

/// The most bytes of prompt cache files kept in the folder (the newest file is kept whatever
/// its size); past that the least recently used go. A file is about 29 KB per token for the
/// 1.5B preset (the KV cache in f16), 12 KB for the 0.5B.
pub const MAX_BYTES: u64 = 1 << 30;

/// The fewest tokens a prefix must have to be kept: below that computing it is as quick.
pub const MIN_TOKENS: usize = 64;

/// The fewest tokens a later part of a prefix (the worked example after the system message)
/// must have to be kept.
pub const MIN_PART: usize = 32;

/// The most files one process writes: a beginning that changes from task to task would
/// otherwise write a file per task (the worked examples are a dozen).
pub const MAX_WRITES: usize = 32;

/// What the prompt cache did for one part of a prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheUse {
    /// Whether the part was computed and written (else it was read).
    pub written: bool,
    /// Tokens of the part.
    pub tokens: usize,
    /// Bytes of the file.
    pub bytes: u64,
    /// Time it took, in ms (computing the part included when it was written).
    pub ms: f64,
    /// The file.
    pub file: PathBuf,
}

/// A folder of prompt cache files for one model, build, kernel set and thread count.
#[derive(Debug, Clone)]
pub struct PromptCache {
    dir: PathBuf,
    identity: String,
    writes: usize,
}

/// The size and modification time of `path`, as text (`?` where unknown).
fn stamp(path: &Path) -> String {
    match fs::metadata(path) {
        Ok(m) => {
            let t = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map_or_else(|| "?".to_string(), |d| d.as_nanos().to_string());
            format!("{} bytes, modified {t}", m.len())
        }
        Err(_) => "?".to_string(),
    }
}

impl PromptCache {
    /// The cache in `dir` for `lm` run with `threads` threads; `None` where states are not
    /// kept (the candle engine), and an error saying why where the running executable's path
    /// cannot be read (its states could not be told apart from another build's).
    pub fn new(dir: PathBuf, lm: &LoadedModel, threads: usize) -> Result<Option<Self>, String> {
        if lm.model.engine() != crate::model::Engine::Native {
            return Ok(None);
        }
        let exe = std::env::current_exe().map_err(|e| {
            format!(
                "the prompt cache is off for this run: the running program's path cannot be \
                 read ({e}), so its saved states could not be told apart from another build's \
                 (--no-prompt-cache turns the cache off without this warning)"
            )
        })?;
        let model = fs::canonicalize(&lm.path).unwrap_or_else(|_| lm.path.clone());
        let identity = format!(
            "model {} ({}); cairn {} {} ({}); kernels {}; threads {threads}",
            model.display(),
            stamp(&model),
            env!("CARGO_PKG_VERSION"),
            exe.display(),
            stamp(&exe),
            crate::model::cpu::CpuEngine::kernels(),
        );
        Ok(Some(PromptCache {
            dir,
            identity,
            writes: 0,
        }))
    }

    /// The file that holds the state after `tokens` (from position `from` on: 0 for the
    /// whole of it).
    pub fn file_for(&self, tokens: &[u32], from: usize) -> PathBuf {
        let mut h = Sha256::new();
        h.update(self.identity.as_bytes());
        h.update([0]);
        h.update((from as u64).to_le_bytes());
        for t in tokens {
            h.update(t.to_le_bytes());
        }
        self.dir.join(format!("{}.kv", hex(&h.finalize()[..12])))
    }

    /// The state after `tokens` for `session`'s model from its file: `Ok(None)` when there is
    /// no file; an error naming the file when it cannot be read or is not the state of these
    /// tokens under this identity.
    pub fn read(
        &self,
        session: &Session,
        tokens: &[u32],
        from: usize,
    ) -> Result<Option<(SessionSnapshot, CacheUse)>, String> {
        let start = Instant::now();
        let file = self.file_for(tokens, from);
        let bytes = match fs::read(&file) {
            Ok(b) => b,
            // No file (or no folder: a path through a file reads "not a directory").
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || !file.exists() => {
                return Ok(None)
            }
            Err(e) => {
                return Err(format!(
                    "cannot read the prompt cache file {}: {e} (the run goes on without it; \
                     --no-prompt-cache turns the cache off)",
                    file.display()
                ))
            }
        };
        let bad = |why: &str| {
            format!(
                "the prompt cache file {} is not usable ({why}); it is computed and written again",
                file.display()
            )
        };
        let rest = bytes
            .strip_prefix(MAGIC)
            .ok_or_else(|| bad("not a prompt cache file"))?;
        let (len, rest) = rest
            .split_first_chunk::<8>()
            .ok_or_else(|| bad("cut short"))?;
        let len = u64::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(bad("cut short"));
        }
        let (header, payload) = rest.split_at(len);
        let header: Header =
            serde_json::from_slice(header).map_err(|e| bad(&format!("its header: {e}")))?;
        if header.identity != self.identity || header.tokens != tokens || header.from != from {
            return Err(bad("it was written for another model, build or prompt"));
        }
        if header.payload_bytes > payload.len() as u64 {
            return Err(bad("cut short"));
        }
        if header.payload_bytes < payload.len() as u64 {
            return Err(bad("longer than its header says"));
        }
        if hex(&Sha256::digest(payload)) != header.payload_sha256 {
            return Err(bad("its contents do not match their checksum"));
        }
        let snap = session
            .read_snapshot(tokens.to_vec(), &mut &payload[..])
            .map_err(|e| bad(&e.to_string()))?;
        if snap.start() != from {
            return Err(bad("it holds other positions than its header says"));
        }
        // Touched, so that the least recently used files are the ones removed.
        if let Ok(f) = fs::File::options().append(true).open(&file) {
            let _ = f.set_modified(SystemTime::now());
        }
        let used = CacheUse {
            written: false,
            tokens: tokens.len() - from,
            bytes: bytes.len() as u64,
            ms: start.elapsed().as_secs_f64() * 1000.0,
            file,
        };
        Ok(Some((snap, used)))
    }

    /// Writes `snap` (the state after its tokens) to its file, then removes the least recently
    /// used files past [`MAX_FILES`]; the bytes written. An error naming the file when it cannot
    /// be written (and no more writes by this cache then); `Ok(None)` when this process has
    /// written [`MAX_WRITES`] files already.
    pub fn write(&mut self, snap: &SessionSnapshot) -> Result<Option<(PathBuf, u64)>, String> {
        if self.writes >= MAX_WRITES {
            return Ok(None);
        }
        self.writes += 1;
        let file = self.file_for(snap.tokens(), snap.start());
        let mut payload = Vec::new();
        match snap.write_state(&mut payload) {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(e) => return Err(format!("cannot write {}: {e}", file.display())),
        }
        let header = Header {
            identity: self.identity.clone(),
            from: snap.start(),
            tokens: snap.tokens().to_vec(),
            payload_bytes: payload.len() as u64,
            payload_sha256: hex(&Sha256::digest(&payload)),
        };
        let header = serde_json::to_vec(&header).map_err(|e| e.to_string())?;
        let fail = |e: std::io::Error| {
            format!(
                "cannot write the prompt cache file {}: {e} (the run goes on without it; \
                 --no-prompt-cache turns the cache off)",
                file.display()
            )
        };
        // A folder that cannot be written stays so for this process: one warning, and no more
        // states copied and hashed for nothing.
        if let Err(e) = fs::create_dir_all(&self.dir) {
            self.writes = MAX_WRITES;
            return Err(fail(e));
        }
        // Unique to this process and call: two jobs of one batch may write the same prefix.
        static WRITES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let tmp = self.dir.join(format!(
            ".{}.{}.{}.tmp",
            file.file_name().and_then(|n| n.to_str()).unwrap_or("kv"),
            std::process::id(),
            WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(&(header.len() as u64).to_le_bytes())?;
            f.write_all(&header)?;
            f.write_all(&payload)?;
            f.sync_all()?;
            fs::rename(&tmp, &file)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            self.writes = MAX_WRITES;
            return Err(fail(e));
        }
        self.prune();
        Ok(Some((
            file,
            (MAGIC.len() + 8 + header.len() + payload.len()) as u64,
        )))
    }

    /// Removes the least recently used `.kv` files past [`MAX_FILES`] or [`MAX_BYTES`] (the
    /// newest stays).
    fn prune(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let entries: Vec<fs::DirEntry> = entries.flatten().collect();
        // Left by a process that stopped while writing, an hour ago or more.
        for e in &entries {
            let stale = e
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age.as_secs() >= 3600);
            if e.path().extension().is_some_and(|x| x == "tmp") && stale {
                let _ = fs::remove_file(e.path());
            }
        }
        let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
            .iter()
            .filter(|e| e.path().extension().is_some_and(|x| x == "kv"))
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((m.modified().ok()?, m.len(), e.path()))
            })
            .collect();
        // Newest first; a file is kept while both bounds hold.
        files.sort_by_key(|f| std::cmp::Reverse(f.0));
        let mut bytes = 0u64;
        for (i, (_, len, path)) in files.iter().enumerate() {
            bytes += len;
            if i > 0 && (i >= MAX_FILES || bytes > MAX_BYTES) {
                let _ = fs::remove_file(path);
            }
        }
    }
}

/// A file's header.
#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    identity: String,
    /// The first position held: 0, or for the part after an earlier one, where it starts.
    from: usize,
    tokens: Vec<u32>,
    payload_bytes: u64,
    payload_sha256: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, len: u64, age_s: u64) -> PathBuf {
        let p = dir.join(name);
        let f = fs::File::create(&p).unwrap();
        f.set_len(len).unwrap();
        f.set_modified(SystemTime::now() - std::time::Duration::from_secs(age_s))
            .unwrap();
        p
    }

    #[test]
    fn the_least_recently_used_files_go_past_the_count_and_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PromptCache {
            dir: dir.path().to_path_buf(),
            identity: "test".into(),
            writes: 0,
        };
        let files: Vec<PathBuf> = (0..MAX_FILES as u64 + 2)
            .map(|i| file(dir.path(), &format!("{i}.kv"), 10, 100 - i))
            .collect();
        let other = file(dir.path(), "notes.txt", 10, 1000);
        let fresh_tmp = file(dir.path(), ".a.kv.1.0.tmp", 10, 10);
        let stale_tmp = file(dir.path(), ".b.kv.1.0.tmp", 10, 7200);
        cache.prune();
        // The two oldest go; other files stay, but a temporary file an hour old.
        assert!(!files[0].exists() && !files[1].exists());
        assert!(files[2..].iter().all(|p| p.exists()));
        assert!(other.exists() && fresh_tmp.exists() && !stale_tmp.exists());
        // Bytes: two large (sparse) files over the bound; the older goes, the newest stays
        // even alone over it.
        let big_old = file(dir.path(), "big-old.kv", MAX_BYTES / 2 + 1, 1);
        let big_new = file(dir.path(), "big-new.kv", MAX_BYTES + 1, 0);
        cache.prune();
        assert!(big_new.exists() && !big_old.exists());
        assert!(files.iter().all(|p| !p.exists()));
    }
}
