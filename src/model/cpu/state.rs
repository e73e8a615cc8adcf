//! The CPU engine's per-session state: the KV cache in host memory as f16 (values
//! position-major, `capacity × kv_heads × head_dim` per layer; keys in blocks of 16
//! positions, see `attention`; either way appending and growing never re-lay out the stored
//! positions), the forward pass's working buffers, and the logits of the last token.

use super::attention::key_slots;
use super::matmul::Acts;
use crate::model::error::Result;
use crate::model::forward::State;
use crate::model::kv_cache::KvPositions;

/// Working buffers of the CPU forward pass, kept between calls (one set per session).
#[derive(Default)]
pub(super) struct Scratch {
    pub x: Vec<f32>,
    pub h: Vec<f32>,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub att: Vec<f32>,
    pub gate: Vec<f32>,
    pub up: Vec<f32>,
    pub acts: Acts,
}

/// One session's KV cache, working buffers and logits on the CPU engine.
pub struct CpuState {
    pub(super) kv: KvPositions,
    /// Per layer, the keys' f16 bits (blocked, see `attention`).
    pub(super) keys: Vec<Vec<u16>>,
    /// Per layer, the values' f16 bits (position-major).
    pub(super) values: Vec<Vec<u16>>,
    pub(super) scratch: Scratch,
    pub(super) logits: Vec<f32>,
}

impl std::fmt::Debug for CpuState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuState")
            .field("kv", &self.kv)
            .finish_non_exhaustive()
    }
}

/// A copy of a [`CpuState`]'s live prefix and logits, or of the positions `start..len` of it
/// (a delta, [`CpuState::snapshot_from`]: keys position-major like the values, to be written
/// after a state that holds the first `start`).
#[derive(Debug, Clone)]
pub struct CpuSnapshot {
    keys: Vec<Vec<u16>>,
    values: Vec<Vec<u16>>,
    start: usize,
    len: usize,
    logits: Vec<f32>,
}

impl CpuSnapshot {
    /// How many positions the state holds once it is restored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no position.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first position it holds (0 unless it is a delta).
    pub fn start(&self) -> usize {
        self.start
    }

    /// Writes it as little-endian numbers: the first position, the positions and layers, then
    /// per layer the keys' and the values' f16 bits (each with its count), then the logits'
    /// f32 (with their count).
    pub fn write_to(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        w.write_all(&(self.start as u64).to_le_bytes())?;
        w.write_all(&(self.len as u64).to_le_bytes())?;
        w.write_all(&(self.keys.len() as u64).to_le_bytes())?;
        for (k, v) in self.keys.iter().zip(&self.values) {
            write_numbers(w, k)?;
            write_numbers(w, v)?;
        }
        write_numbers(w, &self.logits)
    }

    /// Reads what [`CpuSnapshot::write_to`] wrote, for a model of `layers` layers whose KV
    /// rows are `width` values and whose vocabulary is `vocab` tokens: every count must be
    /// the one such a model's state has, so a file of another model (or cut short) is an
    /// error, never a state that does not fit.
    pub fn read_from(
        r: &mut dyn std::io::Read,
        layers: usize,
        width: usize,
        vocab: usize,
    ) -> std::io::Result<CpuSnapshot> {
        let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        let start = read_u64(r)? as usize;
        let len = read_u64(r)? as usize;
        if start > len {
            return Err(bad(format!("positions {start}..{len}")));
        }
        let n = read_u64(r)? as usize;
        if n != layers {
            return Err(bad(format!("{n} layers where the model has {layers}")));
        }
        let key_count = if start == 0 {
            key_slots(len, width)
        } else {
            (len - start) * width
        };
        let mut keys = Vec::with_capacity(layers);
        let mut values = Vec::with_capacity(layers);
        for _ in 0..layers {
            keys.push(read_numbers(r, key_count)?);
            values.push(read_numbers(r, (len - start) * width)?);
        }
        let logits = read_numbers(r, vocab)?;
        Ok(CpuSnapshot {
            keys,
            values,
            start,
            len,
            logits,
        })
    }
}

/// A number a snapshot holds: an f16's bits or an f32, written little-endian.
trait Number: Copy {
    /// Bytes of one.
    const BYTES: usize;
    /// Appends its little-endian bytes to `out`.
    fn put(self, out: &mut Vec<u8>);
    /// Reads one from its `BYTES` little-endian bytes.
    fn get(b: &[u8]) -> Self;
}

impl Number for u16 {
    const BYTES: usize = 2;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        u16::from_le_bytes([b[0], b[1]])
    }
}

impl Number for f32 {
    const BYTES: usize = 4;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

/// Writes the count of `xs`, then `xs`, little-endian.
fn write_numbers<T: Number>(w: &mut dyn std::io::Write, xs: &[T]) -> std::io::Result<()> {
    w.write_all(&(xs.len() as u64).to_le_bytes())?;
    let mut buf = Vec::with_capacity(T::BYTES * xs.len().min(1 << 18));
    for chunk in xs.chunks(1 << 18) {
        buf.clear();
        for &x in chunk {
            x.put(&mut buf);
        }
        w.write_all(&buf)?;
    }
    Ok(())
}

/// Reads one little-endian u64.
fn read_u64(r: &mut dyn std::io::Read) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Reads a count that must be `expected`, then that many little-endian numbers.
fn read_numbers<T: Number>(r: &mut dyn std::io::Read, expected: usize) -> std::io::Result<Vec<T>> {
    let n = read_u64(r)? as usize;
    if n != expected {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{n} numbers where {expected} were expected"),
        ));
    }
    let mut out = Vec::with_capacity(n);
    let mut buf = vec![0u8; T::BYTES * n.min(1 << 18)];
    let mut left = n;
    while left > 0 {
        let take = left.min(1 << 18);
        r.read_exact(&mut buf[..T::BYTES * take])?;
        out.extend(buf[..T::BYTES * take].chunks_exact(T::BYTES).map(T::get));
        left -= take;
    }
    Ok(out)
}

impl CpuState {
    /// A copy of the positions `start..` of this state (with the logits), to be written after
    /// a state that holds the first `start` ([`CpuState::restore_delta`]).
    pub fn snapshot_from(&self, start: usize) -> Result<CpuSnapshot> {
        let (len, width) = (self.kv.len(), self.kv.width());
        if start == 0 || start > len {
            return Err(crate::model::error::ModelError::Snapshot(format!(
                "positions {start}.. of a state of {len}"
            )));
        }
        let kv_heads = self.kv.kv_heads();
        let hd = self.kv.head_dim();
        let keys = self
            .keys
            .iter()
            .map(|k| super::attention::load_keys(k, start, len, kv_heads, hd))
            .collect();
        let values = self
            .values
            .iter()
            .map(|v| v[start * width..len * width].to_vec())
            .collect();
        Ok(CpuSnapshot {
            keys,
            values,
            start,
            len,
            logits: self.logits.clone(),
        })
    }

    /// Writes the positions of the delta `snap` after this state, which must hold exactly
    /// its first `snap.start()` positions.
    pub fn restore_delta(&mut self, snap: &CpuSnapshot) -> Result<()> {
        let held = self.kv.len();
        if snap.start == 0 || snap.start != held || snap.keys.len() != self.kv.layers() {
            return Err(crate::model::error::ModelError::Snapshot(format!(
                "positions {}..{} cannot follow a state of {held}",
                snap.start, snap.len
            )));
        }
        let width = self.kv.width();
        let (kv_heads, hd) = (self.kv.kv_heads(), self.kv.head_dim());
        self.reserve(snap.len - held)?;
        for (layer, (k, v)) in snap.keys.iter().zip(&snap.values).enumerate() {
            super::attention::put_keys(&mut self.keys[layer], k, held, kv_heads, hd);
            self.values[layer][held * width..snap.len * width].copy_from_slice(v);
        }
        self.kv.set_len(snap.len);
        self.logits.clone_from(&snap.logits);
        Ok(())
    }

    /// An empty state; nothing is allocated until the first forward pass.
    pub(super) fn new(kv: KvPositions) -> Self {
        CpuState {
            kv,
            keys: Vec::new(),
            values: Vec::new(),
            scratch: Scratch::default(),
            logits: Vec::new(),
        }
    }

    /// Makes room for `extra` more positions, growing every layer by doubling.
    pub(super) fn reserve(&mut self, extra: usize) -> Result<()> {
        if let Some(cap) = self.kv.grow_for(extra)? {
            // Position-major: growing keeps the stored positions where they are.
            let size = cap * self.kv.width();
            let layers = self.kv.layers();
            self.keys.resize_with(layers, Vec::new);
            self.values.resize_with(layers, Vec::new);
            for k in self.keys.iter_mut() {
                k.resize(key_slots(cap, self.kv.width()), 0);
            }
            for v in self.values.iter_mut() {
                v.resize(size, 0);
            }
            self.kv.set_capacity(cap);
        }
        Ok(())
    }
}

impl State for CpuState {
    type Snapshot = CpuSnapshot;

    fn kv(&self) -> &KvPositions {
        &self.kv
    }

    fn truncate(&mut self, len: usize) {
        self.kv.truncate(len);
    }

    fn logits(&self) -> &[f32] {
        &self.logits
    }

    fn snapshot(&self) -> Result<CpuSnapshot> {
        let copy = |vs: &[Vec<u16>], live: usize| vs.iter().map(|v| v[..live].to_vec()).collect();
        Ok(CpuSnapshot {
            // The keys' blocks holding the live positions (the last one may be partly used).
            keys: copy(&self.keys, key_slots(self.kv.len(), self.kv.width())),
            values: copy(&self.values, self.kv.len() * self.kv.width()),
            start: 0,
            len: self.kv.len(),
            logits: self.logits.clone(),
        })
    }

    fn restore(&mut self, snap: &CpuSnapshot) -> Result<()> {
        if snap.start != 0 {
            return Err(crate::model::error::ModelError::Snapshot(format!(
                "a snapshot of positions {}..{} is written after a state that holds the first {}",
                snap.start, snap.len, snap.start
            )));
        }
        self.kv.set_len(0);
        if snap.len > 0 {
            self.reserve(snap.len)?;
            for (layer, (k, v)) in snap.keys.iter().zip(&snap.values).enumerate() {
                self.keys[layer][..k.len()].copy_from_slice(k);
                self.values[layer][..v.len()].copy_from_slice(v);
            }
        }
        self.kv.set_len(snap.len);
        self.logits.clone_from(&snap.logits);
        Ok(())
    }
}
