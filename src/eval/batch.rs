//! Running many tasks: session groups in file order, several jobs at once (each its own KV
//! cache over shared weights), shards for external schedulers, and an output file that is
//! appended line by line as tasks finish (so a kill loses no finished line) and put in input
//! order at the end. Re-running with the same output file skips the ids already in it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex};

use super::{alone, naive, OutputLine, Task};
use crate::agent::{Agent, ModelPolicy};

/// Which loop runs the tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopKind {
    /// cairn's agent loop.
    Cairn,
    /// The naive baseline.
    Naive,
    /// The model alone, reasoning step by step without tools.
    Alone,
}

impl LoopKind {
    /// `cairn`, `naive` or `alone`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoopKind::Cairn => "cairn",
            LoopKind::Naive => "naive",
            LoopKind::Alone => "alone",
        }
    }

    /// The baseline named `name` (`naive` or `alone`).
    pub fn baseline(name: &str) -> Option<LoopKind> {
        match name {
            "naive" => Some(LoopKind::Naive),
            "alone" => Some(LoopKind::Alone),
            _ => None,
        }
    }
}

/// `--shard I/N`: this run takes the session groups whose position modulo N is I.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, 0-based.
    pub index: usize,
    /// How many shards.
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("--shard `{s}`: expected I/N with 0 <= I < N, like 0/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// The groups of tasks to run, as indices into `tasks`: one group per session (its tasks in
/// file order), one per task without a session, in order of first appearance; with a shard,
/// only the groups whose position modulo N is I.
pub fn plan(tasks: &[Task], shard: Option<Shard>) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut by_session: HashMap<&str, usize> = HashMap::new();
    for (i, t) in tasks.iter().enumerate() {
        match &t.session {
            Some(s) => match by_session.get(s.as_str()) {
                Some(&g) => groups[g].push(i),
                None => {
                    by_session.insert(s, groups.len());
                    groups.push(vec![i]);
                }
            },
            None => groups.push(vec![i]),
        }
    }
    match shard {
        Some(sh) => groups
            .into_iter()
            .enumerate()
            .filter(|(g, _)| g % sh.count == sh.index)
            .map(|(_, v)| v)
            .collect(),
        None => groups,
    }
}

/// What an existing output file holds.
#[derive(Debug, Default)]
pub struct Existing {
    /// The ids with a line.
    pub ids: HashSet<String>,
    /// Each id with its line, in file order.
    pub lines: Vec<(String, String)>,
    /// Lines that could not be read because a kill cut them short (only ever the last line,
    /// without its newline); their tasks run again.
    pub dropped: usize,
    /// Where the cut last line starts, if there is one: appending begins there.
    pub cut_at: Option<u64>,
}

/// The start of every output line as [`OutputFile::write`] writes it.
const LINE_START: &[u8] = br#"{"id":"#;

/// Whether `tail`, the last line of a file without its newline, is an output line cut short:
/// it is (or starts like) what [`OutputFile::write`] writes.
fn looks_cut(tail: &[u8]) -> bool {
    tail.starts_with(LINE_START) || LINE_START.starts_with(tail)
}

/// Reads an existing output file (none: nothing done). A last line cut short by a kill is
/// counted in `dropped` and its task runs again; any other line that is not an output line
/// is an error, so a file that is not cairn's output (the task file itself, say) is never
/// rewritten.
pub fn read_done(path: &Path) -> std::io::Result<Existing> {
    let mut out = Existing::default();
    if !path.exists() {
        return Ok(out);
    }
    let bytes = std::fs::read(path)?;
    let mut offset = 0usize;
    let mut n = 0usize;
    while offset < bytes.len() {
        n += 1;
        let (raw, next, whole) = match bytes[offset..].iter().position(|&b| b == b'\n') {
            Some(p) => (&bytes[offset..offset + p], offset + p + 1, true),
            None => (&bytes[offset..], bytes.len(), false),
        };
        let line_start = offset;
        offset = next;
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let parsed = std::str::from_utf8(raw)
            .map_err(|e| format!("not valid UTF-8 ({e})"))
            .and_then(|l| {
                serde_json::from_str::<OutputLine>(l)
                    .map(|o| (o, l.to_string()))
                    .map_err(|e| e.to_string())
            });
        match parsed {
            Ok((o, line)) => {
                if out.ids.insert(o.id.clone()) {
                    out.lines.push((o.id, line));
                }
            }
            Err(_) if !whole && looks_cut(raw) => {
                out.dropped += 1;
                out.cut_at = Some(line_start as u64);
            }
            Err(why) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("line {n} is not a cairn output line ({why})"),
                ))
            }
        }
    }
    Ok(out)
}

/// Runs `groups` of `tasks` on the given agents (one job each) and hands each output line to
/// `on_line` as soon as its task ends. `session_of` names the memory session of a task
/// (`None`: no memory).
pub fn run(
    tasks: &[Task],
    groups: Vec<Vec<usize>>,
    agents: Vec<Agent<ModelPolicy>>,
    kind: LoopKind,
    session_of: &(dyn Fn(&Task) -> Option<String> + Sync),
    on_line: &mut dyn FnMut(usize, OutputLine),
) {
    let queue = Mutex::new(groups.into_iter().collect::<VecDeque<_>>());
    let (tx, rx) = mpsc::channel::<(usize, OutputLine)>();
    std::thread::scope(|scope| {
        for mut agent in agents {
            let tx = tx.clone();
            let queue = &queue;
            scope.spawn(move || loop {
                let Some(group) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
                else {
                    break;
                };
                for i in group {
                    let t = &tasks[i];
                    let result = match kind {
                        LoopKind::Cairn => agent.run_task(&t.task, session_of(t).as_deref()),
                        LoopKind::Naive => {
                            let rounds = agent.options().max_rounds;
                            let max_tokens = agent.options().max_step_tokens;
                            let (policy, tools) = agent.parts_mut();
                            naive::run_naive(policy, tools, &t.task, rounds, max_tokens)
                        }
                        LoopKind::Alone => {
                            // As long as the loop's own reasoning may be: the same model
                            // answering alone gets the same room to think.
                            let max_tokens = agent
                                .options()
                                .max_step_tokens
                                .max(crate::agent::reason::REASON_MAX_TOKENS);
                            alone::run_alone(agent.policy_mut(), &t.task, max_tokens)
                        }
                    };
                    let line = OutputLine::from_result(&t.id, &result, kind.as_str());
                    if tx.send((i, line)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        for (i, line) in rx {
            on_line(i, line);
        }
    });
}

/// Appends output lines to a file as they come, flushed each time.
pub struct OutputFile {
    path: PathBuf,
    file: std::fs::File,
}

impl OutputFile {
    /// Opens `path` for appending (created if missing). A last line cut short by a kill is
    /// removed first (its task runs again), and a last line without its newline gets one, so
    /// the next line never joins it. Fails, touching nothing, on a file [`read_done`] refuses.
    pub fn append(path: &Path) -> std::io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let existing = read_done(path)?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        if let Some(at) = existing.cut_at {
            file.set_len(at)?;
        }
        let len = file.metadata()?.len();
        if len > 0 {
            use std::io::{Read, Seek, SeekFrom};
            let mut reader = std::fs::File::open(path)?;
            reader.seek(SeekFrom::Start(len - 1))?;
            let mut last = [0u8; 1];
            reader.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        Ok(OutputFile {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Writes one line and flushes it to the file.
    pub fn write(&mut self, line: &OutputLine) -> std::io::Result<()> {
        let text = serde_json::to_string(line).map_err(std::io::Error::other)?;
        // One write call per line, so a line is never interleaved or half-kept by a kill
        // of this process after the call returns.
        self.file.write_all(format!("{text}\n").as_bytes())?;
        self.file.flush()
    }

    /// Rewrites the file with its lines in the order of `ids` (lines of other ids after
    /// them), through a temporary file and a rename, so the file is whole at every moment.
    pub fn put_in_order(&self, ids: &[String]) -> std::io::Result<()> {
        let existing = read_done(&self.path)?;
        let mut by_id: HashMap<String, String> = existing.lines.into_iter().collect();
        let mut out = String::new();
        for id in ids {
            if let Some(l) = by_id.remove(id) {
                out.push_str(&l);
                out.push('\n');
            }
        }
        let mut rest: Vec<(String, String)> = by_id.into_iter().collect();
        rest.sort();
        for (_, l) in rest {
            out.push_str(&l);
            out.push('\n');
        }
        let tmp = self.path.with_extension("jsonl.tmp");
        std::fs::write(&tmp, out)?;
        std::fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(id: &str, session: Option<&str>) -> Task {
        Task {
            id: id.into(),
            task: "x".into(),
            session: session.map(str::to_string),
            expect: vec![],
            kind: None,
        }
    }

    #[test]
    fn sessions_keep_file_order_and_shards_cover_every_task_once() {
        let tasks = vec![
            t("1", Some("a")),
            t("2", None),
            t("3", Some("b")),
            t("4", Some("a")),
            t("5", None),
            t("6", Some("b")),
            t("7", Some("c")),
        ];
        let all = plan(&tasks, None);
        assert_eq!(all, vec![vec![0, 3], vec![1], vec![2, 5], vec![4], vec![6]]);
        for n in 1..=4 {
            let mut seen: Vec<usize> = (0..n)
                .flat_map(|i| plan(&tasks, Some(Shard { index: i, count: n })))
                .flatten()
                .collect();
            seen.sort();
            assert_eq!(seen, (0..7).collect::<Vec<_>>(), "{n} shards");
        }
        assert!("3/3".parse::<Shard>().is_err());
        assert!("1/0".parse::<Shard>().is_err());
        assert_eq!(
            "1/4".parse::<Shard>().unwrap(),
            Shard { index: 1, count: 4 }
        );
    }
}
