//! The KV cache: keys and values of every layer for the tokens seen so far.
//!
//! Owned by the project (not hidden inside a model struct) so that a [`super::Session`] can
//! cut it back to any prefix and reuse it. Storage is preallocated per layer as
//! `(kv_heads, capacity, head_dim)` tensors and new positions are written in place
//! (`slice_set`); capacity grows by doubling up to the model's context length, so appending a
//! token never re-concatenates the cache. Truncation only moves the length;
//! [`KvCache::snapshot`] copies the live prefix so it can be restored later.
//!
//! Caches for cairn's own CPU forward pass ([`KvCache::new_host`]) keep plain `f32` vectors
//! instead, position-major (`capacity × kv_heads × head_dim` per layer), so appending and
//! growing never re-lay out the stored positions; they also own that forward pass's working
//! buffers ([`super::cpu::Scratch`]).

use candle_core::{DType, Device, Tensor};

use super::cpu::Scratch;
use super::gguf::{ModelError, Result};

/// Capacity allocated on first use, in positions; grows by doubling.
const INITIAL_CAPACITY: usize = 256;

/// Where the keys and values live.
#[derive(Debug, Clone)]
enum Store {
    /// Candle tensors, `(kv_heads, capacity, head_dim)` per layer.
    Tensors {
        keys: Vec<Tensor>,
        values: Vec<Tensor>,
    },
    /// Host vectors, position-major, `capacity × kv_heads × head_dim` per layer.
    Host {
        keys: Vec<Vec<f32>>,
        values: Vec<Vec<f32>>,
    },
}

impl Store {
    fn layers(&self) -> usize {
        match self {
            Store::Tensors { keys, .. } => keys.len(),
            Store::Host { keys, .. } => keys.len(),
        }
    }
}

/// Per-layer keys and values, preallocated and appended in place.
#[derive(Debug)]
pub struct KvCache {
    store: Store,
    scratch: Scratch,
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
    store: Store,
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
            store: Store::Tensors {
                keys: Vec::with_capacity(layers),
                values: Vec::with_capacity(layers),
            },
            scratch: Scratch::default(),
            len: 0,
            capacity: 0,
            max_len,
            kv_heads,
            head_dim,
            device: device.clone(),
        }
    }

    /// An empty cache in host memory for cairn's CPU forward pass (see the module docs).
    pub fn new_host(layers: usize, kv_heads: usize, head_dim: usize, max_len: usize) -> Self {
        let mut cache = KvCache::new(layers, kv_heads, head_dim, max_len, &Device::Cpu);
        cache.store = Store::Host {
            keys: Vec::with_capacity(layers),
            values: Vec::with_capacity(layers),
        };
        cache
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
        2 * self.store.layers() * self.kv_heads * self.capacity * self.head_dim * 4
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
        if needed <= self.capacity && self.store.layers() == layers {
            return Ok(());
        }
        let new_cap = needed
            .max(self.capacity * 2)
            .max(INITIAL_CAPACITY)
            .min(self.max_len);
        match &mut self.store {
            Store::Host { keys, values } => {
                // Position-major: growing keeps the stored positions where they are.
                let size = new_cap * self.kv_heads * self.head_dim;
                keys.resize_with(layers, Vec::new);
                values.resize_with(layers, Vec::new);
                for v in keys.iter_mut().chain(values.iter_mut()) {
                    v.resize(size, 0.0);
                }
            }
            Store::Tensors { keys, values } => {
                let shape = (self.kv_heads, new_cap, self.head_dim);
                let mut new_keys = Vec::with_capacity(layers);
                let mut new_values = Vec::with_capacity(layers);
                for layer in 0..layers {
                    let k = Tensor::zeros(shape, DType::F32, &self.device)?;
                    let v = Tensor::zeros(shape, DType::F32, &self.device)?;
                    if self.len > 0 {
                        k.slice_set(&keys[layer].narrow(1, 0, self.len)?.contiguous()?, 1, 0)?;
                        v.slice_set(&values[layer].narrow(1, 0, self.len)?.contiguous()?, 1, 0)?;
                    }
                    new_keys.push(k);
                    new_values.push(v);
                }
                *keys = new_keys;
                *values = new_values;
            }
        }
        self.capacity = new_cap;
        Ok(())
    }

    /// Writes `k`, `v` of shape `(kv_heads, n, head_dim)` for `layer` at positions
    /// `len..len + n`. The length moves only with [`KvCache::advance`], once every layer is
    /// written. Call [`KvCache::reserve`] first.
    pub fn write(&mut self, layer: usize, k: &Tensor, v: &Tensor) -> Result<()> {
        let (keys, values) = self.tensors()?;
        keys[layer].slice_set(k, 1, self.len)?;
        values[layer].slice_set(v, 1, self.len)?;
        Ok(())
    }

    fn tensors(&self) -> Result<(&[Tensor], &[Tensor])> {
        match &self.store {
            Store::Tensors { keys, values } => Ok((keys, values)),
            Store::Host { .. } => Err(not_this_kind("tensor")),
        }
    }

    /// The host forward pass's view: its working buffers and the per-layer vectors.
    pub(crate) fn host_parts(&mut self) -> Result<(&mut Scratch, HostKv<'_>)> {
        match &mut self.store {
            Store::Host { keys, values } => Ok((&mut self.scratch, HostKv { keys, values })),
            Store::Tensors { .. } => Err(not_this_kind("host")),
        }
    }

    /// Keys and values of `layer` for positions `0..total`, as views of shape
    /// `(kv_heads, total, head_dim)`.
    pub fn view(&self, layer: usize, total: usize) -> Result<(Tensor, Tensor)> {
        let (keys, values) = self.tensors()?;
        Ok((
            keys[layer].narrow(1, 0, total)?,
            values[layer].narrow(1, 0, total)?,
        ))
    }

    /// Marks `n` more positions as filled, after every layer was written.
    pub fn advance(&mut self, n: usize) {
        self.len += n;
    }

    /// Copies the live prefix.
    pub fn snapshot(&self) -> Result<KvSnapshot> {
        let store = match &self.store {
            Store::Tensors { keys, values } => {
                let copy = |ts: &[Tensor]| -> Result<Vec<Tensor>> {
                    ts.iter()
                        .map(|t| Ok(t.narrow(1, 0, self.len)?.contiguous()?))
                        .collect()
                };
                Store::Tensors {
                    keys: copy(keys)?,
                    values: copy(values)?,
                }
            }
            Store::Host { keys, values } => {
                let live = self.len * self.kv_heads * self.head_dim;
                let copy = |vs: &[Vec<f32>]| vs.iter().map(|v| v[..live].to_vec()).collect();
                Store::Host {
                    keys: copy(keys),
                    values: copy(values),
                }
            }
        };
        Ok(KvSnapshot {
            store,
            len: self.len,
        })
    }

    /// Puts a snapshot's positions back, replacing what the cache holds.
    pub fn restore(&mut self, snap: &KvSnapshot) -> Result<()> {
        self.len = 0;
        if snap.len == 0 {
            return Ok(());
        }
        self.reserve(snap.store.layers(), snap.len)?;
        match (&mut self.store, &snap.store) {
            (
                Store::Tensors { keys, values },
                Store::Tensors {
                    keys: sk,
                    values: sv,
                },
            ) => {
                for layer in 0..sk.len() {
                    keys[layer].slice_set(&sk[layer], 1, 0)?;
                    values[layer].slice_set(&sv[layer], 1, 0)?;
                }
            }
            (
                Store::Host { keys, values },
                Store::Host {
                    keys: sk,
                    values: sv,
                },
            ) => {
                for layer in 0..sk.len() {
                    keys[layer][..sk[layer].len()].copy_from_slice(&sk[layer]);
                    values[layer][..sv[layer].len()].copy_from_slice(&sv[layer]);
                }
            }
            _ => return Err(not_this_kind("snapshot's")),
        }
        self.len = snap.len;
        Ok(())
    }
}

/// The per-layer key and value vectors of a host cache.
pub(crate) struct HostKv<'a> {
    keys: &'a mut [Vec<f32>],
    values: &'a mut [Vec<f32>],
}

impl HostKv<'_> {
    /// Keys and values of `layer`, every allocated position.
    pub(crate) fn layer(&mut self, layer: usize) -> (&mut [f32], &mut [f32]) {
        (&mut self.keys[layer], &mut self.values[layer])
    }
}

fn not_this_kind(what: &str) -> ModelError {
    ModelError::Candle(candle_core::Error::Msg(format!(
        "this KV cache does not hold {what} storage: it was made for the other forward pass"
    )))
}
