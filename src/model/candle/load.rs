//! Reading a GGUF file's tensors for the candle engine, onto its device: quantized matrices
//! as candle `QTensor`s (Q4_1/Q5_0/Q5_1 re-quantized to Q8_0 unless `--keep-quant`: candle
//! has no SIMD kernels for them), norms and biases dequantized.

use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::{Device, Tensor};

use crate::model::error::{ModelError, Result};
use crate::model::gguf::GgufFile;
use crate::model::weights::{LoadStats, TensorLoader};

/// A [`TensorLoader`] for the candle engine.
pub(super) struct CandleLoader<'a> {
    pub gguf: &'a mut GgufFile,
    pub device: &'a Device,
    pub requantize: bool,
    pub stats: LoadStats,
}

impl CandleLoader<'_> {
    fn qtensor(&mut self, name: &str, dims: [usize; 2]) -> Result<Arc<QTensor>> {
        let t = self.gguf.tensor(name, Some(&dims), self.device)?;
        // candle has no SIMD kernels for these types; Q8_0 has them (see --keep-quant).
        let t = match t.dtype() {
            // GPU backends have kernels for every stored type.
            _ if !self.requantize || !self.device.is_cpu() => t,
            GgmlDType::Q5_0 => {
                whole_q5_0_blocks(&t).map_err(|reason| ModelError::BadTensor {
                    path: self.gguf.path.clone(),
                    name: name.to_string(),
                    reason,
                })?;
                self.stats.note_requantized("Q5_0");
                q5_0_to_q8_0(&t, self.device)?
            }
            GgmlDType::Q4_1 | GgmlDType::Q5_1 => {
                self.stats
                    .note_requantized(crate::model::gguf::dtype_name(t.dtype()));
                QTensor::quantize(&t.dequantize(self.device)?, GgmlDType::Q8_0)?
            }
            _ => t,
        };
        self.stats.weight_bytes += t.storage_size_in_bytes();
        Ok(Arc::new(t))
    }
}

impl TensorLoader for CandleLoader<'_> {
    type Embedding = Arc<QTensor>;
    type Matrix = QMatMul;
    type Vector = Tensor;

    fn has_tensor(&self, name: &str) -> bool {
        self.gguf.has_tensor(name)
    }

    fn embedding(&mut self, name: &str, dims: [usize; 2]) -> Result<Arc<QTensor>> {
        self.qtensor(name, dims)
    }

    fn matrix(&mut self, name: &str, dims: [usize; 2]) -> Result<QMatMul> {
        Ok(QMatMul::from_arc(self.qtensor(name, dims)?)?)
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Tensor> {
        let t = self.gguf.tensor(name, Some(&[len]), self.device)?;
        Ok(t.dequantize(self.device)?)
    }
}

/// Bytes of one Q5_0 block: f16 scale, 32 high bits, 16 bytes of low nibbles.
const Q5_0_BLOCK: usize = 22;
/// Bytes of one Q8_0 block: f16 scale, 32 signed bytes.
const Q8_0_BLOCK: usize = 34;

/// Re-encodes a Q5_0 tensor as Q8_0 without loss: both store `scale × q` per 32 values with the
/// same f16 scale, and Q5_0's `q` in -16..=15 fits an i8. Measured on the default preset this
/// took load from 3.8 s (dequantize, then quantize again with new rounding) to 1.5 s
/// (BENCHMARKS.md, "Load time"). `t`'s data must be whole blocks ([`whole_q5_0_blocks`]).
fn q5_0_to_q8_0(t: &QTensor, device: &Device) -> Result<QTensor> {
    let src = t.data()?;
    let mut dst = Vec::with_capacity(src.len() / Q5_0_BLOCK * Q8_0_BLOCK);
    for block in src.chunks_exact(Q5_0_BLOCK) {
        let (scale, rest) = block.split_at(2);
        let (qh, qs) = rest.split_at(4);
        let qh = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
        dst.extend_from_slice(scale);
        let mut q = [0u8; 32];
        for j in 0..16 {
            let hi0 = (((qh >> j) << 4) & 0x10) as u8;
            let hi1 = ((qh >> (j + 12)) & 0x10) as u8;
            q[j] = (((qs[j] & 0x0F) | hi0) as i8 - 16) as u8;
            q[j + 16] = (((qs[j] >> 4) | hi1) as i8 - 16) as u8;
        }
        dst.extend_from_slice(&q);
    }
    let storage = QStorage::from_data(std::borrow::Cow::Owned(dst), device, GgmlDType::Q8_0)?;
    Ok(QTensor::new(storage, t.shape().clone())?)
}

/// Checks that a Q5_0 tensor's data is whole blocks; the reason when it is not.
fn whole_q5_0_blocks(t: &QTensor) -> std::result::Result<(), String> {
    let bytes = t.storage_size_in_bytes();
    if !bytes.is_multiple_of(Q5_0_BLOCK) {
        return Err(format!("Q5_0 data of {bytes} bytes is not whole blocks"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Tensor;

    #[test]
    fn q5_0_to_q8_0_is_lossless() {
        let values: Vec<f32> = (0..4 * 64)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let t = Tensor::from_vec(values, (4, 64), &Device::Cpu).unwrap();
        let q5 = QTensor::quantize(&t, GgmlDType::Q5_0).unwrap();
        let q8 = q5_0_to_q8_0(&q5, &Device::Cpu).unwrap();
        assert_eq!(q8.dtype(), GgmlDType::Q8_0);
        assert_eq!(q8.shape(), q5.shape());
        let values = |q: &QTensor| -> Vec<f32> {
            let t = q.dequantize(&Device::Cpu).unwrap();
            t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
        };
        let (a, b) = (values(&q5), values(&q8));
        assert_eq!(a, b);
    }
}
