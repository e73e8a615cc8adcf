//! Settings: every key cairn reads from flags or environment variables, declared once in
//! [`SETTINGS`] with its default and doc, and the validated [`Config`] that commands receive.
//!
//! Flags win over variables, variables over defaults. Commands never read flags or the
//! environment themselves: `cli` builds a `Config` once and hands it down. [`env_nonempty`] is
//! the one reader of the environment, and it reads only variables listed in [`SETTINGS`]
//! (a test checks every variable named in the sources, `--help` and the README against it).

use std::path::PathBuf;

/// One setting: its flag, its environment variable, its default and what it does.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The command-line flag; empty for a setting that is only an environment variable.
    pub flag: &'static str,
    /// The environment variable read when the flag is absent.
    pub env: &'static str,
    /// The default, in words, when neither is given.
    pub default: &'static str,
    /// What the setting does.
    pub doc: &'static str,
}

/// Every setting cairn reads. The README's table of settings is checked against this list.
pub const SETTINGS: &[Setting] = &[
    Setting {
        flag: "--model",
        env: "CAIRN_MODEL",
        default: "qwen2.5-coder-1.5b",
        doc: "A GGUF path, a preset name, or hf:REPO/FILE.",
    },
    Setting {
        flag: "--home",
        env: "CAIRN_HOME",
        default: "the user's cache folder + /cairn",
        doc: "Where cairn keeps fetched models (under models/).",
    },
    Setting {
        flag: "--offline",
        env: "CAIRN_OFFLINE",
        default: "off (HF_HUB_OFFLINE=1 also turns it on)",
        doc: "Never fetch anything; a missing model is an error that says where to put it.",
    },
    Setting {
        flag: "--threads",
        env: "CAIRN_THREADS",
        default: "the number of cores",
        doc: "Threads used by the model's matrix multiplications; at most four per core (and 1024).",
    },
    Setting {
        flag: "--huge-pages",
        env: "CAIRN_HUGE_PAGES",
        default: "off",
        doc: "Native engine on Linux: read the model's file into memory held in 2 MB pages instead of using the file's own 4 KB pages in place. Decodes faster where memory bandwidth bounds it (the 1.5B preset 8-25% faster on a 2-core AMD EPYC, the 0.5B 17%), at the cost of a slower load (about 1.5 s instead of 0.25 s for the 1.5B); an error if the memory or its 2 MB pages cannot be had, and with the candle engine.",
    },
    Setting {
        flag: "--keep-quant",
        env: "CAIRN_KEEP_QUANT",
        default: "off",
        doc: "With --engine candle: keep Q4_1/Q5_0/Q5_1 tensors as they are instead of re-quantizing them to Q8_0 at load (candle has no SIMD kernels for them). The native engine always keeps them.",
    },
    Setting {
        flag: "--engine",
        env: "CAIRN_ENGINE",
        default: "native",
        doc: "The forward pass: native (cairn's own CPU kernels, AMX / AVX-512 VNNI / AVX2 / portable, picked at run time) or candle (the candle engine, written for any candle device; on the CPU the reference the native one is tested against).",
    },
    Setting {
        flag: "--device",
        env: "CAIRN_DEVICE",
        default: "cpu",
        doc: "Where the model runs: cpu, cuda (or cuda:N for GPU number N) or metal. A GPU runs the candle engine and needs a build with the `cuda` (or `metal`) cargo feature; a build without it says so.",
    },
    Setting {
        flag: "--memory",
        env: "CAIRN_MEMORY",
        default: "the user's data folder + /cairn/memory.sqlite (HOME/memory.sqlite when --home or CAIRN_HOME is given)",
        doc: "The SQLite file that holds sessions, turns, steps and long-term facts.",
    },
    Setting {
        flag: "--memory-decay",
        env: "CAIRN_MEMORY_DECAY",
        default: "0.9",
        doc: "How much a long-term fact's score keeps per hour of age (score = BM25 × decay^hours); 1 = no decay.",
    },
    Setting {
        flag: "--no-prompt-cache",
        env: "CAIRN_NO_PROMPT_CACHE",
        default: "off (the cache is on)",
        doc: "Native engine: do not keep the computed state of the agent's system prompt and worked example in HOME/prompts/ (at most 32 files and 1 GB). With the cache, a run whose model, build, threads and tools were seen before reads that state instead of computing it again (about 10 s of prefill for the 1.5B preset on 2 cores).",
    },
    Setting {
        flag: "--free-sql",
        env: "CAIRN_FREE_SQL",
        default: "off",
        doc: "Decode the sql tool's queries without the pattern built from the database's own table and column names (by default a query can only name tables, columns and functions that exist).",
    },
    Setting {
        flag: "--db",
        env: "CAIRN_DB",
        default: "none (the sql tool is off)",
        doc: "The SQLite database the sql tool queries, opened read-only.",
    },
    Setting {
        flag: "--index",
        env: "CAIRN_INDEX",
        default: "the user's data folder + /cairn/index.sqlite (HOME/index.sqlite when --home or CAIRN_HOME is given)",
        doc: "The search index that `cairn index` builds and the search tool reads.",
    },
    Setting {
        flag: "--tools",
        env: "CAIRN_TOOLS",
        default: "none",
        doc: "A TOML manifest of user-declared tools (name, description, JSON Schema args, argv; per call `timeout_secs` 10 killing the whole process group, `max_memory_mb` 1024 per process, 64 KiB of output kept). Names of built-ins and `final_answer` are refused.",
    },
    Setting {
        flag: "--mcp",
        env: "CAIRN_MCP",
        default: "none",
        doc: "An MCP server to start over stdio, as `COMMAND ARGS...` (or `NAME=COMMAND ARGS...`); each of its tools becomes the tool NAME.TOOL. Repeat the flag for more servers (the variable holds one). Servers get only PATH, HOME and what a manifest's `[[mcp]]` entry names.",
    },
    Setting {
        flag: "",
        env: "CAIRN_ISA",
        default: "the best the CPU has",
        doc: "The native engine's kernels: scalar, avx2, avx512 or amx (never above what the CPU has), for comparisons.",
    },
    Setting {
        flag: "",
        env: "HF_HUB_OFFLINE",
        default: "off",
        doc: "1 turns --offline on, as for the Hugging Face tools.",
    },
    Setting {
        flag: "",
        env: "HF_HOME",
        default: "~/.cache/huggingface",
        doc: "The Hugging Face folder: presets are also looked for, and fetched into, its hub/ cache.",
    },
    Setting {
        flag: "",
        env: "HF_HUB_CACHE",
        default: "HF_HOME/hub",
        doc: "The Hugging Face hub cache itself, when it is elsewhere.",
    },
    Setting {
        flag: "",
        env: "HF_ENDPOINT",
        default: "the Hugging Face hub",
        doc: "Where presets are fetched from over HTTP (a mirror).",
    },
    Setting {
        flag: "",
        env: "HTTPS_PROXY",
        default: "none",
        doc: "A proxy for fetching (also HTTP_PROXY, ALL_PROXY, or lower case); with one set, cairn skips its quick check that the endpoint can be reached.",
    },
    Setting {
        flag: "",
        env: "HTTP_PROXY",
        default: "none",
        doc: "As HTTPS_PROXY.",
    },
    Setting {
        flag: "",
        env: "ALL_PROXY",
        default: "none",
        doc: "As HTTPS_PROXY.",
    },
];

/// How much cairn writes to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    /// Errors only.
    Quiet,
    /// Errors, warnings and progress.
    Normal,
    /// Everything, including load details and timings.
    Verbose,
}

/// The validated settings every command receives.
#[derive(Debug, Clone)]
pub struct Config {
    /// The model as given (path, preset or `hf:` spec); `None` means the default preset.
    pub model: Option<String>,
    /// cairn's home folder; fetched models live in `home/models`.
    pub home: PathBuf,
    /// Never fetch.
    pub offline: bool,
    /// Threads for the model's matmuls.
    pub threads: usize,
    /// A cap on the CPU kernels' instruction set (`CAIRN_ISA`); `None`: the best the CPU has.
    pub isa: Option<crate::model::cpu::kernels::Isa>,
    /// Native engine: hold the model file's bytes in memory backed by 2 MB pages
    /// (`--huge-pages`) instead of mapping the file.
    pub huge_pages: bool,
    /// Candle engine: re-quantize Q4_1/Q5_0/Q5_1 tensors to Q8_0 at load.
    pub requantize: bool,
    /// The forward pass to use.
    pub engine: crate::model::Engine,
    /// Where the model runs; any device but the CPU uses the candle engine.
    pub device: crate::model::DeviceSpec,
    /// How much goes to stderr.
    pub verbosity: Verbosity,
    /// The memory file (sessions, turns, steps, facts).
    pub memory: PathBuf,
    /// Per-hour decay of a fact's recall score, in (0, 1].
    pub memory_decay: f64,
    /// The database of the sql tool; `None` leaves the tool out.
    pub db: Option<PathBuf>,
    /// Decode sql queries without the pattern of the database's names.
    pub free_sql: bool,
    /// Keep the state after the agent's system prompt in [`Config::prompts_dir`].
    pub prompt_cache: bool,
    /// Whether the user named the memory file (`--memory`, `CAIRN_MEMORY`): its folder is
    /// then not created for them.
    pub memory_named: bool,
    /// The search index file.
    pub index: PathBuf,
    /// Whether the user named the index file (`--index`, `CAIRN_INDEX`).
    pub index_named: bool,
    /// The manifest of user-declared tools, if any.
    pub tools: Option<PathBuf>,
    /// MCP servers from `--mcp` / `CAIRN_MCP`.
    pub mcp: Vec<crate::tools::mcp::ServerSpec>,
}

impl Config {
    /// Where the tools come from, for [`crate::tools::ToolRegistry::from_sources`].
    pub fn tool_sources(&self) -> crate::tools::ToolSources {
        crate::tools::ToolSources {
            db: self.db.clone(),
            sql_names_pattern: !self.free_sql,
            index: self.index.clone(),
            memory: self.memory.clone(),
            memory_decay: self.memory_decay,
            tools: self.tools.clone(),
            mcp: self.mcp.clone(),
        }
    }

    /// The folder that holds fetched model files.
    pub fn models_dir(&self) -> PathBuf {
        self.home.join("models")
    }

    /// The folder of the prompt cache ([`crate::decode::prompt_cache`]).
    pub fn prompts_dir(&self) -> PathBuf {
        self.home.join("prompts")
    }

    /// The default home folder: `$CAIRN_HOME`, else the user's cache folder + `/cairn`.
    pub fn default_home() -> PathBuf {
        if let Some(h) = env_nonempty("CAIRN_HOME") {
            return PathBuf::from(h);
        }
        dirs::cache_dir()
            .or_else(|| dirs::home_dir().map(|h| h.join(".cache")))
            .unwrap_or_else(std::env::temp_dir)
            .join("cairn")
    }

    /// The default memory file: `$CAIRN_MEMORY`, else `$CAIRN_HOME/memory.sqlite` when
    /// `CAIRN_HOME` is set (so a private home keeps its memory private too), else the user's
    /// data folder + `/cairn/memory.sqlite`.
    pub fn default_memory() -> PathBuf {
        if let Some(m) = env_nonempty("CAIRN_MEMORY") {
            return PathBuf::from(m);
        }
        if let Some(h) = env_nonempty("CAIRN_HOME") {
            return PathBuf::from(h).join("memory.sqlite");
        }
        dirs::data_dir()
            .or_else(|| dirs::home_dir().map(|h| h.join(".local").join("share")))
            .unwrap_or_else(std::env::temp_dir)
            .join("cairn")
            .join("memory.sqlite")
    }

    /// The default search index: `$CAIRN_INDEX`, else `$CAIRN_HOME/index.sqlite` when
    /// `CAIRN_HOME` is set, else the user's data folder + `/cairn/index.sqlite`.
    pub fn default_index() -> PathBuf {
        if let Some(i) = env_nonempty("CAIRN_INDEX") {
            return PathBuf::from(i);
        }
        if let Some(h) = env_nonempty("CAIRN_HOME") {
            return PathBuf::from(h).join("index.sqlite");
        }
        dirs::data_dir()
            .or_else(|| dirs::home_dir().map(|h| h.join(".local").join("share")))
            .unwrap_or_else(std::env::temp_dir)
            .join("cairn")
            .join("index.sqlite")
    }

    /// Whether the environment asks for offline mode (`CAIRN_OFFLINE` or `HF_HUB_OFFLINE`).
    pub fn offline_from_env() -> bool {
        env_flag("CAIRN_OFFLINE") || env_flag("HF_HUB_OFFLINE")
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            model: env_nonempty("CAIRN_MODEL"),
            home: Config::default_home(),
            offline: Config::offline_from_env(),
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            isa: None,
            huge_pages: env_flag("CAIRN_HUGE_PAGES"),
            requantize: !env_flag("CAIRN_KEEP_QUANT"),
            engine: crate::model::Engine::default(),
            device: crate::model::DeviceSpec::default(),
            verbosity: Verbosity::Normal,
            memory: Config::default_memory(),
            memory_named: env_nonempty("CAIRN_MEMORY").is_some(),
            memory_decay: crate::memory::DEFAULT_DECAY,
            db: env_nonempty("CAIRN_DB").map(PathBuf::from),
            free_sql: env_flag("CAIRN_FREE_SQL"),
            prompt_cache: !env_flag("CAIRN_NO_PROMPT_CACHE"),
            index: Config::default_index(),
            index_named: env_nonempty("CAIRN_INDEX").is_some(),
            tools: env_nonempty("CAIRN_TOOLS").map(PathBuf::from),
            mcp: Vec::new(),
        }
    }
}

/// The value of an environment variable, `None` when unset or empty. The one reader of the
/// environment: `name` must be a variable of [`SETTINGS`] (case aside, for the proxy
/// variables' lower-case forms), so every variable cairn reads is documented.
pub fn env_nonempty(name: &str) -> Option<String> {
    debug_assert!(
        is_setting(name),
        "{name} is read from the environment but is not listed in config::SETTINGS"
    );
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Whether `name` is the environment variable of a setting (case aside).
pub fn is_setting(name: &str) -> bool {
    SETTINGS.iter().any(|s| s.env.eq_ignore_ascii_case(name))
}

/// An environment variable read as a boolean: `1`, `true`, `yes`, `on` are true.
pub fn env_flag(name: &str) -> bool {
    env_nonempty(name)
        .map(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
        .unwrap_or(false)
}

/// The most threads (or parallel jobs) cairn accepts: four per core, and never more than
/// 1024. More cannot make a forward pass faster and only exhaust the machine (a `--threads
/// 100000` once started thousands of threads and never finished).
pub fn max_threads() -> usize {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    cores.saturating_mul(4).min(1024)
}

/// Checks a thread or job count given by the user as `what` (a flag or variable name): at
/// least 1 and at most [`max_threads`].
pub fn check_threads(what: &str, n: usize) -> Result<usize, String> {
    let max = max_threads();
    if n == 0 {
        return Err(format!("{what} must be at least 1"));
    }
    if n > max {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        return Err(format!(
            "{what} is {n}: at most {max} (four per core; this machine has {cores} cores)"
        ));
    }
    Ok(n)
}

/// The longest wall-clock limit a flag may set: one week. A larger number is almost
/// certainly a typo, and a duration past what the clock can add would panic.
pub const MAX_SECONDS: f64 = 7.0 * 24.0 * 3600.0;

/// Turns a number of seconds given by the user as `what` (a flag name) into a duration:
/// finite, above 0 and at most [`MAX_SECONDS`]; the error names the flag and the bounds.
pub fn seconds(what: &str, secs: f64) -> Result<std::time::Duration, String> {
    if !(secs.is_finite() && secs > 0.0 && secs <= MAX_SECONDS) {
        return Err(format!(
            "{what} is {secs:?}: give a number of seconds above 0 and at most {MAX_SECONDS} (one week)"
        ));
    }
    std::time::Duration::try_from_secs_f64(secs).map_err(|e| format!("{what} is {secs:?}: {e}"))
}
