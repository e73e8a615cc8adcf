//! cairn runs an AI agent entirely offline: a quantized LLM inside the process, every step
//! decoded under a JSON-schema constraint, local tools, and memory in SQLite.
//!
//! The crate is laid out by job (see `design.md` in the project's shared notes):
//!
//! - [`cli`]: clap argument structs that mirror the flags, one file per subcommand under
//!   `cli/commands/`, and the step that turns flags into a validated [`config::Config`].
//! - [`config`]: every setting with its default, its `CAIRN_*` variable and its doc, in one
//!   registry.
//! - [`model`]: GGUF loading, the tokenizer and chat template read from the GGUF, the
//!   architectures (`llama`, `qwen2`), the KV cache with prefix reuse ([`model::Session`]),
//!   sampling, generation, the `bench` measurements, and finding/fetching model files.
//!
//! The binary (`src/main.rs`) only parses the command line and dispatches to
//! [`cli::commands`].

pub mod cli;
pub mod config;
pub mod model;
