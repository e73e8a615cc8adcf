//! Opening GGUF files and reading their metadata by key.
//!
//! [`GgufFile`] wraps candle's GGUF reader with the checks and messages a user needs: a file
//! that is not GGUF says so, a truncated file names the first tensor that runs past its end,
//! and a missing or mistyped metadata key is named (errors are [`super::error::ModelError`]).
//! [`describe_gguf`] summarises a file's header for `cairn model info`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::Device;

/// The model runtime's error type, also reachable here (where it used to live).
use super::error::{ModelError, Result};

/// An open GGUF file: its parsed header and a reader for tensor data.
pub struct GgufFile {
    /// Where the file is.
    pub path: PathBuf,
    /// Metadata and tensor infos.
    pub content: gguf_file::Content,
    /// The file's size in bytes.
    pub file_size: u64,
    reader: BufReader<File>,
    /// The whole file mapped read-only, made on first use ([`GgufFile::mapped`]).
    map: Option<Arc<memmap2::Mmap>>,
}

const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// Whether [`GgufFile::mapped`] reads the file into memory of 2 MB pages ([`huge_copy`])
/// instead of mapping it: `--huge-pages`, set once per process by the CLI.
static HUGE_PAGES: AtomicBool = AtomicBool::new(false);

/// Sets whether model files are read into memory backed by 2 MB pages (`--huge-pages`).
pub fn set_huge_pages(on: bool) {
    HUGE_PAGES.store(on, Ordering::Relaxed);
}

/// Whether model files are read into memory backed by 2 MB pages ([`set_huge_pages`]).
pub fn huge_pages() -> bool {
    HUGE_PAGES.load(Ordering::Relaxed)
}

/// A copy of the file `f` (`len` bytes) in anonymous memory the kernel is asked to back with
/// 2 MB pages, read by the CPU pool's threads in parallel (`pread`, so the file's pages are
/// never mapped into this process and the peak memory is the copy's). Decoding streams every
/// weight once per token: with 4 KB pages the CPU's prefetchers stop at every page and its
/// address cache misses 256 times a megabyte. A 2-core AMD EPYC (Zen 4) read 29–31 GB/s from
/// the mapped file and 33–34 GB/s from such a copy (a test program, 2 threads). Errors when
/// the memory cannot be had, or when the kernel holds none of it in 2 MB pages
/// (transparent huge pages turned off): the copy would then only cost time. A file smaller
/// than one such page is copied all the same (tests, tiny models).
#[cfg(target_os = "linux")]
fn huge_copy(f: &File, len: usize) -> std::io::Result<memmap2::Mmap> {
    use std::os::unix::fs::FileExt;
    let mut anon = memmap2::MmapMut::map_anon(len)?;
    anon.advise(memmap2::Advice::HugePage)?;
    const CHUNK: usize = 8 << 20;
    let pieces = len.div_ceil(CHUNK);
    struct Dst(*mut u8);
    // SAFETY: each piece writes its own range of the buffer.
    unsafe impl Sync for Dst {}
    impl Dst {
        fn at(&self, i: usize) -> *mut u8 {
            self.0.wrapping_add(i)
        }
    }
    let dst = Dst(anon.as_mut_ptr());
    let failed = std::sync::Mutex::new(None);
    super::cpu::pool::global().run(pieces, &|p| {
        let (a, b) = (p * CHUNK, ((p + 1) * CHUNK).min(len));
        // SAFETY: `a..b` is inside the buffer and no other piece writes it.
        let out = unsafe { std::slice::from_raw_parts_mut(dst.at(a), b - a) };
        if let Err(e) = f.read_exact_at(out, a as u64) {
            *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    // A file under one huge page can have none.
    if len >= HUGE_PAGE && huge_kb(&anon) == Some(0) {
        return Err(std::io::Error::other(
            "the kernel gave no 2 MB pages for it (is /sys/kernel/mm/transparent_hugepage/enabled `never`?); run without --huge-pages",
        ));
    }
    anon.make_read_only()
}

/// The size of a transparent huge page on x86-64 (and of the pages [`huge_copy`] asks for).
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

/// How many kilobytes of `map` the kernel holds in huge pages (`AnonHugePages` of its entry
/// in `/proc/self/smaps`); `None` when that cannot be read.
#[cfg(target_os = "linux")]
fn huge_kb(map: &memmap2::MmapMut) -> Option<u64> {
    let start = format!("{:x}-", map.as_ptr() as usize);
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let entry = smaps
        .split('\n')
        .skip_while(|l| !l.starts_with(&start))
        .skip(1);
    for line in entry {
        if line
            .split_whitespace()
            .next()
            .is_some_and(|w| w.contains('-') && !w.ends_with(':'))
        {
            break;
        }
        if let Some(kb) = line.strip_prefix("AnonHugePages:") {
            return kb.trim().trim_end_matches("kB").trim().parse().ok();
        }
    }
    None
}

/// Off Linux there are no transparent huge pages to ask for.
#[cfg(not(target_os = "linux"))]
fn huge_copy(_f: &File, _len: usize) -> std::io::Result<memmap2::Mmap> {
    Err(std::io::Error::other(
        "--huge-pages works on Linux only; run without it",
    ))
}

impl GgufFile {
    /// Opens and validates a GGUF file: magic, header, and that every tensor's data lies
    /// inside the file (see [`read_header`]).
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
        let content = read_header(&mut reader, path, file_size)?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            content,
            file_size,
            reader,
            map: None,
        })
    }

    fn bad_tensor(&self, name: &str, reason: String) -> ModelError {
        bad_tensor(&self.path, name, reason)
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

    /// The file mapped into memory (once; later calls share the mapping) and where the data
    /// of tensor `name` lies in it, `(offset, length)`, checking its shape when `dims` is
    /// given. The tensor's bytes are then used in place: nothing is read or copied until a
    /// page is touched, and the pages are the operating system's file cache, shared with
    /// every other process that maps the same file.
    ///
    /// The file must not be changed while it is mapped (cairn's model cache never rewrites a
    /// file in place: a fetch writes a new file and renames it over the old).
    pub fn mapped(
        &mut self,
        name: &str,
        dims: Option<&[usize]>,
    ) -> Result<(Arc<memmap2::Mmap>, usize, usize)> {
        let actual = self.tensor_dims(name)?;
        if let Some(dims) = dims {
            if actual != dims {
                return Err(
                    self.bad_tensor(name, format!("expected shape {dims:?}, found {actual:?}"))
                );
            }
        }
        let map = match &self.map {
            Some(m) => m.clone(),
            None => {
                // SAFETY: the mapping is read-only, and the file is not modified while mapped
                // (see above); `open` checked that every tensor lies inside the file.
                let m = if huge_pages() {
                    let len = usize::try_from(self.file_size).unwrap_or(usize::MAX);
                    huge_copy(self.reader.get_ref(), len)
                } else {
                    unsafe { memmap2::Mmap::map(self.reader.get_ref()) }
                }
                .map_err(|source| ModelError::Io {
                    path: self.path.clone(),
                    source,
                })?;
                let m = Arc::new(m);
                self.map = Some(m.clone());
                m
            }
        };
        let info = &self.content.tensor_infos[name];
        // `open` checked these products and that the range ends inside the file.
        let elems: usize = actual.iter().product();
        let len = elems / info.ggml_dtype.block_size() * info.ggml_dtype.type_size();
        let offset = usize::try_from(self.content.tensor_data_offset.saturating_add(info.offset))
            .unwrap_or(usize::MAX);
        if offset.checked_add(len).is_none_or(|end| end > map.len()) {
            return Err(self.bad_tensor(
                name,
                format!(
                    "its data runs past the end of the mapped file ({} bytes)",
                    map.len()
                ),
            ));
        }
        Ok((map, offset, len))
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

/// Reads and validates a GGUF header from `reader`, which holds `file_size` bytes: the magic,
/// candle's parse of the metadata and tensor infos, and that every tensor's data lies inside
/// those bytes. [`GgufFile::open`] reads files through it; a `Cursor` over bytes in memory
/// works too (the `gguf_metadata` fuzz target). `path` only names the file in errors.
pub fn read_header<R: Read + Seek>(
    reader: &mut R,
    path: &Path,
    file_size: u64,
) -> Result<gguf_file::Content> {
    let io = |source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    };
    reader.rewind().map_err(io)?;
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
    reader.rewind().map_err(io)?;
    if declares_zero_alignment(reader) {
        return Err(ModelError::BadKey {
            path: path.to_path_buf(),
            key: "general.alignment".into(),
            reason: "must be greater than 0".into(),
        });
    }
    reader.rewind().map_err(io)?;
    let content = gguf_file::Content::read(reader).map_err(|e| {
        let detail = e.to_string().lines().next().unwrap_or("").to_string();
        if is_truncation(&e) {
            ModelError::Truncated {
                path: path.to_path_buf(),
                detail: format!("the header ends early ({detail}); the file has {file_size} bytes"),
            }
        } else {
            ModelError::BadGguf {
                path: path.to_path_buf(),
                detail,
            }
        }
    })?;
    check_tensor_bounds(&content, path, file_size)?;
    Ok(content)
}

/// Whether the header sets `general.alignment` to 0, found by walking the metadata ahead of
/// candle: candle-core 0.11.1 rounds the tensor data offset up with
/// `position.div_ceil(alignment)` after parsing, so such a file would panic inside
/// `Content::read` (found by the `gguf_metadata` fuzz target). Candle reads the key from any
/// integer type up to 32 bits and the last entry wins; so does this walk. A header the walk
/// cannot follow gives `false`, and candle then reports what is wrong with it.
fn declares_zero_alignment<R: Read + Seek>(reader: &mut R) -> bool {
    fn walk<R: Read + Seek>(r: &mut R) -> std::io::Result<bool> {
        let _magic = read_u32(r)?;
        let wide = read_u32(r)? >= 2; // GGUF v1 has 32-bit lengths, v2 and v3 64-bit ones.
        let _tensors = read_len(r, wide)?;
        let entries = read_len(r, wide)?;
        let mut zero = false;
        // Every entry reads at least 4 bytes, so the loop ends at the end of the file.
        for _ in 0..entries {
            let key_len = read_len(r, wide)?;
            let mut is_alignment = false;
            if key_len == 17 {
                let mut key = [0u8; 17];
                r.read_exact(&mut key)?;
                is_alignment = &key == b"general.alignment";
            } else {
                skip(r, key_len)?;
            }
            let value_type = read_u32(r)?;
            if is_alignment {
                zero = match value_type {
                    0 | 1 => read_n::<_, 1>(r)? == [0],
                    2 | 3 => read_n::<_, 2>(r)? == [0; 2],
                    4 | 5 => read_n::<_, 4>(r)? == [0; 4],
                    _ => {
                        skip_value(r, value_type, wide, 0)?;
                        false
                    }
                };
            } else {
                skip_value(r, value_type, wide, 0)?;
            }
        }
        Ok(zero)
    }
    walk(reader).unwrap_or(false)
}

fn read_n<R: Read, const N: usize>(r: &mut R) -> std::io::Result<[u8; N]> {
    let mut b = [0u8; N];
    r.read_exact(&mut b)?;
    Ok(b)
}

fn read_u32<R: Read>(r: &mut R) -> std::io::Result<u32> {
    read_n(r).map(u32::from_le_bytes)
}

fn read_len<R: Read>(r: &mut R, wide: bool) -> std::io::Result<u64> {
    if wide {
        read_n(r).map(u64::from_le_bytes)
    } else {
        read_u32(r).map(u64::from)
    }
}

fn skip<R: Seek>(r: &mut R, n: u64) -> std::io::Result<()> {
    let n = i64::try_from(n).map_err(|_| std::io::ErrorKind::InvalidData)?;
    r.seek_relative(n)
}

/// Skips one metadata value of GGUF type `value_type` (0-12).
fn skip_value<R: Read + Seek>(
    r: &mut R,
    value_type: u32,
    wide: bool,
    depth: usize,
) -> std::io::Result<()> {
    let fixed = |t: u32| match t {
        0 | 1 | 7 => Some(1u64),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    };
    if let Some(n) = fixed(value_type) {
        return skip(r, n);
    }
    match value_type {
        8 => {
            let n = read_len(r, wide)?;
            skip(r, n)
        }
        9 if depth < 64 => {
            let element_type = read_u32(r)?;
            let n = read_len(r, wide)?;
            if let Some(size) = fixed(element_type) {
                return skip(
                    r,
                    n.checked_mul(size).ok_or(std::io::ErrorKind::InvalidData)?,
                );
            }
            // Strings and arrays read at least 4 bytes each, so this ends at the end of file.
            for _ in 0..n {
                skip_value(r, element_type, wide, depth + 1)?;
            }
            Ok(())
        }
        _ => Err(std::io::ErrorKind::InvalidData.into()),
    }
}

fn check_tensor_bounds(content: &gguf_file::Content, path: &Path, file_size: u64) -> Result<()> {
    let base = content.tensor_data_offset;
    let mut worst: Option<(&String, u64)> = None;
    for (name, info) in &content.tensor_infos {
        // Checked, not `Shape::elem_count`: a corrupt header can declare dimensions whose
        // product overflows, which `elem_count` wraps in release builds and panics on in
        // debug ones (found by the `gguf_metadata` fuzz target).
        let dims = info.shape.dims();
        let Some(n) = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) else {
            return Err(bad_tensor(
                path,
                name,
                format!(
                    "its shape {dims:?} has too many elements to count (the product overflows)"
                ),
            ));
        };
        let block = info.ggml_dtype.block_size();
        if n % block != 0 {
            return Err(bad_tensor(
                path,
                name,
                format!(
                    "{n} elements is not a multiple of the {:?} block size {block}",
                    info.ggml_dtype
                ),
            ));
        }
        let Some(bytes) = ((n / block) as u64).checked_mul(info.ggml_dtype.type_size() as u64)
        else {
            return Err(bad_tensor(
                path,
                name,
                format!("its shape {dims:?} needs more than 2^64 bytes"),
            ));
        };
        let end = base.saturating_add(info.offset).saturating_add(bytes);
        if end > file_size && worst.is_none_or(|(_, e)| end > e) {
            worst = Some((name, end));
        }
    }
    if let Some((name, end)) = worst {
        return Err(ModelError::Truncated {
            path: path.to_path_buf(),
            detail: format!("tensor `{name}` needs bytes up to {end}, the file has {file_size}"),
        });
    }
    Ok(())
}

fn bad_tensor(path: &Path, name: &str, reason: String) -> ModelError {
    ModelError::BadTensor {
        path: path.to_path_buf(),
        name: name.to_string(),
        reason,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// A GGUF v3 header with no metadata and one tensor of `dims` (GGUF order) and `dtype`
    /// at offset 0, followed by `data` bytes of tensor data.
    fn header_with_tensor(dims: &[u64], dtype: u32, data: usize) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(1u64.to_le_bytes()); // tensors
        b.extend(0u64.to_le_bytes()); // metadata entries
        b.extend(1u64.to_le_bytes());
        b.push(b't');
        b.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            b.extend(d.to_le_bytes());
        }
        b.extend(dtype.to_le_bytes());
        b.extend(0u64.to_le_bytes()); // offset
        b.resize(b.len().div_ceil(32) * 32 + data, 0);
        b
    }

    fn read(bytes: &[u8]) -> Result<gguf_file::Content> {
        read_header(
            &mut Cursor::new(bytes),
            Path::new("x.gguf"),
            bytes.len() as u64,
        )
    }

    #[test]
    fn a_small_f32_tensor_is_accepted() {
        let content = read(&header_with_tensor(&[2, 2], 0, 16)).expect("valid header");
        assert_eq!(content.tensor_infos["t"].shape.dims(), &[2, 2]);
    }

    #[test]
    fn tensor_dims_whose_product_overflows_are_an_error_not_a_panic() {
        let err =
            read(&header_with_tensor(&[1 << 32, 1 << 32, 2], 0, 0)).expect_err("overflowing shape");
        assert!(
            matches!(&err, ModelError::BadTensor { name, .. } if name == "t"),
            "{err}"
        );
        assert!(err.to_string().contains("too many elements"), "{err}");
    }

    #[test]
    fn zero_general_alignment_is_an_error_not_a_panic() {
        // Found by the `gguf_metadata` fuzz target: candle divides by the alignment.
        let header = |value_type: u32, value: &[u8]| {
            let mut b = b"GGUF".to_vec();
            b.extend(3u32.to_le_bytes());
            b.extend(0u64.to_le_bytes()); // tensors
            b.extend(2u64.to_le_bytes()); // metadata entries
            for (key, ty, v) in [
                (&b"general.name"[..], 8u32, &b"\x01\0\0\0\0\0\0\0x"[..]),
                (b"general.alignment", value_type, value),
            ] {
                b.extend((key.len() as u64).to_le_bytes());
                b.extend(key);
                b.extend(ty.to_le_bytes());
                b.extend(v);
            }
            b
        };
        for (ty, zero) in [(0u32, &[0u8][..]), (3, &[0; 2]), (4, &[0; 4]), (5, &[0; 4])] {
            let err = read(&header(ty, zero)).expect_err("zero alignment");
            assert!(
                matches!(&err, ModelError::BadKey { key, .. } if key == "general.alignment"),
                "{err}"
            );
        }
        let ok = read(&header(4, &64u32.to_le_bytes())).expect("alignment 64");
        assert_eq!(ok.tensor_data_offset % 64, 0);
        // A u64 alignment is ignored by candle (it uses the default), so 0 there is harmless.
        read(&header(10, &0u64.to_le_bytes())).expect("u64 alignment");
    }

    #[test]
    fn tensor_bytes_that_overflow_are_an_error_not_a_panic() {
        // 2^63 F32 elements count fine but need 2^65 bytes.
        let err = read(&header_with_tensor(&[1 << 63], 0, 0)).expect_err("overflowing size");
        assert!(
            err.to_string().contains("needs more than 2^64 bytes"),
            "{err}"
        );
    }
}
