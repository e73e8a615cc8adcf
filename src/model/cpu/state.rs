//! The CPU engine's per-session state: the KV cache in host memory (values position-major,
//! `capacity × kv_heads × head_dim` per layer; keys in blocks of 16 positions, see
//! `attention`; either way appending and growing never re-lay out the stored positions), the
//! forward pass's working buffers, and the logits of the last token.

use super::attention::key_floats;
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
    pub(super) keys: Vec<Vec<f32>>,
    pub(super) values: Vec<Vec<f32>>,
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

/// A copy of a [`CpuState`]'s live prefix and logits.
#[derive(Debug, Clone)]
pub struct CpuSnapshot {
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
    len: usize,
    logits: Vec<f32>,
}

impl CpuState {
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
                k.resize(key_floats(cap, self.kv.width()), 0.0);
            }
            for v in self.values.iter_mut() {
                v.resize(size, 0.0);
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
        let copy = |vs: &[Vec<f32>], live: usize| vs.iter().map(|v| v[..live].to_vec()).collect();
        Ok(CpuSnapshot {
            // The keys' blocks holding the live positions (the last one may be partly used).
            keys: copy(&self.keys, key_floats(self.kv.len(), self.kv.width())),
            values: copy(&self.values, self.kv.len() * self.kv.width()),
            len: self.kv.len(),
            logits: self.logits.clone(),
        })
    }

    fn restore(&mut self, snap: &CpuSnapshot) -> Result<()> {
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
