//! cairn runs an AI agent entirely offline: a quantized LLM inside the process, every step
//! decoded under a JSON-schema constraint, local tools, and memory in SQLite.
//!
//! The crate is laid out by job:
//!
//! - [`agent`]: the loop (think → act → observe under the live step schema), prompt building
//!   within the token budget, retries, circuit breaker, dead-loop detection, stop reasons,
//!   memory wiring, and trace events.
//! - [`call`]: function-calling mode (`cairn call`): OpenAI-style function definitions in,
//!   schema-valid calls out.
//! - [`cli`]: clap argument structs that mirror the flags, one file per subcommand under
//!   `cli/commands/`, the step that turns flags into a validated [`config::Config`], and the
//!   [`cli::Printer`] that everything shown on stdout and stderr goes through: nothing below
//!   the CLI prints (the layers below report events, progress and warnings to it).
//! - [`config`]: every setting with its default, its `CAIRN_*` variable and its doc, in one
//!   registry.
//! - [`constrain`]: constrained decoding with llguidance: the token trie built from the
//!   model's tokenizer, a [`constrain::Constraint`] from a JSON Schema or a Lark grammar.
//! - [`decode`]: the layer above the model and the constraint: a [`decode::Decoder`] (one
//!   session, the constraint compiler and a cache of compiled constraints) that the agent,
//!   function calling, the naive baseline and `generate` use; the decode loop; `bench`.
//! - [`model`]: GGUF loading, the tokenizer and chat template read from the GGUF, the
//!   architectures (`llama`, `qwen2`), the KV cache with prefix reuse ([`model::Session`]),
//!   engines (cairn's CPU kernels, candle for devices), sampling, and finding/fetching model
//!   files.
//! - [`memory`]: the SQLite memory file: sessions, turns, steps, long-term facts ranked by
//!   FTS5 BM25 times a time decay ([`memory::MemoryStore`]).
//! - [`tools`]: the `Tool` trait and the [`tools::ToolRegistry`] (argument validation against
//!   JSON Schema, timeouts, output truncation, control characters escaped); the built-in
//!   `sql`, `calculator`, `search` and `recall` tools and tools declared in a TOML manifest.
//! - [`eval`]: batch runs (resumable, sharded, several jobs), the naive baseline loop,
//!   answer scoring and the metrics report.
//! - [`index`]: the FTS5 index of the user's documents that `cairn index` builds and `search`
//!   reads (chunks with line ranges, incremental updates, BM25).
//!
//! The binary (`src/main.rs`) only parses the command line and dispatches to
//! [`cli::commands`].

pub mod agent;
pub mod call;
pub mod cli;
pub mod config;
pub mod constrain;
pub mod decode;
pub mod eval;
pub mod index;
pub mod memory;
pub mod model;
pub mod tools;
