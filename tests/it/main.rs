//! cairn's integration tests: one binary, one module per area. Helpers shared by the modules
//! (tiny GGUF writers, the preset fetch-once lock, CLI runners) live in `common`.

mod agent;
mod agent_e2e;
mod bad_input;
mod batch;
mod bench;
mod calculator;
mod call;
mod cli;
mod common;
mod constrain;
mod containment;
mod crash;
mod fetch;
#[cfg(feature = "cuda")]
mod gpu;
mod index;
mod load;
mod mcp;
mod memory;
mod model;
mod presets;
mod prompt_cache;
mod sql_limits;
mod template;
mod tokenizer;
mod tools;
