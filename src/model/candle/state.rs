//! The candle engine's per-session state: the KV cache as candle tensors on the engine's
//! device, `(kv_heads, capacity, head_dim)` per layer, written in place (`slice_set`) at f16
//! precision (held as f32), and the logits of the last token copied to host memory.

use candle_core::{DType, Device, Tensor};

use crate::model::error::Result;
use crate::model::forward::State;
use crate::model::kv_cache::KvPositions;

/// One session's KV cache and logits on the candle engine.
#[derive(Debug)]
pub struct CandleState {
    pub(super) kv: KvPositions,
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    pub(super) logits: Vec<f32>,
    /// How long the last copy of the logits to host memory took, after the device had
    /// finished the forward pass (`None` on the CPU, where there is no copy to time).
    pub(super) logits_copy: Option<std::time::Duration>,
    device: Device,
}

/// A copy of a [`CandleState`]'s live prefix and logits.
#[derive(Debug, Clone)]
pub struct CandleSnapshot {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    len: usize,
    logits: Vec<f32>,
}

impl CandleState {
    /// An empty state on `device`; nothing is allocated until the first forward pass.
    pub(super) fn new(kv: KvPositions, device: &Device) -> Self {
        CandleState {
            kv,
            keys: Vec::new(),
            values: Vec::new(),
            logits: Vec::new(),
            logits_copy: None,
            device: device.clone(),
        }
    }

    /// Makes room for `extra` more positions, growing storage by doubling.
    pub(super) fn reserve(&mut self, extra: usize) -> Result<()> {
        let Some(cap) = self.kv.grow_for(extra)? else {
            return Ok(());
        };
        let shape = (self.kv.kv_heads(), cap, self.kv.head_dim());
        let len = self.kv.len();
        let mut keys = Vec::with_capacity(self.kv.layers());
        let mut values = Vec::with_capacity(self.kv.layers());
        for layer in 0..self.kv.layers() {
            let k = Tensor::zeros(shape, DType::F32, &self.device)?;
            let v = Tensor::zeros(shape, DType::F32, &self.device)?;
            if len > 0 {
                k.slice_set(&self.keys[layer].narrow(1, 0, len)?.contiguous()?, 1, 0)?;
                v.slice_set(&self.values[layer].narrow(1, 0, len)?.contiguous()?, 1, 0)?;
            }
            keys.push(k);
            values.push(v);
        }
        self.keys = keys;
        self.values = values;
        self.kv.set_capacity(cap);
        Ok(())
    }

    /// Writes `k`, `v` of shape `(kv_heads, n, head_dim)` for `layer` at positions
    /// `len..len + n`, rounded to f16 as the CPU engine's cache holds them (and llama.cpp's
    /// by default), so that both engines compute the same numbers. The length moves only once
    /// every layer is written. Call [`CandleState::reserve`] first.
    pub(super) fn write(&mut self, layer: usize, k: &Tensor, v: &Tensor) -> Result<()> {
        // Saturating at f16's largest value, as the CPU engine does, not rounding to ∞.
        let round = |t: &Tensor| {
            t.clamp(-65504f32, 65504f32)?
                .to_dtype(DType::F16)?
                .to_dtype(DType::F32)
        };
        self.keys[layer].slice_set(&round(k)?, 1, self.kv.len())?;
        self.values[layer].slice_set(&round(v)?, 1, self.kv.len())?;
        Ok(())
    }

    /// Keys and values of `layer` for positions `0..total`, as views of shape
    /// `(kv_heads, total, head_dim)`.
    pub(super) fn view(&self, layer: usize, total: usize) -> Result<(Tensor, Tensor)> {
        Ok((
            self.keys[layer].narrow(1, 0, total)?,
            self.values[layer].narrow(1, 0, total)?,
        ))
    }
}

impl CandleState {
    /// How long the last forward pass's copy of the logits to host memory took (`None` on
    /// the CPU).
    pub fn logits_copy_time(&self) -> Option<std::time::Duration> {
        self.logits_copy
    }
}

impl State for CandleState {
    type Snapshot = CandleSnapshot;

    fn kv(&self) -> &KvPositions {
        &self.kv
    }

    fn truncate(&mut self, len: usize) {
        self.kv.truncate(len);
    }

    fn logits(&self) -> &[f32] {
        &self.logits
    }

    fn snapshot(&self) -> Result<CandleSnapshot> {
        let len = self.kv.len();
        let copy = |ts: &[Tensor]| -> Result<Vec<Tensor>> {
            ts.iter()
                .map(|t| Ok(t.narrow(1, 0, len)?.contiguous()?))
                .collect()
        };
        Ok(CandleSnapshot {
            keys: copy(&self.keys)?,
            values: copy(&self.values)?,
            len,
            logits: self.logits.clone(),
        })
    }

    fn restore(&mut self, snap: &CandleSnapshot) -> Result<()> {
        self.kv.set_len(0);
        if snap.len > 0 {
            self.reserve(snap.len)?;
            for (layer, (k, v)) in snap.keys.iter().zip(&snap.values).enumerate() {
                self.keys[layer].slice_set(k, 1, 0)?;
                self.values[layer].slice_set(v, 1, 0)?;
            }
        }
        self.kv.set_len(snap.len);
        self.logits.clone_from(&snap.logits);
        Ok(())
    }
}
