//! The tensors of the standard GGUF decoder layout, by name: the one table both engines load
//! from. [`Weights`] and [`Block`] are generic over how an engine holds a tensor; an engine
//! supplies a [`TensorLoader`] that reads one tensor its way, and [`load`] walks the table.

use super::error::Result;
use super::hparams::HParams;

/// One decoder block's weights.
pub struct Block<M, V> {
    /// `blk.N.attn_norm.weight`.
    pub attn_norm: V,
    /// `blk.N.attn_q.weight`, `heads · head_dim × embedding`.
    pub q: M,
    /// `blk.N.attn_k.weight`, `kv_heads · head_dim × embedding`.
    pub k: M,
    /// `blk.N.attn_v.weight`, `kv_heads · head_dim × embedding`.
    pub v: M,
    /// `blk.N.attn_output.weight`, `embedding × heads · head_dim`.
    pub o: M,
    /// `blk.N.attn_{q,k,v}.bias`, when the architecture has them.
    pub biases: Option<(V, V, V)>,
    /// `blk.N.ffn_norm.weight`.
    pub ffn_norm: V,
    /// `blk.N.ffn_gate.weight`, `feed_forward × embedding`.
    pub gate: M,
    /// `blk.N.ffn_up.weight`, `feed_forward × embedding`.
    pub up: M,
    /// `blk.N.ffn_down.weight`, `embedding × feed_forward`.
    pub down: M,
}

/// Every weight of a model: embedding table `E`, matrices `M`, vectors `V`.
pub struct Weights<E, M, V> {
    /// `token_embd.weight`, `vocab × embedding`.
    pub embedding: E,
    /// `output.weight`, `vocab × embedding`; `None` when tied to the embedding table.
    pub output: Option<M>,
    /// `output_norm.weight`.
    pub norm: V,
    /// The decoder blocks.
    pub blocks: Vec<Block<M, V>>,
}

/// How an engine reads one tensor of a GGUF file (checking its shape).
pub trait TensorLoader {
    /// The embedding table.
    type Embedding;
    /// A weight matrix.
    type Matrix;
    /// A norm weight or a bias.
    type Vector;
    /// Whether the file has a tensor of that name.
    fn has_tensor(&self, name: &str) -> bool;
    /// Reads the embedding table, `[rows, cols]`.
    fn embedding(&mut self, name: &str, dims: [usize; 2]) -> Result<Self::Embedding>;
    /// Reads a weight matrix, `[rows, cols]`.
    fn matrix(&mut self, name: &str, dims: [usize; 2]) -> Result<Self::Matrix>;
    /// Reads a vector of `len` values.
    fn vector(&mut self, name: &str, len: usize) -> Result<Self::Vector>;
}

/// The weights as a [`TensorLoader`] holds them.
pub type Loaded<L> = Weights<
    <L as TensorLoader>::Embedding,
    <L as TensorLoader>::Matrix,
    <L as TensorLoader>::Vector,
>;

/// Reads every tensor of the layout through `l`, in the order of the table.
pub fn load<L: TensorLoader>(hp: &HParams, l: &mut L) -> Result<Loaded<L>> {
    let (e, hd, ff) = (hp.embedding, hp.head_dim, hp.feed_forward);
    let (qw, kvw) = (hp.heads * hd, hp.kv_heads * hd);
    let embedding = l.embedding("token_embd.weight", [hp.vocab, e])?;
    let output = if l.has_tensor("output.weight") {
        Some(l.matrix("output.weight", [hp.vocab, e])?)
    } else {
        None
    };
    let norm = l.vector("output_norm.weight", e)?;
    let mut blocks = Vec::with_capacity(hp.layers);
    for i in 0..hp.layers {
        let name = |t: &str| format!("blk.{i}.{t}");
        let biases = if hp.qkv_bias {
            Some((
                l.vector(&name("attn_q.bias"), qw)?,
                l.vector(&name("attn_k.bias"), kvw)?,
                l.vector(&name("attn_v.bias"), kvw)?,
            ))
        } else {
            None
        };
        blocks.push(Block {
            attn_norm: l.vector(&name("attn_norm.weight"), e)?,
            q: l.matrix(&name("attn_q.weight"), [qw, e])?,
            k: l.matrix(&name("attn_k.weight"), [kvw, e])?,
            v: l.matrix(&name("attn_v.weight"), [kvw, e])?,
            o: l.matrix(&name("attn_output.weight"), [e, qw])?,
            biases,
            ffn_norm: l.vector(&name("ffn_norm.weight"), e)?,
            gate: l.matrix(&name("ffn_gate.weight"), [ff, e])?,
            up: l.matrix(&name("ffn_up.weight"), [ff, e])?,
            down: l.matrix(&name("ffn_down.weight"), [e, ff])?,
        });
    }
    Ok(Weights {
        embedding,
        output,
        norm,
        blocks,
    })
}

/// What loading did, counted by an engine's loader.
#[derive(Debug, Clone, Default)]
pub struct LoadStats {
    /// Tensors re-quantized at load (no kernel computes on their stored type).
    pub requantized: usize,
    /// The stored types that were re-quantized, each with its count, in order of first use.
    pub requantized_types: Vec<(&'static str, usize)>,
    /// Bytes of quantized weights held.
    pub weight_bytes: usize,
    /// Of those, the bytes used in place from the mapped file (not copied).
    pub mapped_bytes: usize,
    /// Bytes of weights read per decoded token (every matrix, one embedding row aside); 0
    /// when the engine does not count them.
    pub decode_bytes: usize,
}

impl LoadStats {
    /// The converted types as `Q5_1 ×24`, in order of first use.
    pub fn requantized_names(&self) -> Vec<String> {
        self.requantized_types
            .iter()
            .map(|(t, n)| format!("{t} ×{n}"))
            .collect()
    }

    /// Counts one tensor of stored type `dtype` re-quantized at load.
    pub fn note_requantized(&mut self, dtype: &'static str) {
        self.requantized += 1;
        match self.requantized_types.iter_mut().find(|(t, _)| *t == dtype) {
            Some((_, n)) => *n += 1,
            None => self.requantized_types.push((dtype, 1)),
        }
    }
}
