//! `cairn batch IN.jsonl`: many tasks, one output line each ([`OutputLine`]), resumable,
//! with several jobs and shards; and `cairn eval SUITE.jsonl`: a suite run through cairn's
//! loop (and the naive baseline), scored, with the metrics report.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use super::agents::build_agents;
use super::run::AgentArgs;
use crate::cli::outputs::{check_output, inputs_of, OutputKind};
use crate::cli::printer::Printer;
use crate::config::{check_threads, Config, Verbosity};
use crate::eval::batch::{self, LoopKind, OutputFile, Shard};
use crate::eval::{read_tasks, report_markdown, LoopReport, Metrics, OutputLine, Task};

/// Flags of `cairn batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// The tasks: one JSON object a line, {"id", "task", "session"?}.
    #[arg(value_name = "IN.jsonl")]
    pub input: PathBuf,
    /// The output file; re-running with it skips ids already there (default: IN.out.jsonl).
    #[arg(long, value_name = "OUT.jsonl")]
    pub out: Option<PathBuf>,
    /// Tasks run at once (sessions in parallel; one session's tasks always in file order).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub jobs: usize,
    /// Take only the session groups whose position modulo N is I (0-based), to split a file
    /// across machines.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// The agent loop's flags (`--session` is ignored: sessions come from the lines).
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// Flags of `cairn eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The suite: batch lines with "expect": [accepted answers] and an optional "kind".
    #[arg(value_name = "SUITE.jsonl")]
    pub suite: PathBuf,
    /// Also run these baselines on the same model, side by side: `naive` (the loop without
    /// schema, retries or guards, same tools) and `alone` (the model answering by itself,
    /// reasoning step by step, no tools). Repeat the flag or separate names with commas.
    #[arg(long, value_name = "NAME", value_parser = ["naive", "alone"], value_delimiter = ',')]
    pub baseline: Vec<String>,
    /// Write the markdown report to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write every task's output line (with its loop) to FILE.
    #[arg(long, value_name = "FILE")]
    pub results: Option<PathBuf>,
    /// Print one JSON object (metrics, by_kind, and the baseline's) instead of the report.
    #[arg(long)]
    pub json: bool,
    /// Tasks run at once.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub jobs: usize,
    /// The agent loop's flags.
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// Progress through the printer: done/total, rate, time left; one line rewritten in a
/// terminal.
struct Progress<'a> {
    printer: &'a Printer,
    total: usize,
    done: usize,
    unanswered: usize,
    start: Instant,
    label: &'static str,
}

impl<'a> Progress<'a> {
    /// A counter of `total` tasks shown as `label`.
    fn new(printer: &'a Printer, total: usize, label: &'static str) -> Self {
        Progress {
            printer,
            total,
            done: 0,
            unanswered: 0,
            start: Instant::now(),
            label,
        }
    }

    fn tick(&mut self, line: &OutputLine) {
        self.done += 1;
        if !line.answered() {
            self.unanswered += 1;
        }
        if !self.printer.shows(Verbosity::Normal) {
            return;
        }
        let secs = self.start.elapsed().as_secs_f64();
        let rate = self.done as f64 / secs.max(1e-9);
        let left = (self.total - self.done) as f64 / rate.max(1e-9);
        let msg = format!(
            "{}: {}/{} done, {} without an answer, {:.1} tasks/min, about {:.0} s left",
            self.label,
            self.done,
            self.total,
            self.unanswered,
            rate * 60.0,
            left
        );
        if self.done == self.total {
            self.printer.progress_done(&msg);
        } else {
            self.printer.progress(&msg);
        }
    }
}

fn default_out(input: &std::path::Path) -> PathBuf {
    let stem = input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "batch".into());
    input.with_file_name(format!("{stem}.out.jsonl"))
}

/// Runs `cairn batch`.
pub fn run(config: &Config, printer: &Printer, args: &BatchArgs) -> anyhow::Result<ExitCode> {
    check_threads("--jobs", args.jobs).map_err(anyhow::Error::msg)?;
    let (tasks, bad) = read_tasks(&args.input)
        .with_context(|| format!("cannot read the tasks {}", args.input.display()))?;
    for b in &bad {
        printer.error(&format!(
            "{} line {}: {}; the line is skipped",
            args.input.display(),
            b.line,
            b.error
        ));
    }
    let out_path = args.out.clone().unwrap_or_else(|| default_out(&args.input));
    let inputs = inputs_of(config, &[("the task file", &args.input)]);
    check_output(
        "--out",
        &out_path,
        OutputKind::Results,
        &inputs,
        args.out.is_some(),
    )?;
    let batch::Existing {
        ids: done, dropped, ..
    } = batch::read_done(&out_path)
        .with_context(|| format!("cannot read the output file {}", out_path.display()))?;
    if dropped > 0 {
        printer.info(&format!(
            "note: {dropped} unreadable lines in {} (cut by an interruption) will be redone",
            out_path.display()
        ));
    }
    let tasks: Vec<Task> = tasks.into_iter().map(|(_, t)| t).collect();
    let groups: Vec<Vec<usize>> = batch::plan(&tasks, args.shard)
        .into_iter()
        .map(|g| {
            g.into_iter()
                .filter(|&i| !done.contains(&tasks[i].id))
                .collect::<Vec<_>>()
        })
        .filter(|g| !g.is_empty())
        .collect();
    let todo: usize = groups.iter().map(Vec::len).sum();
    printer.info(&format!(
        "batch: {} tasks in {}, {} already in {}, {todo} to run",
        tasks.len(),
        args.input.display(),
        done.len(),
        out_path.display()
    ));
    let mut unanswered = 0;
    if todo > 0 {
        let memory = (!args.agent.no_memory).then(|| config.memory.clone());
        let jobs = args.jobs.min(groups.len()).max(1);
        let agents = build_agents(config, printer, &args.agent, jobs, memory.as_deref(), false)?;
        let mut out = OutputFile::append(&out_path)
            .with_context(|| format!("cannot write {}", out_path.display()))?;
        let mut progress = Progress::new(printer, todo, "batch");
        let mut write_error = None;
        let no_memory = args.agent.no_memory;
        let session_of = move |t: &Task| -> Option<String> {
            if no_memory {
                None
            } else {
                Some(
                    t.session
                        .clone()
                        .unwrap_or_else(|| format!("batch-{}", t.id)),
                )
            }
        };
        batch::run(
            &tasks,
            groups,
            agents,
            LoopKind::Cairn,
            &session_of,
            &mut |_, line| {
                if write_error.is_none() {
                    if let Err(e) = out.write(&line) {
                        write_error = Some(e);
                    }
                }
                progress.tick(&line);
            },
        );
        if let Some(e) = write_error {
            return Err(e).with_context(|| format!("cannot write {}", out_path.display()));
        }
        unanswered = progress.unanswered;
    }
    // Also when nothing was left to run: a kill after the last line was written but before
    // this step leaves the file in finishing order.
    if out_path.exists() {
        let ids: Vec<String> = tasks.iter().map(|t| t.id.clone()).collect();
        OutputFile::append(&out_path)
            .and_then(|out| out.put_in_order(&ids))
            .with_context(|| format!("cannot reorder {}", out_path.display()))?;
    }
    printer.info(&format!("batch: results in {}", out_path.display()));
    Ok(if bad.is_empty() && unanswered == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Runs the suite through one loop and returns its output lines in suite order.
fn run_loop(
    config: &Config,
    printer: &Printer,
    args: &EvalArgs,
    tasks: &[Task],
    kind: LoopKind,
) -> anyhow::Result<Vec<OutputLine>> {
    // A private memory file, so earlier evaluations cannot leak into this one; removed when
    // the loop ends, and by a later eval when this process was killed first.
    sweep_eval_memories(&std::env::temp_dir());
    let memory = EvalMemory(std::env::temp_dir().join(format!(
        "{EVAL_MEMORY_PREFIX}{}-{}-{}.sqlite",
        std::process::id(),
        kind.as_str(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )));
    let groups = batch::plan(tasks, None);
    let jobs = args.jobs.min(groups.len()).max(1);
    let agents = build_agents(config, printer, &args.agent, jobs, Some(&memory.0), false)?;
    let mut progress = Progress::new(printer, tasks.len(), kind.as_str());
    let mut lines: Vec<Option<OutputLine>> = vec![None; tasks.len()];
    let session_of = |t: &Task| {
        Some(
            t.session
                .clone()
                .unwrap_or_else(|| format!("eval-{}", t.id)),
        )
    };
    batch::run(tasks, groups, agents, kind, &session_of, &mut |i, line| {
        progress.tick(&line);
        lines[i] = Some(line);
    });
    Ok(lines.into_iter().flatten().collect())
}

/// How the names of eval's private memory files begin: `cairn-eval-PID-LOOP-NANOS.sqlite`.
const EVAL_MEMORY_PREFIX: &str = "cairn-eval-";

/// An eval's private memory file, removed with its `-wal` and `-shm` files when dropped (the
/// loop ended, or returned an error).
struct EvalMemory(PathBuf);

impl Drop for EvalMemory {
    fn drop(&mut self) {
        remove_memory_files(&self.0);
    }
}

/// Removes a memory file and the `-wal` and `-shm` files SQLite keeps beside it.
fn remove_memory_files(path: &std::path::Path) {
    for ext in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(ext);
        let _ = std::fs::remove_file(name);
    }
}

/// Removes the private memory files in `dir` of evals whose process is gone (killed, or
/// stopped with Ctrl-C, before they could remove their own). Regression: every interrupted
/// `cairn eval` left its memory file, up to megabytes with its log, in the temp folder for
/// good. Files of a process still running are left alone; so is anything not named as eval
/// names them.
fn sweep_eval_memories(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(EVAL_MEMORY_PREFIX) else {
            continue;
        };
        let Some(stem) = rest.strip_suffix(".sqlite") else {
            continue;
        };
        let Some(pid) = stem.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if stem.split('-').count() == 3 && !process_alive(pid) {
            remove_memory_files(&entry.path());
        }
    }
}

/// Whether a process with this id runs (on systems where that cannot be asked: yes, so
/// nothing is removed).
fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return true;
        };
        // SAFETY: kill(2) with signal 0 sends nothing; it only asks whether the process
        // exists (ESRCH when it does not, EPERM when it is another user's).
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// Runs `cairn eval`.
pub fn eval(config: &Config, printer: &Printer, args: &EvalArgs) -> anyhow::Result<ExitCode> {
    check_threads("--jobs", args.jobs).map_err(anyhow::Error::msg)?;
    let inputs = inputs_of(config, &[("the suite", &args.suite)]);
    for (flag, p, kind) in [
        ("--report", &args.report, OutputKind::Report),
        ("--results", &args.results, OutputKind::Results),
    ] {
        if let Some(p) = p {
            check_output(flag, p, kind, &inputs, true)?;
        }
    }
    let (tasks, bad) = read_tasks(&args.suite)
        .with_context(|| format!("cannot read the suite {}", args.suite.display()))?;
    if let Some(b) = bad.first() {
        anyhow::bail!(
            "{} line {}: {} (a suite must be whole to be scored; fix the line)",
            args.suite.display(),
            b.line,
            b.error
        );
    }
    let tasks: Vec<Task> = tasks.into_iter().map(|(_, t)| t).collect();
    if let Some(t) = tasks.iter().find(|t| t.expect.is_empty()) {
        anyhow::bail!(
            "{}: task `{}` has no \"expect\" answers; every suite task needs at least one",
            args.suite.display(),
            t.id
        );
    }
    let mut kinds = vec![LoopKind::Cairn];
    for b in &args.baseline {
        let kind = LoopKind::baseline(b).with_context(|| format!("no baseline named {b}"))?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    let mut reports = Vec::new();
    let mut all_lines = Vec::new();
    for kind in kinds {
        let lines = run_loop(config, printer, args, &tasks, kind)?;
        let pairs: Vec<(&Task, &OutputLine)> = tasks
            .iter()
            .filter_map(|t| lines.iter().find(|l| l.id == t.id).map(|l| (t, l)))
            .collect();
        let (metrics, by_kind) = Metrics::by_kind(&pairs);
        reports.push(LoopReport {
            r#loop: kind.as_str().to_string(),
            metrics,
            by_kind,
        });
        all_lines.extend(lines);
    }
    let title = format!("cairn eval {}", args.suite.display());
    let md = report_markdown(&title, &reports);
    if let Some(p) = &args.report {
        std::fs::write(p, &md).with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &args.results {
        let text: Vec<String> = all_lines
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?;
        std::fs::write(p, text.join("\n") + "\n")
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    let mut out = printer.out();
    if args.json {
        let mut v = serde_json::to_value(&reports[0])?;
        if let Some(b) = reports.get(1) {
            v["baseline"] = serde_json::to_value(b)?;
        }
        if reports.len() > 1 {
            v["baselines"] = serde_json::to_value(&reports[1..])?;
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        write!(out, "{md}")?;
    }
    Ok(ExitCode::SUCCESS)
}
