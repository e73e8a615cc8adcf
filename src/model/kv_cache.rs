//! The KV cache: keys and values of every layer for the tokens seen so far.
//!
//! Owned by the project (not hidden inside a model struct) so that a [`super::Session`] can
//! cut it back to any prefix and reuse it. Storage is preallocated per layer as
//! `(kv_heads, capacity, head_dim)` tensors and new positions are written in place
//! (`slice_set`); capacity grows by doubling up to the model's context length, so appending a
//! token never re-concatenates the cache. Truncation only moves the length;
//! [`KvCache::snapshot`] copies the live prefix so it can be restored later.

use candle_core::{DType, Device, Tensor};

use super::gguf::{ModelError, Result};

/// Capacity allocated on first use, in positions; grows by doubling.
const INITIAL_CAPACITY: usize = 256;

/// Per-layer keys and values, preallocated and appended in place.
#[derive(Debug)]
pub struct KvCache {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    len: usize,
    capacity: usize,
    max_len: usize,
    kv_heads: usize,
    head_dim: usize,
    device: Device,
}

/// A copy of a cache's live prefix, restorable with [`KvCache::restore`].
#[derive(Debug, Clone)]
pub struct KvSnapshot {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    len: usize,
}

impl KvSnapshot {
    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the snapshot holds no positions.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl KvCache {
    /// An empty cache for `layers` layers; it can hold up to `max_len` positions (the model's
    /// context length). Nothing is allocated until the first append.
    pub fn new(
        layers: usize,
        kv_heads: usize,
        head_dim: usize,
        max_len: usize,
        device: &Device,
    ) -> Self {
        KvCache {
            keys: Vec::with_capacity(layers),
            values: Vec::with_capacity(layers),
            len: 0,
            capacity: 0,
            max_len,
            kv_heads,
            head_dim,
            device: device.clone(),
        }
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most positions the cache can hold (the context length).
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Positions allocated now.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes allocated for keys and values.
    pub fn allocated_bytes(&self) -> usize {
        2 * self.keys.len() * self.kv_heads * self.capacity * self.head_dim * 4
    }

    /// Cuts the cache back to its first `len` positions (no copy).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Makes room for `extra` more positions, growing storage by doubling.
    pub fn reserve(&mut self, layers: usize, extra: usize) -> Result<()> {
        let needed = self.len + extra;
        if needed > self.max_len {
            return Err(ModelError::ContextOverflow {
                tokens: needed,
                context: self.max_len,
            });
        }
        if needed <= self.capacity && self.keys.len() == layers {
            return Ok(());
        }
        let new_cap = needed
            .max(self.capacity * 2)
            .max(INITIAL_CAPACITY)
            .min(self.max_len);
        let shape = (self.kv_heads, new_cap, self.head_dim);
        let mut keys = Vec::with_capacity(layers);
        let mut values = Vec::with_capacity(layers);
        for layer in 0..layers {
            let k = Tensor::zeros(shape, DType::F32, &self.device)?;
            let v = Tensor::zeros(shape, DType::F32, &self.device)?;
            if self.len > 0 {
                k.slice_set(
                    &self.keys[layer].narrow(1, 0, self.len)?.contiguous()?,
                    1,
                    0,
                )?;
                v.slice_set(
                    &self.values[layer].narrow(1, 0, self.len)?.contiguous()?,
                    1,
                    0,
                )?;
            }
            keys.push(k);
            values.push(v);
        }
        self.keys = keys;
        self.values = values;
        self.capacity = new_cap;
        Ok(())
    }

    /// Writes `k`, `v` of shape `(kv_heads, n, head_dim)` for `layer` at positions
    /// `len..len + n`. The length moves only with [`KvCache::advance`], once every layer is
    /// written. Call [`KvCache::reserve`] first.
    pub fn write(&mut self, layer: usize, k: &Tensor, v: &Tensor) -> Result<()> {
        self.keys[layer].slice_set(k, 1, self.len)?;
        self.values[layer].slice_set(v, 1, self.len)?;
        Ok(())
    }

    /// Keys and values of `layer` for positions `0..total`, as views of shape
    /// `(kv_heads, total, head_dim)`.
    pub fn view(&self, layer: usize, total: usize) -> Result<(Tensor, Tensor)> {
        Ok((
            self.keys[layer].narrow(1, 0, total)?,
            self.values[layer].narrow(1, 0, total)?,
        ))
    }

    /// Marks `n` more positions as filled, after every layer was written.
    pub fn advance(&mut self, n: usize) {
        self.len += n;
    }

    /// Copies the live prefix.
    pub fn snapshot(&self) -> Result<KvSnapshot> {
        let copy = |ts: &[Tensor]| -> Result<Vec<Tensor>> {
            ts.iter()
                .map(|t| Ok(t.narrow(1, 0, self.len)?.contiguous()?))
                .collect()
        };
        Ok(KvSnapshot {
            keys: copy(&self.keys)?,
            values: copy(&self.values)?,
            len: self.len,
        })
    }

    /// Puts a snapshot's positions back, replacing what the cache holds.
    pub fn restore(&mut self, snap: &KvSnapshot) -> Result<()> {
        self.len = 0;
        if snap.len == 0 {
            return Ok(());
        }
        self.reserve(snap.keys.len(), snap.len)?;
        for layer in 0..snap.keys.len() {
            self.keys[layer].slice_set(&snap.keys[layer], 1, 0)?;
            self.values[layer].slice_set(&snap.values[layer], 1, 0)?;
        }
        self.len = snap.len;
        Ok(())
    }
}
