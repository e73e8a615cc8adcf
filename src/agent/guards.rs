//! The loop's guards for one task, kept apart from the round that consults them: the circuit
//! breaker (a tool that failed `--circuit-after` times in a row leaves the schema), the calls
//! the next steps may not make again (`--forbid-repeats`), the dead-loop rule (a call repeated
//! word for word is answered from its first result and turns its tool off; a result other
//! calls keep bringing back word for word turns it off too), the count of
//! failed rounds behind `--max-failures`, and the retry backoff.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::step::StepTool;
use crate::tools::{ErrorClass, ToolInfo};

/// The shortest result that, brought back word for word by another call of the same tool,
/// shows the model varying a call to no effect ([`Guards::same_result`]): passages or rows,
/// not a count of `0` that two different questions may well share.
pub(super) const SAME_RESULT_MIN_CHARS: usize = 100;

/// The first result of a call, kept to answer a repeat of it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    /// How many times the call was chosen.
    pub times: usize,
    /// What it returned (the result, or the error's observation text).
    pub observation: String,
    /// Whether it failed.
    pub failed: bool,
    /// Whether its arguments passed the tool's schema.
    pub valid: bool,
    /// The error's message, when it failed.
    pub error: Option<String>,
}

/// What the guards know of one task so far.
#[derive(Debug, Default)]
pub(super) struct Guards {
    /// Tools whose circuit is open: off for the rest of the task.
    open: HashSet<String>,
    /// Consecutive failures of each tool.
    failures: HashMap<String, usize>,
    /// Tools turned off because a call to them was repeated word for word: the model is stuck
    /// on that call, and cannot choose it a third time.
    benched: HashSet<String>,
    /// Canonical call (`tool {args}`) → its first result.
    seen: HashMap<String, Seen>,
    /// Calls the next steps may not make again, as their steps wrote them
    /// ([`super::step::call_text`]; see [`super::ForbidRepeats`]).
    forbidden: Vec<String>,
    /// Tool → each result it gave (at least [`SAME_RESULT_MIN_CHARS`] long) → the round it
    /// first came back in and how many times other calls brought it back since.
    results: HashMap<String, HashMap<String, (usize, usize)>>,
    /// Failed rounds in a row.
    failed_rounds: usize,
    /// The newest error, for the stop message.
    last_error: Option<String>,
}

impl Guards {
    /// The tools a step may call this round: none on the last one (only `final_answer`), else
    /// every tool whose circuit is closed and that is not benched.
    pub fn allowed(&self, infos: &[ToolInfo], last_round: bool) -> Vec<StepTool> {
        if last_round {
            return Vec::new();
        }
        infos
            .iter()
            .filter(|t| self.is_on(&t.name))
            .map(|t| StepTool::new(t.name.clone(), t.args_schema.clone()))
            .collect()
    }

    /// Whether `tool` may still be called this task (its circuit closed, not benched).
    pub fn is_on(&self, tool: &str) -> bool {
        !self.open.contains(tool) && !self.benched.contains(tool)
    }

    /// A repeat of an earlier call (`key`, to `tool`): counts it, benches the tool and returns
    /// the first result; `None` for a new call.
    pub fn repeat(&mut self, key: &str, tool: &str) -> Option<Seen> {
        let seen = self.seen.get_mut(key)?;
        seen.times += 1;
        let seen = seen.clone();
        self.benched.insert(tool.to_string());
        Some(seen)
    }

    /// A new call's result that an earlier, different call of the same `tool` already gave
    /// word for word: counts it and returns (the round it first came back in, how many times
    /// other calls have brought it back since); `None` for a result not seen before, or one
    /// too short to tell a futile call by (`0`, one row of a count).
    pub fn same_result(
        &mut self,
        tool: &str,
        observation: &str,
        round: usize,
    ) -> Option<(usize, usize)> {
        if observation.chars().count() < SAME_RESULT_MIN_CHARS {
            return None;
        }
        let seen = self
            .results
            .entry(tool.to_string())
            .or_default()
            .entry(observation.to_string())
            .or_insert((round, 0));
        if seen.0 == round {
            return None;
        }
        seen.1 += 1;
        Some(*seen)
    }

    /// Forbids the call written as `text` in the steps that follow: the step grammar will not
    /// let the model make it again, while the tool stays on for other calls.
    pub fn forbid(&mut self, text: String) {
        if !self.forbidden.contains(&text) {
            self.forbidden.push(text);
        }
    }

    /// The calls the next step may not make.
    pub fn forbidden(&self) -> &[String] {
        &self.forbidden
    }

    /// Turns `tool` off for the rest of the task (an action offered once per task).
    pub fn bench(&mut self, tool: &str) {
        self.benched.insert(tool.to_string());
    }

    /// Keeps a new call's result for its repeats. A transient failure is not kept: the same
    /// call may well work next time.
    pub fn remember(&mut self, key: String, seen: Seen, class: Option<ErrorClass>) {
        if class != Some(ErrorClass::Transient) {
            self.seen.insert(key, seen);
        }
    }

    /// A call that worked: the failed-round count starts again, and so does the tool's own
    /// (unless it was a repeat answered from the cache).
    pub fn succeeded(&mut self, tool: &str, cached: bool) {
        self.failed_rounds = 0;
        if !cached {
            self.failures.insert(tool.to_string(), 0);
        }
    }

    /// A call that failed. A repeat is the dead-loop rule's to end, not a new failure
    /// (counting it too would stop the task with `failures` before the model could answer); a
    /// fatal error ends the task anyway. Returns the failure count when this one opened the
    /// tool's circuit.
    pub fn failed(
        &mut self,
        tool: &str,
        class: Option<ErrorClass>,
        cached: bool,
        error: Option<String>,
        threshold: usize,
    ) -> Option<usize> {
        self.last_error = error;
        if cached {
            return None;
        }
        self.failed_rounds += 1;
        if class == Some(ErrorClass::Fatal) {
            return None;
        }
        let n = self.failures.entry(tool.to_string()).or_insert(0);
        *n += 1;
        let n = *n;
        (n >= threshold && self.open.insert(tool.to_string())).then_some(n)
    }

    /// A round whose step could not be used.
    pub fn bad_step(&mut self, why: String) {
        self.failed_rounds += 1;
        self.last_error = Some(why);
    }

    /// Whether `max` rounds in a row have failed.
    pub fn exhausted(&self, max: usize) -> bool {
        self.failed_rounds >= max
    }

    /// The newest error, if any.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
}

/// The wait before retry number `attempt` (1 = the first retry): `base`, doubling each time,
/// saturating instead of overflowing.
pub(super) fn backoff(base: Duration, attempt: usize) -> Duration {
    let factor = 2u32.saturating_pow(u32::try_from(attempt.saturating_sub(1)).unwrap_or(u32::MAX));
    base.checked_mul(factor).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(name: &str) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: String::new(),
            args_schema: json!({"type": "object"}),
        }
    }

    #[test]
    fn a_circuit_opens_once_after_threshold_failures_in_a_row() {
        let mut g = Guards::default();
        let infos = [info("sql"), info("calculator")];
        assert_eq!(
            g.failed("sql", Some(ErrorClass::InvalidInput), false, None, 2),
            None
        );
        g.succeeded("sql", false);
        assert_eq!(
            g.failed("sql", Some(ErrorClass::InvalidInput), false, None, 2),
            None
        );
        assert_eq!(
            g.failed("sql", Some(ErrorClass::InvalidInput), false, None, 2),
            Some(2)
        );
        assert_eq!(
            g.failed("sql", Some(ErrorClass::InvalidInput), false, None, 2),
            None
        );
        let names: Vec<String> = g
            .allowed(&infos, false)
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["calculator"]);
        assert!(g.allowed(&infos, true).is_empty());
    }

    #[test]
    fn a_repeat_benches_its_tool_and_is_not_a_new_failure() {
        let mut g = Guards::default();
        let seen = Seen {
            times: 1,
            observation: "boom".into(),
            failed: true,
            valid: true,
            error: Some("boom".into()),
        };
        g.remember("sql {}".into(), seen, Some(ErrorClass::InvalidInput));
        assert!(g.repeat("sql {\"q\":1}", "sql").is_none());
        let r = g.repeat("sql {}", "sql").unwrap();
        assert_eq!(r.times, 2);
        assert!(g.allowed(&[info("sql")], false).is_empty());
        g.failed("sql", Some(ErrorClass::InvalidInput), true, r.error, 1);
        assert!(!g.exhausted(1));
        // A transient failure is not remembered: the same call may be tried again.
        g.remember(
            "calculator {}".into(),
            Seen {
                times: 1,
                observation: String::new(),
                failed: true,
                valid: true,
                error: None,
            },
            Some(ErrorClass::Transient),
        );
        assert!(g.repeat("calculator {}", "calculator").is_none());
    }

    #[test]
    fn backoff_doubles_and_saturates() {
        let base = Duration::from_millis(200);
        assert_eq!(backoff(base, 1), base);
        assert_eq!(backoff(base, 3), Duration::from_millis(800));
        assert_eq!(backoff(Duration::MAX, 2), Duration::MAX);
        assert_eq!(backoff(Duration::from_secs(u64::MAX / 2), 3), Duration::MAX);
        assert!(backoff(base, usize::MAX) > Duration::from_secs(86_400 * 365));
    }
}

/// The fewest consecutive words of cairn's own message an answer must repeat to be taken for
/// a copy of it.
const ECHO_WORDS: usize = 8;

/// cairn's own messages in a tool's observation: the `[note: …]` of the guards, and an error's
/// `error (…)` and `hint:` lines.
fn loop_messages(observation: &str) -> Vec<&str> {
    let mut out: Vec<&str> = observation
        .lines()
        .filter(|l| l.starts_with("error (") || l.starts_with("hint: "))
        .collect();
    let mut rest = observation;
    while let Some(at) = rest.find("[note: ") {
        let note = &rest[at..];
        let end = note.find(']').map_or(note.len(), |e| e + 1);
        out.push(&note[..end]);
        rest = &note[end..];
    }
    out
}

/// The lowercase words (letters and digits) of `s`.
fn plain_words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The words of cairn's own message (see [`loop_messages`]) in `observations` that `answer`
/// repeats, when it repeats at least [`ECHO_WORDS`] of them in a row: the small models answer
/// "The search tool is turned off for the rest of this task…" or with an error's text.
pub(super) fn repeated_message(answer: &str, observations: &[&str]) -> Option<String> {
    let said = plain_words(answer);
    if said.len() < ECHO_WORDS {
        return None;
    }
    let mut best: Option<Vec<String>> = None;
    for m in observations.iter().flat_map(|o| loop_messages(o)) {
        let words = plain_words(m);
        for i in 0..said.len() {
            for j in 0..words.len() {
                let n = said[i..]
                    .iter()
                    .zip(&words[j..])
                    .take_while(|(a, b)| a == b)
                    .count();
                if n >= ECHO_WORDS && best.as_ref().is_none_or(|b| n > b.len()) {
                    best = Some(said[i..i + n].to_vec());
                }
            }
        }
    }
    best.map(|w| w.join(" "))
}

#[cfg(test)]
mod echo_tests {
    use super::repeated_message;

    #[test]
    fn an_answer_that_repeats_a_note_or_an_error_is_found_and_data_is_not() {
        let obs = [
            "error (invalid_input): the search query `x IS NULL` is written like SQL\n\
             hint: search with a few plain words the documents would contain\n\
             [note: you already called search with these same arguments and it failed the same \
             way; search is turned off for the rest of this task. Use another tool, or give the \
             final_answer with what you know.]",
            "title | author\nStar Charts for Beginners | NULL",
        ];
        let echoed = repeated_message(
            "The search tool is turned off for the rest of this task. Use another tool.",
            &obs,
        );
        assert_eq!(
            echoed.as_deref(),
            Some("is turned off for the rest of this task use another tool")
        );
        assert!(repeated_message(
            "Search with a few plain words the documents would contain, please.",
            &obs
        )
        .is_some());
        // An answer from the data, or one that only shares a few words, is an answer.
        assert_eq!(
            repeated_message(
                "The science book with no author is Star Charts for Beginners.",
                &obs
            ),
            None
        );
        assert_eq!(
            repeated_message("The search found nothing for this task.", &obs),
            None
        );
    }
}
