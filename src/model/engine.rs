//! [`Model`]: one GGUF file's weights on the engine picked by [`LoadOptions::engine`], and
//! [`EngineState`], a session's state on that engine. The two [`Forward`] implementations
//! ([`super::cpu::CpuEngine`], [`super::candle::CandleEngine`]) are dispatched here, so that
//! neither knows the other and sessions are one type whichever engine runs.

use candle_core::Device;

use super::arch;
use super::candle::{CandleEngine, CandleOptions, CandleSnapshot, CandleState};
use super::cpu::{CpuEngine, CpuSnapshot, CpuState};
use super::error::{ModelError, Result};
use super::forward::{Forward, State};
use super::gguf::GgufFile;
use super::hparams::HParams;
use super::kv_cache::KvPositions;
use super::weights::LoadStats;
/// Which implementation of the forward pass runs the model (`--engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// cairn's own CPU engine (`crate::model::cpu`).
    #[default]
    Native,
    /// The candle engine (`crate::model::candle`), on candle's tensors and quantized kernels.
    Candle,
}

impl Engine {
    /// `native` or `candle`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Native => "native",
            Engine::Candle => "candle",
        }
    }
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "native" => Ok(Engine::Native),
            "candle" => Ok(Engine::Candle),
            _ => Err(format!(
                "unknown engine `{s}`: expected `native` or `candle`"
            )),
        }
    }
}

/// Options for loading weights.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Candle engine only: re-quantize Q4_1/Q5_0/Q5_1 tensors to Q8_0 (candle has no SIMD
    /// kernels for them; `--keep-quant` turns this off). The CPU engine runs Q4_1, Q5_0,
    /// Q8_0, Q4_K and Q6_K as stored.
    pub requantize: bool,
    /// Where tensors live; any device but the CPU runs on the candle engine.
    pub device: Device,
    /// Which forward pass to use.
    pub engine: Engine,
    /// Candle engine only: threads of candle's CPU kernels and rayon's pool (`--threads`);
    /// 0 leaves candle's default. The CPU engine's pool is sized by `cpu::pool::set_threads`.
    pub threads: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            requantize: true,
            device: Device::Cpu,
            engine: Engine::Native,
            threads: 0,
        }
    }
}

/// Counts of what loading did, for `-v` and `cairn model info`.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// What the engine's loader counted: tensors converted and their types, bytes held,
    /// mapped in place, and read per decoded token.
    pub stats: LoadStats,
    /// The forward pass in use.
    pub engine: Engine,
    /// The CPU engine's kernels (`avx512vnni`, `avx2` or `scalar`); empty for candle.
    pub kernels: &'static str,
    /// Where the weights live: `cpu`, `cuda:0`, `metal:0`.
    pub device: String,
}

/// The engine a model runs on.
enum Engines {
    Cpu(CpuEngine),
    Candle(CandleEngine),
}

/// The loaded weights of one model and its forward pass.
pub struct Model {
    /// Hyper-parameters.
    pub config: HParams,
    /// What loading did.
    pub report: LoadReport,
    engine: Engines,
}

/// Loads a model of any supported architecture from an open GGUF file.
pub fn load(gguf: &mut GgufFile, opts: &LoadOptions) -> Result<Model> {
    let hp = arch::read_hparams(gguf)?;
    let config = hp.clone();
    let (engine, stats, kind, kernels) = if opts.engine == Engine::Native && opts.device.is_cpu() {
        let (e, stats) = CpuEngine::load(gguf, hp)?;
        (Engines::Cpu(e), stats, Engine::Native, CpuEngine::kernels())
    } else {
        let candle = CandleOptions {
            device: opts.device.clone(),
            requantize: opts.requantize,
            threads: opts.threads,
        };
        let (e, stats) = CandleEngine::load(gguf, hp, &candle)?;
        (Engines::Candle(e), stats, Engine::Candle, "")
    };
    Ok(Model {
        config,
        report: LoadReport {
            stats,
            engine: kind,
            kernels,
            device: device_name(&opts.device),
        },
        engine,
    })
}

/// `cpu`, `cuda:N` or `metal:N`, as `--device` names it.
pub fn device_name(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

impl Model {
    /// The device the weights and KV caches live on.
    pub fn device(&self) -> Device {
        match &self.engine {
            Engines::Cpu(_) => Device::Cpu,
            Engines::Candle(e) => e.device().clone(),
        }
    }

    /// The forward pass in use.
    pub fn engine(&self) -> Engine {
        self.report.engine
    }

    /// An empty state for a session on this model, of its engine's kind.
    pub fn new_state(&self) -> EngineState {
        match &self.engine {
            Engines::Cpu(e) => EngineState::Cpu(e.new_state()),
            Engines::Candle(e) => EngineState::Candle(e.new_state()),
        }
    }

    /// Runs `tokens` at positions `state.kv().len()..`, appends their keys and values to the
    /// state's cache and leaves the logits of the last token in [`EngineState::logits`].
    pub fn forward(&self, tokens: &[u32], state: &mut EngineState) -> Result<()> {
        if tokens.is_empty() {
            return Err(ModelError::NoTokens { what: "forward" });
        }
        let vocab = self.config.vocab;
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::BadToken { id, vocab });
        }
        match (&self.engine, state) {
            (Engines::Cpu(e), EngineState::Cpu(s)) => e.forward(tokens, s),
            (Engines::Candle(e), EngineState::Candle(s)) => e.forward(tokens, s),
            (_, s) => Err(ModelError::EngineMismatch {
                what: "session state",
                found: s.engine().name(),
                expected: self.engine().name(),
            }),
        }
    }
}

/// A session's state on the engine of its model: KV cache, working buffers, logits.
// One per session, so the size of the CPU engine's inline buffers does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum EngineState {
    /// On the CPU engine.
    Cpu(CpuState),
    /// On the candle engine.
    Candle(CandleState),
}

/// A copy of an [`EngineState`], restorable into a state of the same engine.
#[derive(Debug, Clone)]
pub enum EngineSnapshot {
    /// Of a CPU engine state.
    Cpu(CpuSnapshot),
    /// Of a candle engine state.
    Candle(CandleSnapshot),
}

impl EngineState {
    /// The engine this state belongs to.
    pub fn engine(&self) -> Engine {
        match self {
            EngineState::Cpu(_) => Engine::Native,
            EngineState::Candle(_) => Engine::Candle,
        }
    }

    /// The cache's positions: held, allocated, at most.
    pub fn kv(&self) -> &KvPositions {
        match self {
            EngineState::Cpu(s) => s.kv(),
            EngineState::Candle(s) => s.kv(),
        }
    }

    /// How long the last forward pass's copy of the logits from a GPU to host memory took;
    /// `None` where the logits are computed in host memory (the CPU engine, candle on the CPU).
    pub fn logits_copy_time(&self) -> Option<std::time::Duration> {
        match self {
            EngineState::Candle(s) => s.logits_copy_time(),
            EngineState::Cpu(_) => None,
        }
    }

    /// Cuts the cache back to its first `len` positions (no copy).
    pub fn truncate(&mut self, len: usize) {
        match self {
            EngineState::Cpu(s) => s.truncate(len),
            EngineState::Candle(s) => s.truncate(len),
        }
    }

    /// The logits after the last forward pass (empty before the first).
    pub fn logits(&self) -> &[f32] {
        match self {
            EngineState::Cpu(s) => s.logits(),
            EngineState::Candle(s) => s.logits(),
        }
    }

    /// Copies the cache's live prefix and the logits.
    pub fn snapshot(&self) -> Result<EngineSnapshot> {
        Ok(match self {
            EngineState::Cpu(s) => EngineSnapshot::Cpu(s.snapshot()?),
            EngineState::Candle(s) => EngineSnapshot::Candle(s.snapshot()?),
        })
    }

    /// A copy of the positions `start..` of the state, to be written after a state that holds
    /// the first `start` ([`EngineState::restore_delta`]); the native engine only.
    pub fn snapshot_from(&self, start: usize) -> Result<EngineSnapshot> {
        match self {
            EngineState::Cpu(s) => Ok(EngineSnapshot::Cpu(s.snapshot_from(start)?)),
            EngineState::Candle(_) => Err(ModelError::Snapshot(
                "the candle engine keeps no partial states".into(),
            )),
        }
    }

    /// Writes the delta `snap` ([`EngineState::snapshot_from`]) after the state, which must
    /// hold exactly the positions before it.
    pub fn restore_delta(&mut self, snap: &EngineSnapshot) -> Result<()> {
        match (self, snap) {
            (EngineState::Cpu(s), EngineSnapshot::Cpu(snap)) => s.restore_delta(snap),
            _ => Err(ModelError::Snapshot(
                "the candle engine keeps no partial states".into(),
            )),
        }
    }

    /// Puts a snapshot of the same engine back, replacing what the state holds.
    pub fn restore(&mut self, snap: &EngineSnapshot) -> Result<()> {
        match (self, snap) {
            (EngineState::Cpu(s), EngineSnapshot::Cpu(snap)) => s.restore(snap),
            (EngineState::Candle(s), EngineSnapshot::Candle(snap)) => s.restore(snap),
            (s, snap) => Err(ModelError::EngineMismatch {
                what: "snapshot",
                found: match snap {
                    EngineSnapshot::Cpu(_) => Engine::Native.name(),
                    EngineSnapshot::Candle(_) => Engine::Candle.name(),
                },
                expected: s.engine().name(),
            }),
        }
    }
}
