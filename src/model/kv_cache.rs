//! The bookkeeping every KV cache shares: [`KvPositions`] counts the positions a cache holds
//! and has allocated, and decides how it grows.
//!
//! The storage is the engine's own (in its [`super::forward::State`]): host vectors for the
//! CPU engine, candle tensors for the candle engine. Both are preallocated and new positions
//! are written in place; capacity grows by doubling up to the model's context length, so
//! appending a token never re-concatenates the cache. Truncation only moves the length, so a
//! [`super::Session`] can cut the cache back to any prefix and reuse it.

use super::error::{ModelError, Result};

/// Capacity allocated on first use, in positions; grows by doubling.
const INITIAL_CAPACITY: usize = 256;

/// Positions held and allocated by one KV cache of `layers × kv_heads × head_dim` per
/// position.
#[derive(Debug, Clone)]
pub struct KvPositions {
    len: usize,
    capacity: usize,
    max_len: usize,
    layers: usize,
    kv_heads: usize,
    head_dim: usize,
    value_bytes: usize,
}

impl KvPositions {
    /// An empty cache's bookkeeping; it can hold up to `max_len` positions (the model's
    /// context length), each key and value stored in `value_bytes` bytes (2 for f16, 4 for
    /// f32).
    pub fn new(
        layers: usize,
        kv_heads: usize,
        head_dim: usize,
        max_len: usize,
        value_bytes: usize,
    ) -> Self {
        KvPositions {
            len: 0,
            capacity: 0,
            max_len,
            layers,
            kv_heads,
            head_dim,
            value_bytes,
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

    /// Layers of the cache.
    pub fn layers(&self) -> usize {
        self.layers
    }

    /// Values of one position of one layer: `kv_heads × head_dim`.
    pub fn width(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Key/value heads.
    pub fn kv_heads(&self) -> usize {
        self.kv_heads
    }

    /// Dimensions per head.
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Bytes allocated for keys and values.
    pub fn allocated_bytes(&self) -> usize {
        2 * self.layers * self.capacity * self.width() * self.value_bytes
    }

    /// Cuts the cache back to its first `len` positions.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Marks `n` more positions as filled, after every layer was written.
    pub fn advance(&mut self, n: usize) {
        self.len += n;
    }

    /// Sets the length outright (after a restore wrote that many positions).
    pub fn set_len(&mut self, len: usize) {
        self.len = len;
    }

    /// The capacity to grow to so that `extra` more positions fit, or `None` when they fit
    /// already; an error when they would pass the context length. The engine grows its
    /// storage, then records it with [`KvPositions::set_capacity`].
    pub fn grow_for(&self, extra: usize) -> Result<Option<usize>> {
        let needed = self.len + extra;
        if needed > self.max_len {
            return Err(ModelError::ContextOverflow {
                tokens: needed,
                context: self.max_len,
            });
        }
        if needed <= self.capacity {
            return Ok(None);
        }
        Ok(Some(
            needed
                .max(self.capacity * 2)
                .max(INITIAL_CAPACITY)
                .min(self.max_len),
        ))
    }

    /// Records the capacity the engine's storage now has.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
    }
}
