//! `qwen2`: Qwen2 and Qwen2.5 (the default preset is Qwen2.5-Coder-0.5B-Instruct).
//!
//! Biases on the Q/K/V projections; RoPE on the first and second half of each head
//! (GPT-NeoX style) with a base of 1 000 000 unless the file says otherwise; tied embeddings
//! in the small sizes.

use super::{nothing_extra, Arch};
use crate::model::hparams::{RopeStyle, Variant};

/// The `qwen2` architecture.
pub const ARCH: Arch = Arch {
    name: "qwen2",
    variant: Variant {
        rope_style: RopeStyle::Halves,
        qkv_bias: true,
        default_rope_theta: 1_000_000.0,
    },
    extra: nothing_extra,
};
