//! Reading a GGUF file's tensors for the CPU engine: weight matrices in their stored format,
//! in place in the mapped file, when a kernel exists for it ([`Stored`]), else re-quantized
//! to Q8_0; norms and biases as `f32`.

use candle_core::quantized::GgmlDType;
use candle_core::Device;

use super::kernels;
use super::matmul::{QMatrix, Stored};
use crate::model::error::{ModelError, Result};
use crate::model::gguf::GgufFile;
use crate::model::weights::{LoadStats, TensorLoader};

/// A [`TensorLoader`] for the CPU engine.
pub(super) struct HostLoader<'a> {
    pub gguf: &'a mut GgufFile,
    pub stats: LoadStats,
}

impl TensorLoader for HostLoader<'_> {
    type Embedding = QMatrix;
    type Matrix = QMatrix;
    type Vector = Vec<f32>;

    fn has_tensor(&self, name: &str) -> bool {
        self.gguf.has_tensor(name)
    }

    fn embedding(&mut self, name: &str, dims: [usize; 2]) -> Result<QMatrix> {
        self.matrix(name, dims)
    }

    /// A weight matrix in its stored format when a kernel exists for it, used in place from
    /// the mapped file; any other type is re-quantized to Q8_0 (counted and named in the
    /// stats).
    fn matrix(&mut self, name: &str, dims: [usize; 2]) -> Result<QMatrix> {
        let dtype = self.gguf.tensor_dtype(name)?;
        let [rows, cols] = dims;
        let stored = match dtype {
            GgmlDType::Q4_1 => Some(Stored::Q4_1),
            GgmlDType::Q5_0 => Some(Stored::Q5_0),
            GgmlDType::Q8_0 => Some(Stored::Q8_0),
            GgmlDType::Q4K => Some(Stored::Q4K),
            GgmlDType::Q6K => Some(Stored::Q6K),
            _ => None,
        };
        let path = self.gguf.path.clone();
        let bad = |reason: String| ModelError::BadTensor {
            path: path.clone(),
            name: name.to_string(),
            reason,
        };
        let m = match stored {
            Some(stored) => {
                let (map, offset, len) = self.gguf.mapped(name, Some(&dims))?;
                QMatrix::mapped(stored, rows, cols, map, offset, len).map_err(bad)?
            }
            None => {
                if cols % kernels::QK != 0 {
                    return Err(bad(format!(
                        "{dtype:?} with {cols} columns has no native kernel and cannot be \
                         re-quantized to Q8_0 (not a multiple of 32); use --engine candle"
                    )));
                }
                let t = self.gguf.tensor(name, Some(&dims), &Device::Cpu)?;
                self.stats
                    .note_requantized(crate::model::gguf::dtype_name(dtype));
                let values = t
                    .dequantize(&Device::Cpu)?
                    .flatten_all()?
                    .to_vec1::<f32>()?;
                let mut bytes = Vec::with_capacity(values.len() / kernels::QK * 34);
                kernels::quantize_q8_0(&values, &mut bytes);
                QMatrix::from_bytes(Stored::Q8_0, rows, cols, &bytes).map_err(bad)?
            }
        };
        self.stats.weight_bytes += m.bytes();
        if m.is_mapped() {
            self.stats.mapped_bytes += m.bytes();
        }
        Ok(m)
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>> {
        let t = self.gguf.tensor(name, Some(&[len]), &Device::Cpu)?;
        Ok(t.dequantize(&Device::Cpu)?.to_vec1::<f32>()?)
    }
}
