//! The composition root of the agent commands: what `run`, `chat`, `batch` and `eval` share to
//! turn settings and flags into agents: the checks that can fail before the (slow) model load
//! (the database, every output path), `--docs` indexed, the tools, memory, the model loaded
//! once and shared by the jobs, and the round printer and trace attached.

use std::path::{Path, PathBuf};

use anyhow::Context;
use sha2::Digest;

use super::run::AgentArgs;
use crate::agent::{Agent, ModelPolicy, TraceWriter};
use crate::cli::outputs::{check_output, inputs_of, OutputKind};
use crate::cli::printer::Printer;
use crate::cli::report::{RoundPrinter, TraceSink};
use crate::config::{Config, Verbosity};
use crate::constrain::ConstraintCompiler;
use crate::decode::prompt_cache::PromptCache;
use crate::index::Index;
use crate::memory::MemoryStore;
use crate::tools::{RegistryOptions, ToolRegistry};

/// The index file for `--docs` when no `--index` (or `CAIRN_INDEX`) was given: one per set
/// of folders, under `HOME/indexes/`, so demo folders never mix with the user's own index.
fn docs_index_path(config: &Config, docs: &[PathBuf]) -> anyhow::Result<PathBuf> {
    let mut canon = Vec::new();
    for d in docs {
        let c = d.canonicalize().with_context(|| {
            format!(
                "--docs {}: the folder does not exist or cannot be read",
                d.display()
            )
        })?;
        canon.push(c.to_string_lossy().into_owned());
    }
    canon.sort();
    canon.dedup();
    let digest = sha2::Sha256::digest(canon.join("\n").as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    Ok(config.home.join("indexes").join(format!("{hex}.sqlite")))
}

/// Indexes `--docs` and points the config's index at the result.
fn index_docs(config: &mut Config, printer: &Printer, docs: &[PathBuf]) -> anyhow::Result<()> {
    if docs.is_empty() {
        return Ok(());
    }
    let named = config.index_named;
    if !named {
        config.index = docs_index_path(config, docs)?;
        if let Some(dir) = config.index.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the folder {}", dir.display()))?;
        }
    }
    check_output(
        "--index",
        &config.index,
        OutputKind::Index,
        &inputs_of(config, &[]),
        named,
    )?;
    let mut index = Index::open_or_create(&config.index)
        .with_context(|| format!("cannot open the index {}", config.index.display()))?;
    let report = index.update(docs)?;
    printer.detail(&format!(
        "index {}: {} files, {} chunks ({} added, {} changed, {} unchanged)",
        config.index.display(),
        report.files,
        report.chunks,
        report.added,
        report.changed,
        report.unchanged
    ));
    Ok(())
}

/// Checks what the agent needs before the (slow) model load, builds the tools, opens memory,
/// loads the model, and returns the agent with its round printer and trace attached.
pub fn build_agent(
    config: &Config,
    printer: &Printer,
    args: &AgentArgs,
) -> anyhow::Result<Agent<ModelPolicy>> {
    let memory = (!args.no_memory).then(|| config.memory.clone());
    let mut agents = build_agents(config, printer, args, 1, memory.as_deref(), true)?;
    agents
        .pop()
        .ok_or_else(|| anyhow::anyhow!("no agent was built"))
}

/// Like [`build_agent`], `jobs` agents sharing one loaded model and one token trie, each
/// with its own KV cache, memory connection (`memory`: the memory file, or none) and tools
/// (so each job has its own MCP servers). Rounds
/// are printed through `printer` when `rounds_on_stderr` (or at -v).
pub fn build_agents(
    config: &Config,
    printer: &Printer,
    args: &AgentArgs,
    jobs: usize,
    memory: Option<&Path>,
    rounds_on_stderr: bool,
) -> anyhow::Result<Vec<Agent<ModelPolicy>>> {
    let options = args.options(config)?;
    if jobs > 1 {
        // Each job runs its own forward passes: split the threads between them instead of
        // having every job's steps contend for one pool (measured on the smollm2 preset, 40
        // tasks: two jobs sharing a 2-thread pool took 33.4 s, longer than one job's 28.5 s).
        crate::model::cpu::pool::set_threads((config.threads / jobs).max(1));
    }
    let mut config = config.clone();
    if let Some(db) = &config.db {
        if !db.is_file() {
            anyhow::bail!(
                "the database {} does not exist; pass an existing SQLite file with --db FILE",
                db.display()
            );
        }
    }
    if memory == Some(config.memory.as_path()) {
        check_output(
            "--memory",
            &config.memory,
            OutputKind::Memory,
            &inputs_of(&config, &[]),
            config.memory_named,
        )?;
    }
    index_docs(&mut config, printer, &args.docs)?;
    let tools = ToolRegistry::from_sources(&config.tool_sources(), RegistryOptions::default())?;
    if config.db.is_some() {
        if let Some((_, why)) = tools.unavailable().find(|(n, _)| *n == "sql") {
            anyhow::bail!("--db: {why}");
        }
    }
    let opts = args.sampling.options()?;
    if let Some(p) = &args.trace {
        // Fail before the model load when the trace cannot be written.
        check_output(
            "--trace",
            p,
            OutputKind::Trace,
            &inputs_of(&config, &[]),
            true,
        )?;
        TraceWriter::create(p)
            .with_context(|| format!("cannot open the trace file {}", p.display()))?;
    }
    let lm = super::load_model(&config, printer, args.sampling.tokenizer.as_deref())?;
    // One token trie for every job.
    let compiler = ConstraintCompiler::new(&lm.tokenizer, lm.model.config.vocab)?;
    let cache = if config.prompt_cache {
        PromptCache::new(config.prompts_dir(), &lm, config.threads).unwrap_or_else(|e| {
            printer.warn(&e);
            None
        })
    } else {
        None
    };
    let policies: Vec<ModelPolicy> = (0..jobs.max(1))
        .map(|_| {
            let mut p = ModelPolicy::with_compiler(lm.clone(), compiler.clone(), opts.sampling);
            if let Some(c) = &cache {
                p.set_prompt_cache(c.clone());
            }
            p
        })
        .collect();
    let mut agents = Vec::new();
    for policy in policies {
        let store = match memory {
            Some(m) => Some(MemoryStore::open(m)?),
            None => None,
        };
        // The first job takes the registry built above; each other job starts its own (its
        // own database connection and MCP servers).
        let tools = match agents.is_empty() {
            true => tools.clone(),
            false => {
                ToolRegistry::from_sources(&config.tool_sources(), RegistryOptions::default())?
            }
        };
        let mut agent = Agent::new(policy, tools, store, options.clone())?;
        if (rounds_on_stderr && printer.shows(Verbosity::Normal)) || printer.verbose() {
            agent.add_sink(Box::new(RoundPrinter::new(printer.clone())));
        }
        if let Some(p) = &args.trace {
            let t = TraceWriter::create(p)
                .with_context(|| format!("cannot open the trace file {}", p.display()))?;
            agent.add_sink(Box::new(TraceSink::new(t, printer.clone())));
        }
        agents.push(agent);
    }
    Ok(agents)
}
