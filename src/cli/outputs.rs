//! The one check every file cairn writes goes through before anything is opened for writing:
//! `--out`, `--report`, `--results`, `--trace`, `--memory`, `--index` and the chat history.
//!
//! A path is refused, with the flag that named it and what to do, when:
//! - it is one of the command's inputs or other files (the database, the tools manifest, the
//!   model, the task file, the memory file, the index), compared by device and inode, so a
//!   symbolic or hard link to the file is caught too (`--trace shop.sqlite --db shop.sqlite`
//!   once appended JSON into the user's database);
//! - it exists but is not a file of the kind cairn writes there (a markdown report over the
//!   user's notes, say), told by its first line; memory and index files are checked by their
//!   own stores when opened, and every line of a batch output file by
//!   [`crate::eval::batch::read_done`] when batch resumes from it;
//! - its folder does not exist: cairn does not create folders the user named without saying
//!   so (its own home folder and the files under it are created as needed).

use std::io::{BufRead, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::config::Config;

/// What cairn writes at a path, which decides what an existing file there must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// Batch output or eval results: one JSON result object per line.
    Results,
    /// A trace: one JSON event object per line, appended.
    Trace,
    /// An eval report in markdown, rewritten whole.
    Report,
    /// The chat line history (rustyline's file format).
    History,
    /// cairn's memory file (checked by the memory store when it opens the file).
    Memory,
    /// A search index (checked by the index when it opens the file).
    Index,
}

impl OutputKind {
    /// The kind in words, for messages.
    fn describe(self) -> &'static str {
        match self {
            OutputKind::Results => "cairn's result lines (JSON)",
            OutputKind::Trace => "a cairn trace (JSON event lines)",
            OutputKind::Report => "a cairn eval report",
            OutputKind::History => "cairn's chat history",
            OutputKind::Memory => "a cairn memory file",
            OutputKind::Index => "a cairn index",
        }
    }
}

/// The files a command reads or keeps, each with the flag that names it: what no output may
/// be. `extra` adds the command's own inputs (the task or suite file).
pub fn inputs_of(config: &Config, extra: &[(&'static str, &Path)]) -> Vec<(&'static str, PathBuf)> {
    let mut v: Vec<(&'static str, PathBuf)> =
        extra.iter().map(|(f, p)| (*f, p.to_path_buf())).collect();
    if let Some(db) = &config.db {
        v.push(("--db", db.clone()));
    }
    if let Some(t) = &config.tools {
        v.push(("--tools", t.clone()));
    }
    if let Some(m) = &config.model {
        let p = Path::new(m);
        if p.is_file() {
            v.push(("--model", p.to_path_buf()));
        }
    }
    v.push(("--memory", config.memory.clone()));
    v.push(("--index", config.index.clone()));
    v
}

/// Checks that cairn may write `path`, named by `flag`, as a file of `kind`: not one of
/// `inputs` (other than the entry for `flag` itself), not an existing file of another kind,
/// and in a folder that exists when `named` (the user gave the path; cairn's own default
/// paths get their folders created).
pub fn check_output(
    flag: &str,
    path: &Path,
    kind: OutputKind,
    inputs: &[(&'static str, PathBuf)],
    named: bool,
) -> anyhow::Result<()> {
    let shown = path.display();
    if let Ok(meta) = std::fs::metadata(path) {
        for (in_flag, input) in inputs.iter().filter(|(f, _)| *f != flag) {
            let Ok(other) = std::fs::metadata(input) else {
                continue;
            };
            if meta.dev() == other.dev() && meta.ino() == other.ino() {
                anyhow::bail!(
                    "{flag} {shown} is the same file as {in_flag} {}: writing it would destroy it; choose another file for {flag}",
                    input.display()
                );
            }
        }
        if meta.is_dir() {
            anyhow::bail!("{flag} {shown} is a folder; name a file");
        }
        if !meta.is_file() {
            anyhow::bail!("{flag} {shown} is not a regular file; name a file");
        }
        if meta.len() > 0 {
            if let Some(why) = not_of_kind(path, kind)? {
                anyhow::bail!(
                    "{flag} {shown} exists and is not {} ({why}); it was left untouched: choose another file for {flag}, or move this one away",
                    kind.describe()
                );
            }
        }
    } else if named {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if dir.exists() && !dir.is_dir() {
                anyhow::bail!(
                    "{flag} {shown}: {} is not a folder; choose another path",
                    dir.display()
                );
            }
            if !dir.exists() {
                anyhow::bail!(
                    "{flag} {shown}: the folder {} does not exist; create it first or choose another path",
                    dir.display()
                );
            }
        }
    }
    Ok(())
}

/// Why the existing, non-empty file at `path` is not of `kind`; `None` when it is (or when its
/// own store checks it).
fn not_of_kind(path: &Path, kind: OutputKind) -> anyhow::Result<Option<String>> {
    let open = || {
        std::fs::File::open(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))
    };
    Ok(match kind {
        OutputKind::Memory | OutputKind::Index => None,
        // The kind is told by the first line, as for the other kinds: the whole file is read
        // once, by the batch writer that resumes from it.
        OutputKind::Results => {
            let line = first_line(open()?)?;
            serde_json::from_str::<crate::eval::OutputLine>(&line)
                .err()
                .map(|e| format!("line 1 is not a cairn output line ({e})"))
        }
        OutputKind::Trace => {
            let line = first_line(open()?)?;
            match serde_json::from_str::<serde_json::Value>(&line) {
                Ok(v) if v.get("event").is_some() && v.get("t_ms").is_some() => None,
                _ => Some("its first line is not a trace event".into()),
            }
        }
        OutputKind::Report => {
            let line = first_line(open()?)?;
            (!line.starts_with("# cairn eval "))
                .then(|| "it does not begin with `# cairn eval`".into())
        }
        OutputKind::History => {
            let line = first_line(open()?)?;
            (line.trim_end() != "#V2")
                .then(|| "it does not begin with the history header `#V2`".into())
        }
    })
}

/// The first line of a file, read up to 1 MiB (a longer line is returned cut, and fails every
/// kind's test).
fn first_line(f: std::fs::File) -> anyhow::Result<String> {
    let mut buf = Vec::new();
    std::io::BufReader::new(f)
        .take(1 << 20)
        .read_until(b'\n', &mut buf)?;
    Ok(String::from_utf8_lossy(&buf).trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn a_chat_history_that_is_not_cairns_is_refused_and_left_alone() {
        let d = dir();
        let p = d.path().join("chat_history.txt");
        std::fs::write(&p, "my shell history\n").unwrap();
        let e = check_output("the chat history", &p, OutputKind::History, &[], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not cairn's chat history"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "my shell history\n");
        std::fs::write(&p, "#V2\nWhat is 2+2?\n").unwrap();
        check_output("the chat history", &p, OutputKind::History, &[], false).unwrap();
    }

    #[test]
    fn an_empty_or_missing_file_of_any_kind_may_be_written() {
        let d = dir();
        let p = d.path().join("out");
        for kind in [OutputKind::Trace, OutputKind::Report, OutputKind::Results] {
            check_output("--x", &p, kind, &[], true).unwrap();
        }
        std::fs::write(&p, "").unwrap();
        for kind in [OutputKind::Trace, OutputKind::Report, OutputKind::Results] {
            check_output("--x", &p, kind, &[], true).unwrap();
        }
    }

    #[test]
    fn an_output_is_compared_with_inputs_by_inode_and_never_with_its_own_flag() {
        let d = dir();
        let db = d.path().join("db.sqlite");
        std::fs::write(&db, "").unwrap();
        let hard = d.path().join("hard");
        std::fs::hard_link(&db, &hard).unwrap();
        let inputs = vec![("--db", db.clone()), ("--memory", hard.clone())];
        let e = check_output("--trace", &hard, OutputKind::Trace, &inputs, true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is the same file as --db"), "{e}");
        // The memory file is in the list of inputs under its own flag: that entry is skipped,
        // the database is not.
        let e = check_output("--memory", &hard, OutputKind::Memory, &inputs, true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("same file as --db"), "{e}");
        let other = d.path().join("other.sqlite");
        std::fs::write(&other, "").unwrap();
        let inputs = vec![("--memory", other.clone())];
        check_output("--memory", &other, OutputKind::Memory, &inputs, true).unwrap();
    }

    #[test]
    fn a_named_path_in_a_missing_folder_is_refused_but_a_default_one_is_not() {
        let d = dir();
        let p = d.path().join("no/such/dir/out.jsonl");
        let e = check_output("--out", &p, OutputKind::Results, &[], true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist; create it first"), "{e}");
        check_output("--out", &p, OutputKind::Results, &[], false).unwrap();
        assert!(!d.path().join("no").exists());
    }
}
