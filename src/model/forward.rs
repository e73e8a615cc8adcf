//! [`Forward`]: one forward pass of the decoder, implemented once per device — cairn's own
//! CPU engine ([`super::cpu`]) and the candle engine for any candle device
//! ([`super::candle`]). Each engine owns its per-session [`State`]: the KV cache, the working
//! buffers and the logits of the last token, which come out as a slice of that buffer.

use super::error::Result;
use super::kv_cache::KvPositions;

/// A forward pass over loaded weights, shared by every session of the model.
pub trait Forward: Send + Sync {
    /// One session's state.
    type State: State;

    /// An empty state (nothing is allocated until the first forward pass).
    fn new_state(&self) -> Self::State;

    /// Runs `tokens` (at least one, all inside the vocabulary) at positions
    /// `state.kv().len()..`, appends their keys and values to the state's cache and leaves
    /// the logits of the last token in [`State::logits`].
    fn forward(&self, tokens: &[u32], state: &mut Self::State) -> Result<()>;
}

/// The per-session state of an engine.
pub trait State: Send {
    /// A copy of the live part of the state, restorable with [`State::restore`].
    type Snapshot: Clone + std::fmt::Debug + Send + Sync;

    /// The cache's positions: held, allocated, at most.
    fn kv(&self) -> &KvPositions;

    /// Cuts the cache back to its first `len` positions (no copy).
    fn truncate(&mut self, len: usize);

    /// The logits after the last forward pass, `vocab` values (empty before the first).
    fn logits(&self) -> &[f32];

    /// Copies the cache's live prefix and the logits.
    fn snapshot(&self) -> Result<Self::Snapshot>;

    /// Puts a snapshot back, replacing what the state holds.
    fn restore(&mut self, snap: &Self::Snapshot) -> Result<()>;
}
