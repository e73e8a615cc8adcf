//! The architectures cairn implements, one file each: what differs between them.
//!
//! An [`Arch`] names its GGUF metadata key prefix, fixes the decoder [`Variant`] (RoPE
//! pairing, Q/K/V biases, the default RoPE base) and may read more from the file
//! ([`Arch::extra`], e.g. Llama 3.1's RoPE frequency factors). The hyper-parameters they share
//! are read in [`super::hparams`]; the tensors, with one name table for both engines, in
//! [`super::weights`]. The forward passes ([`super::cpu`], [`super::candle`]) are written once
//! for every architecture.

pub mod llama;
pub mod qwen2;

use super::error::{ModelError, Result};
use super::gguf::GgufFile;
use super::hparams::{self, HParams, Variant};

/// The architectures cairn implements, by `general.architecture`.
pub const SUPPORTED: &[&str] = &["llama", "qwen2"];

/// One architecture: its key prefix and what it fixes rather than reads.
#[derive(Debug, Clone, Copy)]
pub struct Arch {
    /// `general.architecture`, also the prefix of its metadata keys.
    pub name: &'static str,
    /// RoPE pairing, biases and default RoPE base.
    pub variant: Variant,
    /// Reads what only this architecture has into the hyper-parameters.
    pub extra: fn(&mut GgufFile, &mut HParams) -> Result<()>,
}

/// Every architecture, in the order of [`SUPPORTED`].
const ALL: &[&Arch] = &[&llama::ARCH, &qwen2::ARCH];

/// The architecture of an open GGUF file.
pub fn of(gguf: &GgufFile) -> Result<&'static Arch> {
    let arch = gguf.architecture()?;
    match ALL.iter().find(|a| a.name == arch) {
        Some(a) => Ok(a),
        None => Err(ModelError::UnsupportedArch {
            path: gguf.path.clone(),
            arch,
            supported: SUPPORTED.join(", "),
        }),
    }
}

/// Reads the hyper-parameters of a model of any supported architecture.
pub fn read_hparams(gguf: &mut GgufFile) -> Result<HParams> {
    let arch = of(gguf)?;
    let mut hp = hparams::read(gguf, arch.name, arch.variant)?;
    (arch.extra)(gguf, &mut hp)?;
    Ok(hp)
}

/// [`Arch::extra`] of an architecture that reads nothing more.
pub fn nothing_extra(_: &mut GgufFile, _: &mut HParams) -> Result<()> {
    Ok(())
}
