//! Batch runs and evaluation: reading task files ([`read_tasks`]), running many tasks with
//! resumable output ([`batch`]), the naive baseline loop ([`naive`]), the model alone
//! ([`alone`]), scoring answers
//! ([`matches`]) and the metrics report ([`Metrics`], [`report_markdown`]).
//!
//! Task lines are `{"id", "task", "session"?}`, and suite lines add
//! `"expect": [strings]` and an optional `"kind"` tag. An answer passes when it contains one of
//! the expected strings, case-insensitively, with numbers compared numerically ("391.0"
//! matches "391").

pub mod alone;
pub mod batch;
pub mod naive;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One task of a batch or suite file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Its id, unique in the file.
    pub id: String,
    /// The task text.
    pub task: String,
    /// The memory session; tasks of one session run in file order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Accepted answers (suites only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect: Vec<String>,
    /// A tag for per-kind metrics (suites only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A line of a task file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub error: String,
}

/// The tasks of a file, each with its 1-based line number.
pub type NumberedTasks = Vec<(usize, Task)>;

/// The longest task line accepted, in bytes. A task this long would not fit any preset's
/// context; refusing it up front keeps one bad line from costing a model run.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Reads a task file: the good tasks in file order with their line numbers, and the bad
/// lines with why. Ids may be strings or numbers (numbers become their text); a missing id
/// becomes `line-N`; a repeated id is a bad line. A line that is not UTF-8 or is longer than
/// [`MAX_LINE_BYTES`] is a bad line, not an error for the whole file.
pub fn read_tasks(path: &Path) -> std::io::Result<(NumberedTasks, Vec<BadLine>)> {
    let bytes = std::fs::read(path)?;
    Ok(parse_task_bytes(&bytes))
}

/// Reads the next line of `input` (without its `\n` or `\r\n`): `None` at the end, else the
/// line, or why it cannot be used (longer than [`MAX_LINE_BYTES`], or not UTF-8). A line over
/// the limit is read to its end and dropped, never held: one huge line costs no memory and
/// leaves the next line readable. For inputs read line by line (`chat`, `call --json-lines`).
pub fn next_line(
    input: &mut impl std::io::BufRead,
) -> std::io::Result<Option<Result<String, String>>> {
    let mut buf = Vec::new();
    let mut total = 0usize;
    let mut ended = false;
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        let (take, newline) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if total + take <= MAX_LINE_BYTES {
            buf.extend_from_slice(&chunk[..take]);
        }
        total += take;
        input.consume(take + usize::from(newline));
        ended = true;
        if newline {
            break;
        }
    }
    if !ended {
        return Ok(None);
    }
    if total > MAX_LINE_BYTES {
        return Ok(Some(Err(format!(
            "the line is {total} bytes; lines are limited to {MAX_LINE_BYTES} bytes (1 MiB)"
        ))));
    }
    if buf.ends_with(b"\r") {
        buf.pop();
    }
    Ok(Some(String::from_utf8(buf).map_err(|e| {
        format!(
            "not valid UTF-8 (bad byte at offset {} of the line)",
            e.utf8_error().valid_up_to()
        )
    })))
}

/// [`read_tasks`] on text.
pub fn parse_tasks(text: &str) -> (NumberedTasks, Vec<BadLine>) {
    parse_task_bytes(text.as_bytes())
}

/// [`read_tasks`] on the bytes of a file: lines end at `\n` (a `\r` before it is dropped).
pub fn parse_task_bytes(bytes: &[u8]) -> (NumberedTasks, Vec<BadLine>) {
    let mut tasks: Vec<(usize, Task)> = Vec::new();
    let mut bad = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    for (i, raw) in body.split(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.len() > MAX_LINE_BYTES {
            bad.push(BadLine {
                line: n,
                error: format!(
                    "the line is {} bytes; task lines are limited to {} bytes (1 MiB)",
                    raw.len(),
                    MAX_LINE_BYTES
                ),
            });
            continue;
        }
        let line = match std::str::from_utf8(raw) {
            Ok(l) => l,
            Err(e) => {
                bad.push(BadLine {
                    line: n,
                    error: format!(
                        "not valid UTF-8 (bad byte at offset {} of the line); save the file as UTF-8",
                        e.valid_up_to()
                    ),
                });
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Result<Task, String> = (|| {
            let mut v: Value =
                serde_json::from_str(line).map_err(|e| format!("not valid JSON: {e}"))?;
            let obj = v.as_object_mut().ok_or("not a JSON object")?;
            let id = match obj.get("id") {
                Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                None => format!("line-{n}"),
                Some(other) => {
                    return Err(format!("`id` must be a string or a number, not {other}"))
                }
            };
            obj.insert("id".into(), Value::String(id));
            let t: Task = serde_json::from_value(v).map_err(|e| format!("{e}"))?;
            if t.task.trim().is_empty() {
                return Err("`task` is empty".into());
            }
            Ok(t)
        })();
        match parsed {
            Ok(t) if !seen.insert(t.id.clone()) => bad.push(BadLine {
                line: n,
                error: format!("the id `{}` is used by an earlier line", t.id),
            }),
            Ok(t) => tasks.push((n, t)),
            Err(e) => bad.push(BadLine { line: n, error: e }),
        }
    }
    (tasks, bad)
}

/// One tool call in an output line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallLine {
    /// The tool (empty for a step that could not be read).
    pub tool: String,
    /// The arguments.
    pub args: Value,
    /// Whether it returned an observation.
    pub ok: bool,
    /// Whether it was a well-formed call of a known tool with schema-valid arguments.
    #[serde(default = "yes")]
    pub valid: bool,
    /// The error, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn yes() -> bool {
    true
}

/// One output line of `cairn batch`: id, answer, stop reason, tool calls, tokens and latency,
/// plus metrics fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputLine {
    /// The task's id.
    pub id: String,
    /// The answer (empty when none).
    pub answer: String,
    /// Why the task stopped.
    pub stop_reason: String,
    /// Rounds decoded.
    pub rounds: usize,
    /// The tool calls.
    pub tool_calls: Vec<CallLine>,
    /// Prompt tokens over the task.
    pub prompt_tokens: usize,
    /// Generated tokens over the task.
    pub generated_tokens: usize,
    /// Of those, forced by the schema.
    #[serde(default)]
    pub forced_tokens: usize,
    /// Wall time, ms.
    pub latency_ms: u64,
    /// Time spent decoding after each step's first token, ms.
    #[serde(default)]
    pub decode_ms: f64,
    /// Of that, time spent computing the constraints' token masks, ms.
    #[serde(default)]
    pub mask_ms: f64,
    /// Repeated actions seen.
    #[serde(default)]
    pub dead_loops: usize,
    /// Which loop ran it: `cairn` or `naive`.
    #[serde(default = "cairn_loop")]
    pub r#loop: String,
    /// The error, for stops without an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn cairn_loop() -> String {
    "cairn".into()
}

impl OutputLine {
    /// Whether the task ended with an answer: a stop that can carry one, and the answer there
    /// (the line's form of [`crate::agent::AgentResult::answered`]).
    pub fn answered(&self) -> bool {
        matches!(
            self.stop_reason.as_str(),
            "final_answer" | "max_rounds" | "stop_when"
        ) && !self.answer.trim().is_empty()
    }

    /// Whether the task was in a dead loop: one call (the same tool with the same arguments,
    /// keys in any order) chosen three times or more, or the round limit reached. Counted from
    /// the calls themselves, so both loops are judged by the same rule whatever their own
    /// repeat handling.
    pub fn is_dead_loop(&self) -> bool {
        if self.stop_reason == "max_rounds" {
            return true;
        }
        let mut times: HashMap<String, usize> = HashMap::new();
        self.tool_calls.iter().any(|c| {
            let n = times
                .entry(format!(
                    "{} {}",
                    c.tool,
                    crate::agent::canonical_json(&c.args)
                ))
                .or_insert(0);
            *n += 1;
            *n >= 3
        })
    }

    /// The output line of an agent result.
    pub fn from_result(id: &str, r: &crate::agent::AgentResult, loop_name: &str) -> Self {
        OutputLine {
            id: id.to_string(),
            answer: r.answer.clone(),
            stop_reason: r.stop_reason.as_str().to_string(),
            rounds: r.rounds,
            tool_calls: r
                .tool_calls
                .iter()
                .map(|c| CallLine {
                    tool: c.tool.clone(),
                    args: c.args.clone(),
                    ok: c.ok,
                    valid: c.valid,
                    error: c.error.clone(),
                })
                .collect(),
            prompt_tokens: r.prompt_tokens,
            generated_tokens: r.generated_tokens,
            forced_tokens: r.forced_tokens,
            latency_ms: r.latency_ms,
            decode_ms: r.decode_ms,
            mask_ms: r.mask_ms,
            dead_loops: r.dead_loops,
            r#loop: loop_name.to_string(),
            error: r.error.clone(),
        }
    }
}

/// All numbers in `text` (thousands separators dropped).
fn numbers(text: &str) -> Vec<f64> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"-?\d[\d,]*(?:\.\d+)?").expect("the number pattern is valid")
    });
    re.find_iter(text)
        .filter_map(|m| m.as_str().replace(',', "").parse::<f64>().ok())
        .collect()
}

/// Whether `answer` passes: it contains one of `expect`, case-insensitively; an expected
/// value that is a number matches any number in the answer equal to it ("391.0" matches
/// "391", "1,089" matches "1089"). No expectations: never passes.
pub fn matches(answer: &str, expect: &[String]) -> bool {
    let lower = answer.to_lowercase();
    let found = numbers(answer);
    expect.iter().any(|e| {
        let e = e.trim();
        match e.replace(',', "").parse::<f64>() {
            Ok(x) => found
                .iter()
                .any(|y| (x - y).abs() <= 1e-9 * x.abs().max(1.0)),
            Err(_) => !e.is_empty() && lower.contains(&e.to_lowercase()),
        }
    })
}

/// The metrics of one loop over a set of tasks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// Tasks scored.
    pub tasks: usize,
    /// Fraction of tasks whose answer matched (0..1).
    pub success_rate: f64,
    /// Fraction of tool-call attempts (steps that named a tool, or that could not be read
    /// and were not meant as the final answer) that were well-formed and schema-valid.
    pub valid_call_rate: f64,
    /// Fraction of tool calls that returned an observation.
    pub tool_success_rate: f64,
    /// Tool-call attempts in all.
    pub tool_calls: usize,
    /// Mean rounds per task.
    pub avg_rounds: f64,
    /// Mean latency per task, ms.
    pub avg_latency_ms: f64,
    /// 95th-percentile latency, ms.
    pub p95_latency_ms: f64,
    /// Fraction of tasks in a dead loop ([`OutputLine::is_dead_loop`]): one call chosen three
    /// times or more, or the round limit hit.
    pub dead_loop_rate: f64,
    /// Mean prompt tokens per task.
    pub avg_prompt_tokens: f64,
    /// Mean generated tokens per task.
    pub avg_generated_tokens: f64,
    /// Forced tokens as a share of generated tokens.
    pub forced_share: f64,
    /// Time computing the constraints' token masks as a share of decode time.
    pub mask_share: f64,
    /// How many tasks stopped for each reason.
    pub stop_reasons: BTreeMap<String, usize>,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl Metrics {
    /// Computes the metrics of `results`, each with the task it answers.
    pub fn compute(results: &[(&Task, &OutputLine)]) -> Metrics {
        let n = results.len();
        let mut m = Metrics {
            tasks: n,
            ..Metrics::default()
        };
        if n == 0 {
            return m;
        }
        let passed = results
            .iter()
            .filter(|(t, o)| matches(&o.answer, &t.expect))
            .count();
        let calls: Vec<&CallLine> = results.iter().flat_map(|(_, o)| &o.tool_calls).collect();
        m.tool_calls = calls.len();
        m.success_rate = ratio(passed, n);
        m.valid_call_rate = if calls.is_empty() {
            1.0
        } else {
            ratio(calls.iter().filter(|c| c.valid).count(), calls.len())
        };
        m.tool_success_rate = if calls.is_empty() {
            1.0
        } else {
            ratio(calls.iter().filter(|c| c.ok).count(), calls.len())
        };
        let nf = n as f64;
        m.avg_rounds = results.iter().map(|(_, o)| o.rounds as f64).sum::<f64>() / nf;
        let mut lat: Vec<f64> = results.iter().map(|(_, o)| o.latency_ms as f64).collect();
        m.avg_latency_ms = lat.iter().sum::<f64>() / nf;
        lat.sort_by(|a, b| a.total_cmp(b));
        let idx = ((0.95 * nf).ceil() as usize).clamp(1, n) - 1;
        m.p95_latency_ms = lat[idx];
        m.dead_loop_rate = ratio(results.iter().filter(|(_, o)| o.is_dead_loop()).count(), n);
        let gen: usize = results.iter().map(|(_, o)| o.generated_tokens).sum();
        m.avg_prompt_tokens = results
            .iter()
            .map(|(_, o)| o.prompt_tokens as f64)
            .sum::<f64>()
            / nf;
        m.avg_generated_tokens = gen as f64 / nf;
        m.forced_share = ratio(results.iter().map(|(_, o)| o.forced_tokens).sum(), gen);
        let decode: f64 = results.iter().map(|(_, o)| o.decode_ms).sum();
        if decode > 0.0 {
            m.mask_share = results.iter().map(|(_, o)| o.mask_ms).sum::<f64>() / decode;
        }
        for (_, o) in results {
            *m.stop_reasons.entry(o.stop_reason.clone()).or_insert(0) += 1;
        }
        m
    }

    /// Metrics for all results and for each `kind` tag.
    pub fn by_kind(results: &[(&Task, &OutputLine)]) -> (Metrics, BTreeMap<String, Metrics>) {
        let all = Metrics::compute(results);
        let mut kinds: BTreeMap<String, Vec<(&Task, &OutputLine)>> = BTreeMap::new();
        for &(t, o) in results {
            kinds
                .entry(t.kind.clone().unwrap_or_else(|| "untagged".into()))
                .or_default()
                .push((t, o));
        }
        let by = kinds
            .into_iter()
            .map(|(k, v)| (k, Metrics::compute(&v)))
            .collect();
        (all, by)
    }
}

/// The evaluation of one loop: overall metrics and per kind.
#[derive(Debug, Clone, Serialize)]
pub struct LoopReport {
    /// `cairn` or `naive`.
    pub r#loop: String,
    /// Over all tasks.
    #[serde(flatten)]
    pub metrics: Metrics,
    /// Per `kind` tag.
    pub by_kind: BTreeMap<String, Metrics>,
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// A markdown report: one column per loop, one row per metric, then success by kind.
pub fn report_markdown(title: &str, loops: &[LoopReport]) -> String {
    let mut s = format!("# {title}\n\n| metric |");
    for l in loops {
        s.push_str(&format!(" {} |", l.r#loop));
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(loops.len()));
    s.push('\n');
    type Row = (&'static str, fn(&Metrics) -> String);
    let rows: [Row; 13] = [
        ("tasks", |m| m.tasks.to_string()),
        ("success rate", |m| pct(m.success_rate)),
        ("schema-valid tool calls", |m| pct(m.valid_call_rate)),
        ("tool-call success", |m| pct(m.tool_success_rate)),
        ("tool calls", |m| m.tool_calls.to_string()),
        ("average rounds", |m| format!("{:.2}", m.avg_rounds)),
        ("dead-loop rate", |m| pct(m.dead_loop_rate)),
        ("average latency", |m| {
            format!("{:.1} s", m.avg_latency_ms / 1000.0)
        }),
        ("p95 latency", |m| {
            format!("{:.1} s", m.p95_latency_ms / 1000.0)
        }),
        ("prompt tokens per task", |m| {
            format!("{:.0}", m.avg_prompt_tokens)
        }),
        ("generated tokens per task", |m| {
            format!("{:.0}", m.avg_generated_tokens)
        }),
        ("forced-token share", |m| pct(m.forced_share)),
        ("constraint mask time, share of decode", |m| {
            format!("{:.2}%", m.mask_share * 100.0)
        }),
    ];
    for (name, f) in rows {
        s.push_str(&format!("| {name} |"));
        for l in loops {
            s.push_str(&format!(" {} |", f(&l.metrics)));
        }
        s.push('\n');
    }
    s.push_str("| stop reasons |");
    for l in loops {
        let parts: Vec<String> = l
            .metrics
            .stop_reasons
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        s.push_str(&format!(" {} |", parts.join(", ")));
    }
    s.push_str("\n\n## Success rate by kind\n\n| kind |");
    for l in loops {
        s.push_str(&format!(" {} |", l.r#loop));
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(loops.len()));
    s.push('\n');
    let kinds: std::collections::BTreeSet<&String> =
        loops.iter().flat_map(|l| l.by_kind.keys()).collect();
    for k in kinds {
        s.push_str(&format!("| {k} |"));
        for l in loops {
            match l.by_kind.get(k) {
                Some(m) => s.push_str(&format!(
                    " {} of {} ({}) |",
                    (m.success_rate * m.tasks as f64).round(),
                    m.tasks,
                    pct(m.success_rate)
                )),
                None => s.push_str(" – |"),
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_line_drops_a_huge_line_without_holding_it_and_reads_on() {
        let mut text = b"first\r\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 10));
        text.extend(b"\ncaf\xe9\n\nlast");
        let mut input = std::io::BufReader::with_capacity(4096, &text[..]);
        let mut lines = Vec::new();
        while let Some(l) = next_line(&mut input).unwrap() {
            lines.push(l);
        }
        assert_eq!(lines[0], Ok("first".to_string()));
        assert!(lines[1]
            .as_ref()
            .unwrap_err()
            .contains("limited to 1048576 bytes"));
        assert!(lines[2].as_ref().unwrap_err().contains("not valid UTF-8"));
        assert_eq!(lines[3], Ok(String::new()));
        assert_eq!(lines[4], Ok("last".to_string()));
        assert_eq!(lines.len(), 5);
    }

    fn e(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn numbers_match_numerically_and_words_case_insensitively() {
        assert!(matches("The result is 391.0", &e(&["391"])));
        assert!(matches("391", &e(&["391.0"])));
        assert!(matches("It costs 1,089 euros", &e(&["1089"])));
        assert!(matches("It costs 89.90 euros", &e(&["89.9"])));
        assert!(!matches("3910", &e(&["391"])));
        assert!(!matches("39.1", &e(&["391"])));
        assert!(matches("Jonas Weber lives there", &e(&["jonas weber"])));
        assert!(matches("a 2-year warranty", &e(&["3-year", "2-year"])));
        assert!(!matches("anything", &[]));
        assert!(matches("minus -5 degrees", &e(&["-5"])));
    }

    #[test]
    fn a_dead_loop_is_one_call_three_times_or_the_round_limit() {
        let line = |calls: &str, stop: &str| -> OutputLine {
            serde_json::from_str(&format!(
                r#"{{"id":"x","answer":"","stop_reason":"{stop}","rounds":4,"tool_calls":[{calls}],"prompt_tokens":1,"generated_tokens":1,"latency_ms":1}}"#
            ))
            .unwrap()
        };
        let a = r#"{"tool":"sql","args":{"query":"q","n":1},"ok":true}"#;
        let a_reordered = r#"{"tool":"sql","args":{"n":1,"query":"q"},"ok":true}"#;
        let b = r#"{"tool":"calculator","args":{"expression":"1"},"ok":false}"#;
        // Two repeats of two different calls are not a loop; one call three times is, with
        // other calls between and keys in another order.
        assert!(!line(&format!("{a},{a},{b},{b}"), "final_answer").is_dead_loop());
        assert!(line(&format!("{a},{b},{a_reordered},{b},{a}"), "final_answer").is_dead_loop());
        assert!(line("", "max_rounds").is_dead_loop());
        assert!(!line("", "failures").is_dead_loop());
    }

    #[test]
    fn metrics_of_a_hand_made_results_file() {
        let (tasks, bad) = parse_tasks(concat!(
            "{\"id\": \"a\", \"task\": \"17*23\", \"expect\": [\"391\"], \"kind\": \"calc\"}\n",
            "{\"id\": \"b\", \"task\": \"price\", \"expect\": [\"89.9\"], \"kind\": \"sql\"}\n",
            "{\"id\": \"c\", \"task\": \"loop\", \"expect\": [\"x\"], \"kind\": \"sql\"}\n",
            "{\"id\": \"d\", \"task\": \"bad\", \"expect\": [\"y\"]}\n"
        ));
        assert!(bad.is_empty());
        let results = [
            r#"{"id":"a","answer":"391.0","stop_reason":"final_answer","rounds":2,"tool_calls":[{"tool":"calculator","args":{},"ok":true,"valid":true}],"prompt_tokens":100,"generated_tokens":40,"forced_tokens":10,"latency_ms":1000}"#,
            r#"{"id":"b","answer":"It is 89.90 euros","stop_reason":"final_answer","rounds":3,"tool_calls":[{"tool":"sql","args":{},"ok":false,"valid":true,"error":"no such table"},{"tool":"sql","args":{},"ok":true,"valid":true}],"prompt_tokens":200,"generated_tokens":60,"forced_tokens":20,"latency_ms":2000}"#,
            r#"{"id":"c","answer":"","stop_reason":"max_rounds","rounds":8,"tool_calls":[{"tool":"sql","args":{},"ok":true}],"prompt_tokens":300,"generated_tokens":100,"forced_tokens":30,"latency_ms":9000,"dead_loops":1}"#,
            r#"{"id":"d","answer":"","stop_reason":"failures","rounds":1,"tool_calls":[{"tool":"","args":"oops","ok":false,"valid":false,"error":"not JSON"}],"prompt_tokens":400,"generated_tokens":0,"latency_ms":500,"loop":"naive"}"#,
        ];
        let lines: Vec<OutputLine> = results
            .iter()
            .map(|r| serde_json::from_str(r).unwrap())
            .collect();
        let pairs: Vec<(&Task, &OutputLine)> =
            tasks.iter().map(|(_, t)| t).zip(lines.iter()).collect();
        let (m, by) = Metrics::by_kind(&pairs);
        assert_eq!(m.tasks, 4);
        assert_eq!(m.success_rate, 0.5);
        assert_eq!(m.tool_calls, 5);
        assert_eq!(m.valid_call_rate, 0.8);
        assert_eq!(m.tool_success_rate, 0.6);
        assert_eq!(m.avg_rounds, 3.5);
        assert_eq!(m.avg_latency_ms, 3125.0);
        assert_eq!(m.p95_latency_ms, 9000.0);
        assert_eq!(m.dead_loop_rate, 0.25);
        assert_eq!(m.avg_prompt_tokens, 250.0);
        assert_eq!(m.avg_generated_tokens, 50.0);
        assert_eq!(m.forced_share, 0.3);
        assert_eq!(m.stop_reasons["final_answer"], 2);
        assert_eq!(by["sql"].tasks, 2);
        assert_eq!(by["sql"].success_rate, 0.5);
        assert_eq!(by["untagged"].tasks, 1);
        let md = report_markdown(
            "t",
            &[LoopReport {
                r#loop: "cairn".into(),
                metrics: m,
                by_kind: by,
            }],
        );
        assert!(md.contains("| success rate | 50% |"), "{md}");
        assert!(md.contains("| sql | 1 of 2 (50%) |"), "{md}");
    }

    #[test]
    fn task_files_report_bad_lines_with_their_numbers() {
        let text = "{\"id\": 1, \"task\": \"a\"}\nnot json\n\n{\"id\": \"1\", \"task\": \"dup\"}\n{\"task\": \"\"}\n{\"task\": \"b\", \"session\": \"s\"}\n";
        let (tasks, bad) = parse_tasks(text);
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].1.id, "1");
        assert_eq!(tasks[1].0, 6);
        assert_eq!(tasks[1].1.id, "line-6");
        assert_eq!(
            bad.iter().map(|b| b.line).collect::<Vec<_>>(),
            vec![2, 4, 5]
        );
        assert!(bad[1].error.contains("used by an earlier line"));
    }
}
