//! The evidence check of a final answer: every number in it must appear in what the model was
//! shown (the task, the tools' results, the context before round 1, earlier turns, facts),
//! allowing for rounding. A number found nowhere was made up or computed in the model's head,
//! which is where the small models go wrong (a price never looked up, a sum never computed);
//! the loop then says which numbers, once per task, and lets the model look them up or compute
//! them before answering again. Beside it, the checks of what an answer rests on: amounts of
//! the task no call used, the other end of an order, a comparison no query made, an empty
//! result from a condition on a value no row holds ([`empty_conditions`]), a total answered
//! with its parts ([`listed_total`]), the row asked for answered with only its value
//! ([`selects_only_extremes`]); and the message for an answer that gives again what was sent
//! back ([`again_message`]).

use std::sync::OnceLock;

use crate::tools::holds_word;
use crate::tools::search::{CONTEXT_HEADING, NO_PASSAGE_HOLDS};
use crate::tools::sql::PARTIAL_SAMPLE;

/// The numbers written in `text`: runs of digits with an optional sign, thousands commas
/// (`1,234`) and a decimal part. A number glued to letters (`Q4`, `2nd`, `v1`) is part of a
/// word, not a quantity, and is left out.
pub fn numbers(text: &str) -> Vec<(String, f64)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit()
            || (i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i;
        while end < b.len() {
            let c = b[end];
            let digit_after = b.get(end + 1).is_some_and(u8::is_ascii_digit);
            if c.is_ascii_digit() || ((c == b',' || c == b'.') && digit_after) {
                end += 1;
            } else {
                break;
            }
        }
        i = end;
        if b.get(end).is_some_and(|c| c.is_ascii_alphabetic()) {
            continue;
        }
        let raw = &text[start..end];
        let negative = start > 0 && b[start - 1] == b'-';
        let clean: String = raw.chars().filter(|&c| c != ',').collect();
        if let Ok(v) = clean.parse::<f64>() {
            out.push((raw.to_string(), if negative { -v } else { v }));
        }
    }
    out
}

/// [`numbers`] with where each is written in `text` (the byte it starts at).
fn numbers_at(text: &str) -> Vec<(String, f64, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    for (raw, v) in numbers(text) {
        if let Some(i) = text[at..].find(raw.as_str()).map(|i| at + i) {
            at = i + raw.len();
            out.push((raw, v, i));
        }
    }
    out
}

/// Decimal places written in `raw` (`"28.90"` → 2).
fn decimals(raw: &str) -> i32 {
    raw.rsplit_once('.')
        .map_or(0, |(_, d)| d.len().min(12) as i32)
}

/// Whether `x` (written `raw`) is `e`, or `e` rounded to the places `raw` shows.
fn same(raw: &str, x: f64, e: f64) -> bool {
    let (x, e) = (x.abs(), e.abs());
    if (x - e).abs() <= 1e-9 * e.max(1.0) {
        return true;
    }
    let scale = 10f64.powi(decimals(raw));
    ((e * scale).round() - x * scale).abs() < 1e-6
}

/// The numbers of `answer` that appear in none of `evidence` (by value, allowing rounding),
/// in the order written, each once.
pub fn unsupported(answer: &str, evidence: &[&str]) -> Vec<String> {
    unsupported_by(answer, &known_values(evidence))
}

/// [`unsupported`] against the numbers `known` of the evidence.
fn unsupported_by(answer: &str, known: &[f64]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (raw, x) in numbers(answer) {
        if !known.iter().any(|&e| same(&raw, x, e)) && !out.contains(&raw) {
            out.push(raw);
        }
    }
    out
}

/// The factors a percent in `text` stands for: `15%` (or `15 percent`) is 0.15 of a whole,
/// and 0.85 or 1.15 of it after taking it off or adding it. Regression: `48 * (1 - 0.15)` for
/// "with a 15% discount" was taken for a made-up input and its result for no evidence.
fn percent_factors(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for (raw, v) in numbers(text) {
        let mut at = 0;
        while let Some(i) = text[at..].find(raw.as_str()) {
            let after = text[at + i + raw.len()..].trim_start();
            if after.starts_with('%') || after.to_ascii_lowercase().starts_with("percent") {
                let f = v / 100.0;
                out.extend([f, 1.0 - f, 1.0 + f]);
                break;
            }
            at += i + raw.len();
        }
    }
    out
}

/// Numbers a calculator expression may use without finding them anywhere: small counts and
/// the usual units of time and percent (`half` is `/ 2`, `15%` is `/ 100`).
fn is_common_constant(x: f64) -> bool {
    (x.fract() == 0.0 && (0.0..=12.0).contains(&x))
        || [100.0, 1000.0, 60.0, 24.0, 365.0, 52.0, 30.0].contains(&x)
}

/// What a final answer rests on, and what it does not.
#[derive(Debug, Default, PartialEq)]
pub struct Check {
    /// Numbers of the answer found in no evidence.
    pub unsupported: Vec<String>,
    /// Numbers that calculator expressions used but that appear in no evidence before them
    /// (made up, like a price never looked up): those calls' results are not evidence.
    pub ungrounded_inputs: Vec<String>,
    /// The arithmetic the answer (or the thought, see [`check_with_thought`]) shows that the
    /// calculator confirmed (`37 * 24` of `37 * 24 = 888`): its amounts were used as much as a
    /// calculator call's.
    pub shown: Vec<String>,
}

/// Checks `answer` against `base` (the task, its context, earlier turns, facts) and the
/// rounds in order, each as (the calculator expression when the round was a calculator call,
/// its observation). A calculator result counts as evidence only when the numbers of its
/// expression do (or are [`is_common_constant`]s).
pub fn check(answer: &str, base: &[&str], rounds: &[(Option<&str>, &str)]) -> Check {
    check_with_thought(answer, "", base, rounds)
}

/// [`check`], where the arithmetic the step's `thought` shows counts as the answer's own:
/// "30 euros * 2 days = 60 euros" in the thought, with 30 and 2 in the evidence, gives 60.
/// Regression: asked what a courtesy car costs for 2 days, the model answered 60 euros
/// (right) with that product in its thought, was told 60 appeared nowhere, and multiplied it
/// by 2 again.
pub fn check_with_thought(
    answer: &str,
    thought: &str,
    base: &[&str],
    rounds: &[(Option<&str>, &str)],
) -> Check {
    let mut out = Check::default();
    let mut evidence: Vec<&str> = base.to_vec();
    for (expr, obs) in rounds {
        match expr {
            Some(e) => {
                let made_up: Vec<String> = unsupported(e, &evidence)
                    .into_iter()
                    .filter(|raw| {
                        let v: f64 = raw.replace(',', "").parse().unwrap_or(f64::NAN);
                        !is_common_constant(v)
                    })
                    .collect();
                if made_up.is_empty() {
                    evidence.push(obs);
                } else {
                    for m in made_up {
                        if !out.ungrounded_inputs.contains(&m) {
                            out.ungrounded_inputs.push(m);
                        }
                    }
                }
            }
            None => evidence.push(obs),
        }
    }
    let mut known = known_values(&evidence);
    let in_thought = shown_results(thought, &known);
    known.extend(in_thought.iter().map(|(_, v)| *v));
    let mut shown = shown_results(answer, &known);
    out.unsupported = unsupported_by(answer, &known)
        .into_iter()
        .filter(|raw| {
            let x: f64 = raw.replace(',', "").parse().unwrap_or(f64::NAN);
            !shown.iter().any(|&(_, v)| same(raw, x, v))
        })
        .collect();
    shown.extend(in_thought);
    out.shown = shown.into_iter().map(|(e, _)| e).collect();
    out
}

/// The most numbers a grounded answer's pattern lists ([`grounded_answer_pattern`]); with
/// more in the evidence the answer is decoded without it.
pub const MAX_GROUNDED_NUMBERS: usize = 1500;

/// How a final answer may write the numbers of `evidence` (what the model was told and
/// shown, and the tools' results, the calculator's included whatever its inputs) and the
/// values of the leading parts of the calculator's `expressions` (`21 * 22` of
/// `21 * 22 * 1.19`): each as the evidence writes it, and each value (a percent's factors
/// too) whole or rounded to one or two decimals, with and without thousands commas (`6510`,
/// `6,510`, `6.2`, `6.20`). Signs are not numbers' own: `-` is text before one. `None` when
/// the evidence holds more than [`MAX_GROUNDED_NUMBERS`] forms. Regression: an answer giving
/// the stock's value before VAT (462, the `21 * 22` of its calculation) beside the value with
/// VAT was decoded as "worth 4.00".
pub fn grounded_literals(evidence: &[&str], expressions: &[&str]) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut add = |s: String| {
        if !s.is_empty() && seen.insert(s.clone()) {
            out.push(s);
        }
    };
    for text in evidence {
        for (raw, _) in numbers(text) {
            add(raw);
        }
    }
    let parts = expressions.iter().flat_map(|e| {
        leading_parts(e)
            .into_iter()
            .filter_map(|p| crate::tools::calculator::evaluate(p).ok())
            .map(|v| v.as_f64())
    });
    for v in known_values(evidence).into_iter().chain(parts) {
        let v = v.abs();
        if !v.is_finite() || v >= 1e15 {
            continue;
        }
        for places in 0..=2usize {
            let fixed = format!("{v:.places$}");
            let trimmed = if fixed.contains('.') {
                fixed
                    .trim_end_matches('0')
                    .trim_end_matches('.')
                    .to_string()
            } else {
                fixed.clone()
            };
            for form in [fixed, trimmed] {
                add(with_thousands_commas(&form));
                add(form);
            }
        }
    }
    (out.len() <= MAX_GROUNDED_NUMBERS).then_some(out)
}

/// `number` (digits, maybe a decimal part) with commas between the thousands of its whole
/// part: `6510.5` → `6,510.5`.
fn with_thousands_commas(number: &str) -> String {
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (number, None),
    };
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{grouped}.{f}"),
        None => grouped,
    }
}

/// The pattern of a final answer whose every number is one of `literals` (see
/// [`grounded_literals`]): any text without digits, and numbers only as a whole literal, not
/// followed by another digit, nor by a `.` or `,` and a digit (so `6` of the literals does not
/// start `6,110`). The grammar then holds a number the model is sure of ("6,110", from its
/// thought) to one the evidence gives, as the sql grammar holds its names to the schema's.
pub fn grounded_answer_pattern(literals: &[String]) -> String {
    let alternatives: Vec<String> = literals.iter().map(|l| regex::escape(l)).collect();
    let n = format!("(?:{})", alternatives.join("|"));
    format!("^(?:[^0-9]|{n}(?:[^0-9.,]|[.,][^0-9]))*(?:{n}[.,]?)?$")
}

/// Every number of `evidence`, with the factors its percents stand for.
fn known_values(evidence: &[&str]) -> Vec<f64> {
    evidence
        .iter()
        .flat_map(|t| {
            numbers(t)
                .into_iter()
                .map(|(_, v)| v)
                .chain(percent_factors(t))
        })
        .collect()
}

/// The results of the arithmetic `answer` shows, checked with the calculator: in
/// `37 * 24 = 888`, 888 counts as evidence when it is the expression's value and every operand
/// is in `known`, a common constant, or an earlier such result. In a chain worked step by step,
/// `37 * 24 + 100 = 888 + 100 = 988`, a value may be that of a leading part of the expression
/// before it (`37 * 24`). Checking the answer's own arithmetic is what a calculator call would
/// have done; the answer is sent back only for what the arithmetic does not give. Regression:
/// the 0.5B answered `37 * 24 + 100 = 888 + 100 = 988`, was told 888 and 988 came from
/// nowhere, and answered `888 + 988 = 1876`.
fn shown_results(answer: &str, known: &[f64]) -> Vec<(String, f64)> {
    let mut results: Vec<(String, f64)> = Vec::new();
    for line in answer.lines() {
        let line = without_units(line);
        let parts: Vec<&str> = line.split('=').collect();
        for pair in parts.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            // The value must open what follows the `=` (after spaces, `$` or `\(`).
            let Some((raw, value)) = numbers(after).into_iter().next() else {
                continue;
            };
            let lead = &after[..after.find(raw.as_str()).unwrap_or(0)];
            if lead.chars().any(|c| c.is_alphanumeric()) {
                continue;
            }
            let Some(expr) = super::reason::arithmetic_tail(before) else {
                continue;
            };
            let grounded = numbers(&expr).iter().all(|&(_, x)| {
                is_common_constant(x.abs())
                    || known
                        .iter()
                        .chain(results.iter().map(|(_, v)| v))
                        .any(|&k| (k - x).abs() <= 1e-9 * k.abs().max(1.0))
            });
            let part = leading_parts(&expr).into_iter().find(|e| {
                crate::tools::calculator::evaluate(e).is_ok_and(|v| same(&raw, value, v.as_f64()))
            });
            if let (true, Some(part)) = (grounded, part) {
                results.push((part.to_string(), value));
            }
        }
    }
    results
}

/// `line` without the words of a unit between a number and the operator or `=` after it:
/// "20 euros per night * 6 nights = 120 euros" reads "20 * 6 = 120 euros", the arithmetic
/// the small models write in plain text. At most three words, letters only, are dropped.
fn without_units(line: &str) -> String {
    static UNIT: OnceLock<regex::Regex> = OnceLock::new();
    let unit = UNIT.get_or_init(|| {
        regex::Regex::new(r"(\d)(?:\s+[A-Za-z][A-Za-z']*){1,3}\s*([*/+=×÷-])")
            .expect("the pattern is valid")
    });
    // Twice: a unit's match ends on the operator, where the next number's unit may begin.
    let once = unit.replace_all(line, "$1 $2").into_owned();
    unit.replace_all(&once, "$1 $2").into_owned()
}

/// `expr` and each part of it that ends before an operator outside parentheses, longest first
/// (`37 * 24 + 100`, `37 * 24`, `37`).
fn leading_parts(expr: &str) -> Vec<&str> {
    let mut out = vec![expr];
    let mut depth = 0i32;
    let mut operand = false;
    for (i, c) in expr.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                operand = true;
            }
            '+' | '-' | '*' | '/' | '^' if depth == 0 && operand => {
                out.push(expr[..i].trim_end());
                operand = false;
            }
            c if c.is_ascii_digit() || c == '.' => operand = true,
            _ => {}
        }
    }
    out.sort_by_key(|e| std::cmp::Reverse(e.len()));
    out.dedup();
    out
}

/// The words of `note` split in two: those of the rows under a heading ending in
/// [`PARTIAL_SAMPLE`] (a few rows of a larger table, shown before the first round), row by
/// row, and those of every other line (passages, schemas, headings, the column-name line
/// under a heading, notes in parentheses).
fn split_sample(note: &str) -> (Vec<Vec<String>>, Vec<String>) {
    let (mut sample, mut rest) = (Vec::new(), Vec::new());
    let mut inside = false;
    let mut header = false;
    for line in note.lines() {
        if line.starts_with("-- ") {
            inside = line.ends_with(PARTIAL_SAMPLE);
            header = inside;
            rest.extend(words(line));
        } else if line.trim().is_empty() {
            inside = false;
        } else if header || !inside || line.starts_with('(') {
            // The column names under a heading, and notes in parentheses (`(ordered by …)`).
            header = false;
            rest.extend(words(line));
        } else {
            sample.push(words(line));
        }
    }
    (sample, rest)
}

/// The shortest word of a sample row that ties the row to a tool result holding it
/// ([`from_sample`]): shorter ones ("12", "dog") are shared by chance.
const LINK_CHARS: usize = 4;

/// The words of `text` of three characters or more, and its numbers of two digits or more
/// (`-` and `.` inside a word keep it whole: `2014-09-03`, `0.25`; a number's thousands
/// commas are dropped: `11,232` is `11232`). Regression: the answer "… is 11,232 euros" was
/// read as the words 11 and 232, and sent back as if its 11 came from a sample row (an
/// employee id).
fn words(text: &str) -> Vec<String> {
    let text = without_thousands_commas(text);
    text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '.' || c == '@'))
        .map(|w| w.trim_matches(|c: char| c == '-' || c == '.'))
        .filter(|w| {
            let n = w.chars().count();
            n >= 3 || (n == 2 && w.chars().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_string)
        .collect()
}

/// `text` with the commas between a digit and a group of three digits taken out, as
/// [`numbers`] reads them (`1,234,567` → `1234567`); other commas stay (`3,4` is two
/// numbers, `a,b` two words).
fn without_thousands_commas(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        let thousands = c == ','
            && i > 0
            && b[i - 1].is_ascii_digit()
            && b.len() >= i + 4
            && b[i + 1..i + 4].iter().all(u8::is_ascii_digit)
            && !b.get(i + 4).is_some_and(u8::is_ascii_digit);
        if !thousands {
            out.push(c);
        }
    }
    out
}

/// The words of `answer` that appear in a partial sample of a table shown before the first
/// round (see [`split_sample`]) and in none of `elsewhere` (the task, the rest of the context,
/// earlier turns, tool results). An answer built from three of a table's rows is a guess about
/// the whole table: asked for the oldest member, the 1.5B model named the oldest of the three
/// members it was shown. A row with a word (of [`LINK_CHARS`] or more) that one of `results`
/// (the tools' results) holds is no guess: the result points to it. Regression: asked which
/// employee was hired first, the model queried the earliest hire date only (2019-08-14) and
/// named the sampled employee with that date, rightly, and was sent back twice for it.
pub fn from_sample(
    answer: &str,
    notes: &[&str],
    elsewhere: &[&str],
    results: &[&str],
) -> Vec<String> {
    let (mut rows, mut other) = (Vec::new(), Vec::new());
    for n in notes {
        let (s, r) = split_sample(n);
        rows.extend(s);
        other.extend(r);
    }
    if rows.is_empty() {
        return Vec::new();
    }
    let found: Vec<String> = results
        .iter()
        .flat_map(|t| words(t))
        .filter(|w| w.chars().count() >= LINK_CHARS)
        .map(|w| w.to_lowercase())
        .collect();
    let (linked, guessed): (Vec<Vec<String>>, Vec<Vec<String>>) = rows
        .into_iter()
        .partition(|row| row.iter().any(|w| found.contains(&w.to_lowercase())));
    let sampled: Vec<String> = guessed.into_iter().flatten().collect();
    other.extend(linked.into_iter().flatten());
    other.extend(elsewhere.iter().flat_map(|t| words(t)));
    let other: Vec<String> = other.into_iter().map(|w| w.to_lowercase()).collect();
    let mut out: Vec<String> = Vec::new();
    for w in words(answer) {
        if sampled.contains(&w) && !other.contains(&w.to_lowercase()) && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// Words before a number that make it a label, not an amount: `order 1042`, `room 6`, `job 15`
/// (an amount comes before its noun: `15 jobs`). Regression: "Job 15 needs a courtesy car for
/// 3 days" gave the amount "15 needs", the answer of 90 euros (30 a day) was sent back as if
/// the 15 had been left out, and the model multiplied it by 3.
#[rustfmt::skip]
const LABELS: &[&str] = &[
    "order", "member", "customer", "invoice", "id", "number", "no", "room", "visit", "pet", "owner",
    "item", "product", "book", "ticket", "flight", "table", "row", "page", "chapter", "version",
    "step", "line", "level", "floor", "gate", "seat", "platform", "route", "bus", "account", "case",
    "branch", "code", "card", "question", "task", "issue", "part", "section", "figure", "grade",
    "class", "week", "day", "month", "year", "model", "zone", "unit", "lane", "track", "episode",
    "season", "volume", "vol", "article", "rule", "job", "booking", "reservation", "shipment",
    "delivery", "loan", "patient", "employee", "student", "course", "lesson", "session", "contract",
    "project", "request", "claim", "policy", "bill", "receipt", "batch", "lot", "trip", "tour",
    "event", "match", "game", "player", "team", "vehicle",
];

/// Words before a number that make it a bound of a condition, not an amount to compute with:
/// `orders below 100 euros`, `more than 5 items`.
const BOUNDS: &[&str] = &[
    "below",
    "above",
    "over",
    "under",
    "than",
    "least",
    "most",
    "within",
    "beyond",
    "exceeding",
];

/// Words after a number that make it a date or a time, not an amount: `3 March`, `9 am`.
const DATE_WORDS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "am",
    "pm",
    "o'clock",
];

/// The amounts a task gives: numbers written before a word (`6 nights`, `3 Helmet Pro`, `5 of
/// them`) or a percent (`15%`), as (how the task writes it, its value, whether a percent).
/// Left out: years, dates and times, labels (`order 1042`, `#7`), bounds (`below 100 euros`),
/// values in quoted code (`= 4`), and 0 and 1, which change nothing they multiply.
fn quantities(task: &str) -> Vec<(String, f64, bool)> {
    let mut out = Vec::new();
    for (raw, v, i) in numbers_at(task) {
        let at = i + raw.len();
        let before = &task[..i];
        let after = &task[at..];
        let percent = after.trim_start().starts_with('%')
            || after
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("percent");
        let word: String = after
            .strip_prefix(' ')
            .unwrap_or("")
            .chars()
            .take_while(|c| c.is_alphabetic() || *c == '\'')
            .collect();
        let next = word.to_lowercase();
        let prev = before
            .trim_end()
            .rsplit(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or("")
            .to_lowercase();
        let year = is_year(&raw, v);
        // A label (`order 1042`, `#7`), a bound (`orders below 100 euros`), or a value in
        // code the task quotes (`MONTH(d) = 4`).
        let label = LABELS.contains(&prev.as_str())
            || BOUNDS.contains(&prev.as_str())
            || before.trim_end().ends_with(['#', '-', '/', '=', '<', '>']);
        let amount = percent || (!next.is_empty() && !DATE_WORDS.contains(&next.as_str()));
        if amount
            && !year
            && !label
            && v != 0.0
            && v != 1.0
            && (percent || !after.starts_with([':', '/', '-']))
        {
            let shown = if percent {
                format!("{raw}%")
            } else {
                format!("{raw} {word}")
            };
            if !out
                .iter()
                .any(|(s, _, _): &(String, f64, bool)| *s == shown)
            {
                out.push((shown, v, percent));
            }
        }
    }
    out
}

/// The amounts the task gives (see [`quantities`]) that nothing the model did used, when its
/// `answer` gives a number: no tool call's arguments nor reasoning in `uses` holds
/// the amount (or, for a percent, its fraction or one less or more it), and no number of the
/// answer is the amount (or that fraction) times a number `seen` in the tools' results. "What does it cost to board a cat for 6 nights?"
/// answered "18 euros", the price of one night: the answer's number was in the documents, so
/// no other check saw that a step was left out. Regression for the last rule: "5 Trail Gloves
/// would cost 120 euros" (24 euros each, multiplied in the thought) was sent back, and the
/// model, told to compute from the 5, answered "<No answer>".
pub fn unused_quantities(task: &str, answer: &str, uses: &[&str], seen: &[&str]) -> Vec<String> {
    let qs = quantities(task);
    if qs.is_empty() {
        return Vec::new();
    }
    // Only an answer that gives a number: "Poodle, Beagle, Boxer" needs no calculation.
    // (One that only repeats the task's amount is checked too: "6 nights cost 18 euros"
    // repeats one, and a task may give the price it expects multiplied.)
    if numbers(answer).is_empty() {
        return Vec::new();
    }
    let used: Vec<f64> = uses
        .iter()
        .flat_map(|u| numbers(u).into_iter().map(|(_, v)| v))
        .collect();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    let given: Vec<f64> = numbers(answer).into_iter().map(|(_, v)| v).collect();
    let shown: Vec<f64> = seen
        .iter()
        .flat_map(|t| numbers(t).into_iter().map(|(_, v)| v))
        .collect();
    // Whether an answer's number is `q` times a shown number. Only a product: with division
    // too, "They cost 24 euros" (one glove's price, the step left out) passed as a stock of
    // 120 divided by the 5 gloves.
    let derived = |q: f64| {
        shown
            .iter()
            .any(|&x| given.iter().any(|&a| close(a, q * x)))
    };
    qs.into_iter()
        .filter(|(_, v, percent)| {
            let forms = if *percent {
                vec![*v, v / 100.0, 1.0 - v / 100.0, 1.0 + v / 100.0]
            } else {
                vec![*v]
            };
            !used.iter().any(|&u| forms.iter().any(|&f| close(u, f)))
                && !forms
                    .iter()
                    .skip(usize::from(*percent))
                    .any(|&f| derived(f))
        })
        .map(|(shown, _, _)| shown)
        .collect()
}

/// What the loop tells the model when the task's `amounts` went into no calculation (its next
/// round must call a tool: told it could answer again as it was, the model did, word for word).
pub fn unused_message(amounts: &[String]) -> String {
    let (list, it, them) = if amounts.len() == 1 {
        (format!("\"{}\"", amounts[0]), "it", "it")
    } else {
        (
            amounts
                .iter()
                .map(|a| format!("\"{a}\""))
                .collect::<Vec<_>>()
                .join(", "),
            "them",
            "them",
        )
    };
    format!(
        "[check: the task gives {list}, and no calculation used {it}. Compute the answer from \
         {them} now with a tool (the calculator; reason, for several steps), then give the \
         final_answer.]"
    )
}

/// What the loop tells the model when its answer rests on `values` seen only in sample rows.
pub fn sample_message(values: &[String]) -> String {
    format!(
        "[check: {} in your answer or calculations {} from the few sample rows shown before \
         the first step, not from the whole table. Query the table with the sql tool, then give \
         the final_answer again, based on the result.]",
        values.join(", "),
        if values.len() == 1 { "comes" } else { "come" }
    )
}

/// `message` (a `[check: …]` of [`check_message_with`]) with a word on the `values` of the
/// answer or its calculations that came from sample rows. Regression: "How much in
/// consultation fees is still unpaid?" answered at once with 48 (one sampled visit's fee) plus
/// a late fee; told only that the sum appeared nowhere, the model gave the same answer again.
pub fn with_sample_note(message: &str, values: &[String]) -> String {
    if values.is_empty() {
        return message.to_string();
    }
    let body = message.strip_suffix(']').unwrap_or(message);
    format!(
        "{body} {} {} from the few sample rows shown before the first step, not from the whole \
         table: query the table with the sql tool.]",
        values.join(", "),
        if values.len() == 1 { "comes" } else { "come" }
    )
}

/// What the loop tells the model when its answer holds `numbers` found nowhere, computed
/// from the `inputs` found nowhere.
pub fn check_message_with(numbers: &[String], inputs: &[String]) -> String {
    if inputs.is_empty() {
        return check_message(numbers);
    }
    format!(
        "[check: {} in your answer rests on {}, which {} in no tool result and not in the task. \
         Look {} up with the tools (or compute from numbers that appear), then give the final_answer again.]",
        numbers.join(", "),
        inputs.join(", "),
        if inputs.len() == 1 { "appears" } else { "appear" },
        if inputs.len() == 1 { "it" } else { "them" }
    )
}

/// Lines of a result quoted in [`again_message`], at most.
const QUOTED_LINES: usize = 12;

/// What the loop tells the model when a later answer gives again `values` that an earlier
/// check sent back and that no result shows (or that rest on the `inputs` of a calculation
/// found nowhere), quoting the `last` tool result (its first [`QUOTED_LINES`] lines) for the
/// answer to rest on.
pub fn again_message(values: &[String], inputs: &[String], last: Option<&str>) -> String {
    let mut out = format!(
        "[check: your answer gives again {}, as the answer sent back before",
        values.join(", ")
    );
    if inputs.is_empty() {
        out.push_str(&format!(
            ", and no tool result shows {}.",
            if values.len() == 1 { "it" } else { "them" }
        ));
    } else {
        out.push_str(&format!(
            "; it rests on {}, which {} in no tool result and not in the task.",
            inputs.join(", "),
            if inputs.len() == 1 {
                "appears"
            } else {
                "appear"
            }
        ));
    }
    if let Some(last) = last.map(str::trim).filter(|l| !l.is_empty()) {
        let lines: Vec<&str> = last.lines().collect();
        out.push_str(" The last tool result was:\n");
        out.push_str(&lines[..lines.len().min(QUOTED_LINES)].join("\n"));
        if lines.len() > QUOTED_LINES {
            out.push_str(&format!("\n(… {} more lines)", lines.len() - QUOTED_LINES));
        }
        out.push('\n');
    } else {
        out.push(' ');
    }
    out.push_str(
        "Give the final_answer from what the results show, not the answer sent back; if they \
         do not answer the task, call a tool that does.]",
    );
    out
}

/// What the loop tells the model when its answer holds `numbers` found nowhere.
pub fn check_message(numbers: &[String]) -> String {
    let list = numbers.join(", ");
    // (subject, its verb, object, "does"/"do") for one number or several.
    let (they, come, them, does) = if numbers.len() == 1 {
        ("it", "comes", "it", "does")
    } else {
        ("they", "come", "them", "do")
    };
    format!(
        "[check: {list} in your answer {does} not appear in the task or in any tool result. \
         If {they} {come} from arithmetic, compute {them} with the calculator; if from the data, look {them} up. \
         Then give the final_answer again, based on the results.]"
    )
}

/// The ends an order note of the sql tool names first (`(ordered by dob DESC: the latest
/// birth date first: the youngest first)`), each with the words an answer uses for the other
/// end. Over dates, "the longest" is the earliest ("our customer the longest": the first
/// date they came), "the shortest" the most recent.
const ORDER_ENDS: &[(&str, &[&str])] = &[
    ("youngest", &["oldest", "eldest"]),
    ("oldest", &["youngest"]),
    (
        "most recent",
        &["earliest", "oldest", "longest ago", "longest"],
    ),
    (
        "longest ago",
        &["most recent", "latest", "newest", "shortest"],
    ),
];

/// When `answer` names one end of an order (`oldest`) while the result it rests on, a query
/// cut by a `LIMIT` whose note says the other end comes first (`the youngest first`), shows
/// only that other end: the word of the answer and the end the result shows. Regression:
/// asked for the oldest member, the 1.5B model ordered by `dob DESC LIMIT 1`, was told the
/// youngest came first, and answered with a child born in 2016 as the oldest member.
pub fn order_contradiction(answer: &str, query: &str, result: &str) -> Option<(String, String)> {
    if !query.to_ascii_uppercase().contains("LIMIT") {
        return None;
    }
    let note = result.lines().find(|l| l.starts_with("(ordered by "))?;
    let first = note
        .strip_suffix(" first)")?
        .rsplit(": the ")
        .next()?
        .to_string();
    let has = |w: &str| holds_word(answer, w);
    let (_, other) = ORDER_ENDS.iter().find(|(end, _)| *end == first)?;
    if has(&first) {
        return None;
    }
    let said = other.iter().find(|w| has(w))?;
    Some((said.to_string(), first))
}

/// What the loop tells the model when its answer names the `said` end of an order and the
/// result it rests on shows the `shown` end first.
pub fn order_message(said: &str, shown: &str) -> String {
    format!(
        "[check: your answer names the {said}, but the result it rests on lists the {shown} \
         first and stops after its first rows: what it shows is the {shown}. Query again \
         ordered the other way (ASC for DESC, DESC for ASC), then give the final_answer from \
         that result.]"
    )
}

/// Words of a task that ask for one end of a comparison between rows ("Which customer has
/// spent the most?"). `most` and `least` count only where they are not "at most" and "at
/// least".
const SUPERLATIVES: &[&str] = &[
    "most", "least", "highest", "lowest", "largest", "smallest", "biggest", "greatest", "fewest",
    "oldest", "youngest", "newest", "latest", "earliest", "longest", "shortest", "cheapest",
    "dearest", "top", "maximum", "minimum",
];

/// The first word of `task` that asks for one end of a comparison (`most`, `oldest`), if any.
pub fn superlative(task: &str) -> Option<&'static str> {
    let lower = task.to_lowercase();
    SUPERLATIVES.iter().copied().find(|w| {
        lower.match_indices(w).any(|(i, _)| {
            let before = lower[..i].chars().next_back();
            let after = lower[i + w.len()..].chars().next();
            let whole = !before.is_some_and(char::is_alphanumeric)
                && !after.is_some_and(char::is_alphanumeric);
            whole && !lower[..i].trim_end().ends_with(" at") && !lower[..i].trim_end().eq("at")
        })
    })
}

/// Whether `query` compares rows: it orders them, groups them, or takes a maximum or
/// minimum (in a subquery too).
pub fn compares_rows(query: &str) -> bool {
    let q = query.to_ascii_uppercase();
    let words: Vec<&str> = q
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .any(|w| matches!(w, ["ORDER" | "GROUP", "BY"]))
        || words.iter().any(|w| matches!(*w, "MAX" | "MIN"))
}

/// Nouns after a superlative that name an amount, not a thing ("the highest price"): a task
/// asking for one of them is answered by a value.
const AMOUNT_NOUNS: &[&str] = &[
    "price",
    "cost",
    "amount",
    "fee",
    "fine",
    "value",
    "total",
    "number",
    "count",
    "sum",
    "weight",
    "age",
    "date",
    "year",
    "rate",
    "balance",
    "stock",
    "quantity",
    "salary",
    "score",
    "freight",
    "discount",
    "temperature",
    "time",
    "distance",
    "percentage",
    "share",
];

/// Whether `task` asks which row is at one end of a comparison (who, which one, "what is the
/// cheapest product") rather than for the value there ("what is the highest price").
pub fn asks_which(task: &str) -> bool {
    let lower = task.trim().to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    match words.first() {
        Some(&("who" | "whose" | "which")) => return true,
        Some(&"what") => {}
        _ => return false,
    }
    let Some(at) = words.iter().position(|w| SUPERLATIVES.contains(w)) else {
        return false;
    };
    // The noun phrase after it, up to a preposition: a thing unless a word names an amount
    // ("the largest order total").
    let phrase: Vec<&str> = words[at + 1..]
        .iter()
        .copied()
        .take_while(|w| !matches!(*w, "of" | "in" | "for" | "at" | "on" | "by" | "to" | "with"))
        .take(3)
        .collect();
    !phrase.is_empty()
        && !phrase.iter().any(|w| {
            let singular = w.strip_suffix('s').unwrap_or(w);
            AMOUNT_NOUNS.contains(w) || AMOUNT_NOUNS.contains(&singular)
        })
}

/// Whether `query` selects nothing but maxima and minima (`SELECT MIN(price) FROM products`):
/// the value at one end, not the row that holds it.
pub fn selects_only_extremes(query: &str) -> bool {
    let q = query.trim().to_ascii_uppercase();
    let Some(rest) = q.strip_prefix("SELECT") else {
        return false;
    };
    // The select list: up to the first FROM outside parentheses.
    let (mut depth, mut items, mut item, mut end) = (0i32, Vec::new(), String::new(), false);
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut item));
                continue;
            }
            _ => {}
        }
        if depth == 0 && c.is_whitespace() && rest[i..].trim_start().starts_with("FROM ") {
            end = true;
            break;
        }
        item.push(c);
    }
    items.push(item);
    end && items.iter().all(|it| {
        let it = it.trim();
        let it = it.split(" AS ").next().unwrap_or(it).trim();
        (it.starts_with("MIN(") || it.starts_with("MAX(")) && it.ends_with(')')
    })
}

/// What the loop tells the model when the task asks which row is the `word` one and the
/// query gave only the value at that end.
pub fn extreme_only_message(word: &str) -> String {
    format!(
        "[check: the task asks which one is the {word}, but your query returned only the value \
         (MIN or MAX), not the row that has it. Query the row itself (its name and the value, \
         ORDER BY the value with LIMIT 1), then give the final_answer naming it.]"
    )
}

/// What the loop tells the model when the task asks for the `word` of something and no query
/// of the task compared rows.
pub fn comparison_message(word: &str) -> String {
    format!(
        "[check: the task asks for the {word}, but no query so far compared the rows: the \
         results above are rows picked before any comparison, so they cannot show which is the \
         {word}. Query the table so that it compares them (ORDER BY the value with LIMIT 1, \
         or MAX/MIN, or GROUP BY with an aggregate and ORDER BY it), then give the \
         final_answer from that result.]"
    )
}

/// Words of a task that ask for one amount made of several: "the total freight", "how many
/// in all".
const TOTAL_WORDS: &[&str] = &[
    "total",
    "in total",
    "in all",
    "altogether",
    "combined",
    "sum",
];

/// Words of a task that ask for an amount per group or row ("the total of each category"),
/// where a list of amounts is the answer.
const PER_WORDS: &[&str] = &["each", "per", "every", "by", "for all", "list", "which"];

/// When `task` asks for a total and `answer` lists amounts instead: two or more numbers of
/// the answer (those the task gives left aside) stand in different rows of one of the
/// `results`, and the answer has no number of its own beside them (a sum it computed would
/// be one). Returns the amounts as the answer writes them. Regression: asked for "the total
/// freight charged on orders placed in March 2025", the 1.5B model queried the five orders'
/// freight and answered with the five amounts.
pub fn listed_total(task: &str, answer: &str, results: &[&str]) -> Option<Vec<String>> {
    if !TOTAL_WORDS.iter().any(|w| holds_word(task, w))
        || PER_WORDS.iter().any(|w| holds_word(task, w))
    {
        return None;
    }
    let given: Vec<f64> = numbers(task).into_iter().map(|(_, v)| v).collect();
    let mut amounts: Vec<(String, f64)> = Vec::new();
    for (raw, v) in numbers(answer) {
        if !given.contains(&v) && !amounts.iter().any(|(_, x)| *x == v) {
            amounts.push((raw, v));
        }
    }
    if amounts.len() < 2 {
        return None;
    }
    results.iter().rev().find_map(|result| {
        // The row of the result each amount stands in, by value, as the result writes it.
        let rows: Vec<Vec<f64>> = result
            .lines()
            .skip(1)
            .map(|l| numbers(l).into_iter().map(|(_, v)| v).collect())
            .collect();
        let row_of = |v: f64| rows.iter().position(|r| r.contains(&v));
        let found: Vec<usize> = amounts.iter().filter_map(|(_, v)| row_of(*v)).collect();
        let mut distinct = found.clone();
        distinct.sort_unstable();
        distinct.dedup();
        (found.len() == amounts.len() && distinct.len() >= 2)
            .then(|| amounts.iter().map(|(r, _)| r.clone()).collect())
    })
}

/// What the loop tells the model when the task asks for a total and its answer lists the
/// `amounts` it is made of.
pub fn listed_total_message(amounts: &[String]) -> String {
    format!(
        "[check: the task asks for one total, but your answer lists {} amounts ({}) instead of \
         adding them up. Add them with the calculator, or query their sum (SUM(...) over the \
         same rows), then give the final_answer with the total.]",
        amounts.len(),
        amounts.join(", ")
    )
}

/// Units an answer may give an amount per (`20 euros per night`), singular; the plural adds
/// an `s`. Each is also a span a task may ask the whole of (`for 3 nights`).
const RATE_UNITS: &[&str] = &[
    "night",
    "day",
    "hour",
    "minute",
    "week",
    "month",
    "year",
    "person",
    "adult",
    "child",
    "guest",
    "head",
    "item",
    "unit",
    "piece",
    "ticket",
    "visit",
    "lesson",
    "session",
    "meal",
    "room",
    "kg",
    "kilo",
    "litre",
    "liter",
    "bottle",
    "box",
    "pack",
    "seat",
    "copy",
    "km",
    "kilometre",
    "kilometer",
    "mile",
];

/// Words that make the unit after them a rate: `per night`, `a day`, `each hour`.
const RATE_WORDS: &[&str] = &["per", "a", "an", "each", "every"];

/// Words of a task that ask for a rate itself, whatever its unit: "the nightly rate", "the
/// price", "per person".
const ASKS_RATE: &[&str] = &[
    "per", "each", "every", "rate", "rates", "price", "prices", "tariff", "daily", "nightly",
    "hourly", "weekly", "monthly", "yearly", "annual", "apiece",
];

/// Words of a task that name a whole span or total: "for his stay", "in total".
const SPAN_WORDS: &[&str] = &[
    "stay",
    "stays",
    "trip",
    "holiday",
    "vacation",
    "total",
    "altogether",
    "whole",
    "entire",
    "overall",
    "all",
];

/// Whether a number written `raw` (value `v`) reads as a year: four digits from 1900 to 2100.
fn is_year(raw: &str, v: f64) -> bool {
    !raw.contains(['.', ',']) && raw.len() == 4 && (1900.0..=2100.0).contains(&v)
}

/// The amounts `answer` gives: its numbers, each with where it is written (start and end) and
/// its value, leaving out years and the numbers `task` gives.
fn answer_amounts(task: &str, answer: &str) -> Vec<(usize, usize, f64)> {
    let given: Vec<f64> = numbers(task).into_iter().map(|(_, v)| v).collect();
    numbers_at(answer)
        .into_iter()
        .filter(|(raw, v, _)| !is_year(raw, *v) && !given.contains(v))
        .map(|(raw, v, i)| (i, i + raw.len(), v))
        .collect()
}

/// An amount an answer gives for one unit of something, where the task asks for the whole.
#[derive(Debug, Clone, PartialEq)]
pub enum Rate {
    /// Written as a rate: `20 euros per night`, and its unit (`night`).
    Written {
        /// The rate as the answer writes it.
        rate: String,
        /// Its unit, singular.
        unit: String,
    },
    /// A value of a column of rates or prices in a table the model was shown (`Rate`,
    /// `Unit Price`, `price_per_night`).
    Column {
        /// The value as the answer writes it.
        value: String,
        /// The column's name.
        column: String,
    },
}

impl Rate {
    /// The rate as the trace shows it: `20 euros per night`, `249 (Rate)`.
    pub fn shown(&self) -> String {
        match self {
            Rate::Written { rate, .. } => rate.clone(),
            Rate::Column { value, column } => format!("{value} ({column})"),
        }
    }
}

/// When `answer` gives its one amount as a rate while `task` asks for the whole of a span:
/// the task names one (`his June stay`, `for 3 nights`, `in total`) and asks for no rate
/// (`per`, `each`, `rate`, `price`, `a night`). The amount is a rate when the answer writes it
/// as one (`20 euros per night`, `12 euros a day`, `9 €/hour`), or else when it is a value of
/// a column of rates or prices (`Rate`, `Unit Price`) in one of the tables of `seen` (the
/// tools' results, the context before round 1). Numbers of the answer that the task gives,
/// and years, are not amounts of the answer; an answer with a second amount may have worked
/// out the total, and is left alone. Regressions: "Tomás Ruiz brings his dog on his June
/// stay. What will the dog cost?" was answered "20 euros per night" (the documents' rate),
/// and "How much was the room for Sara Conti's April stay?" with the room's `Rate`, 249, both
/// with the stay's dates in the rows shown.
pub fn rate_for_total(task: &str, answer: &str, seen: &[&str]) -> Option<Rate> {
    if ASKS_RATE.iter().any(|w| holds_word(task, w)) {
        return None;
    }
    let amounts = answer_amounts(task, answer);
    let [(start, end, value)] = amounts.as_slice() else {
        return None;
    };
    // The task names a span: words of its own, or an amount of a unit (`for 3 nights`).
    let task_l = task.to_lowercase();
    let of_unit = |unit: Option<&str>| {
        numbers(&task_l).iter().any(|(n, _)| {
            task_l.match_indices(n.as_str()).any(|(i, _)| {
                let next = task_l[i + n.len()..]
                    .trim_start()
                    .split(|c: char| !c.is_alphanumeric())
                    .next()
                    .unwrap_or("");
                rate_unit(next).is_some_and(|u| unit.is_none_or(|w| w == u))
            })
        })
    };
    let span_words = SPAN_WORDS.iter().any(|w| holds_word(task, w));
    if let Some((unit, until)) = written_rate(answer, *end) {
        let span = span_words || of_unit(Some(unit));
        return (span && !task_l.contains(&format!("/{unit}"))).then(|| Rate::Written {
            rate: answer[*start..until].to_string(),
            unit: unit.to_string(),
        });
    }
    if !(span_words || of_unit(None)) {
        return None;
    }
    let column = seen.iter().find_map(|t| rate_column(*value, t))?;
    Some(Rate::Column {
        value: answer[*start..*end].to_string(),
        column,
    })
}

/// [`RATE_UNITS`]' unit of `word` (singular or plural).
fn rate_unit(word: &str) -> Option<&'static str> {
    RATE_UNITS
        .iter()
        .find(|u| word == **u || word.strip_suffix('s') == Some(**u))
        .copied()
}

/// The unit of a rate written right after the number that ends at `end` of `answer` (`euros
/// per night`, `€/night`, `for each night`: at most two words before the rate word), and
/// where the unit ends.
fn written_rate(answer: &str, end: usize) -> Option<(&'static str, usize)> {
    // The words after the number, lowercased, each with where it ends, `/` as a word of its
    // own, up to the end of the clause.
    let mut words: Vec<(String, usize)> = Vec::new();
    let mut word = String::new();
    for (i, c) in answer[end..].char_indices() {
        let i = end + i;
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
            continue;
        }
        if !word.is_empty() {
            words.push((std::mem::take(&mut word), i));
        }
        if c == '/' {
            words.push(("/".into(), i + 1));
        }
        if matches!(c, '.' | ',' | ';' | ':' | '(' | ')') || words.len() >= 5 {
            break;
        }
    }
    if !word.is_empty() {
        words.push((word, answer.len()));
    }
    (0..words.len().min(3)).find_map(|k| {
        let (w, _) = &words[k];
        let (next, until) = words.get(k + 1)?;
        let unit = rate_unit(next)?;
        (RATE_WORDS.contains(&w.as_str()) || w == "/").then_some((unit, *until))
    })
}

/// Words of a column's name that make its values rates or prices of one unit.
const RATE_COLUMN_WORDS: &[&str] = &["rate", "price", "per", "tariff"];

/// The name of a column of rates or prices (see [`RATE_COLUMN_WORDS`]; its name's words as
/// [`crate::call::tidy::identifier_words`] splits them: `UnitPrice`, `price_per_night`) in
/// which a row of a table of `text` (a header line and rows of as many cells, ` | ` between
/// them) holds `value`.
fn rate_column(value: f64, text: &str) -> Option<String> {
    column_of(value, text, RATE_COLUMN_WORDS)
}

/// The name of a column of a table of `text` (see [`rate_column`]) whose name holds one of
/// `kinds` (as a word of it) and in which a row holds `value`.
fn column_of(value: f64, text: &str, kinds: &[&str]) -> Option<String> {
    column_where(value, text, |name| {
        crate::call::tidy::identifier_words(name)
            .iter()
            .any(|w| kinds.contains(&w.as_str()))
    })
}

/// The name of a column of a table of `text` (see [`rate_column`]) that `is_rate` accepts and
/// in which a row holds `value`.
fn column_where(value: f64, text: &str, is_rate: impl Fn(&str) -> bool) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    for (i, head) in lines.iter().enumerate() {
        let names: Vec<&str> = head.split(" | ").map(str::trim).collect();
        if !names.iter().any(|n| is_rate(n)) {
            continue;
        }
        for row in &lines[i + 1..] {
            let cells: Vec<&str> = row.split(" | ").map(str::trim).collect();
            if cells.len() != names.len() {
                break;
            }
            let hit = names.iter().zip(&cells).find(|(n, c)| {
                is_rate(n) && c.parse::<f64>().is_ok_and(|x| (x - value).abs() < 1e-9)
            });
            if let Some((n, _)) = hit {
                return Some(n.to_string());
            }
        }
    }
    None
}

/// Words of a column's name that make its values sums of money.
const MONEY_COLUMN_WORDS: &[&str] = &[
    "price", "cost", "fee", "rate", "amount", "charge", "total", "paid", "salary", "wage", "value",
    "freight", "fine", "spent", "tariff", "tax", "balance", "due", "revenue", "budget", "deposit",
    "income", "pay",
];

/// Currency words written after an amount (`30 euros`, `12.50 EUR`).
const CURRENCY_WORDS: &[&str] = &[
    "euro", "euros", "eur", "dollar", "dollars", "usd", "pound", "pounds", "gbp", "cents",
];

/// Words shortly before a number that make it a sum of money without a currency: "it costs
/// 12", "pays 40".
const MONEY_VERBS: &[&str] = &[
    "cost", "costs", "price", "priced", "pay", "pays", "paid", "charge", "charges", "charged",
    "fee", "worth", "spend", "spends", "spent", "earn", "earns", "earned", "salary", "budget",
];

/// The numbers of `text` written as sums of money: after a currency sign (`$12`, `€ 30`), before
/// a currency word or sign (`30 euros`, `12 €`), or up to three words after a word of paying
/// ([`MONEY_VERBS`]: "costs a flat 45").
fn money_amounts(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for (raw, v, i) in numbers_at(text) {
        // Within its line; a table's row is read by its columns ([`column_of`]), not by the
        // header's words before it.
        let start = text[..i].rfind('\n').map_or(0, |n| n + 1);
        let end = text[i..].find('\n').map_or(text.len(), |n| i + n);
        if text[start..end].contains(" | ") {
            continue;
        }
        let before = text[start..i].trim_end();
        let after = text[i + raw.len()..end].trim_start();
        let sign_before = before.ends_with(['$', '€', '£']);
        let next: String = after
            .chars()
            .take_while(|c| c.is_alphabetic())
            .collect::<String>()
            .to_lowercase();
        let word_after =
            CURRENCY_WORDS.contains(&next.as_str()) || after.starts_with(['€', '$', '£']);
        let verb = before
            .rsplit(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .take(3)
            .any(|w| MONEY_VERBS.contains(&w.to_lowercase().as_str()));
        if sign_before || word_after || verb {
            out.push(v);
        }
    }
    out
}

/// An answer giving a sum of money worked out by a calculation with no sum of money in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Priceless {
    /// The answer's amount, as written.
    pub amount: String,
    /// The calculator expression that gave it.
    pub expression: String,
    /// Its numbers, each with the column of the rows shown that holds it, where one does.
    pub operands: Vec<(String, Option<String>)>,
    /// The lines of the passages shown that give a sum of money per unit.
    pub rates: Vec<RateLine>,
    /// The calculation with the price per unit that one of its numbers counts
    /// (`(2.25 * 1.21) * 68` for hours of labour and a rate per hour), where there is one.
    pub suggestion: Option<String>,
}

/// When a sum of money in `answer` (see [`money_amounts`]) is the value of a calculation of
/// `rounds` (each (the calculator expression, when the round was a calculator call, its
/// observation)), and no number of that calculation is a sum of money: none is written as
/// money in `told` (the task and the context) or a tool's result, none is in a column of
/// prices, costs or fees ([`MONEY_COLUMN_WORDS`]), and none is the value of an earlier
/// calculation that had one. Hours times a VAT factor is no price. Regression: asked what
/// the labour on a job costs before VAT, the 1.5B model divided its 7.5 hours by 1.21 and
/// answered "about 6.20 euros"; the rate per hour was in the documents, not shown, and never
/// looked for. Not when a number of the calculation is itself found nowhere (a rate made up
/// or copied from the worked example: the evidence check's case).
pub fn priceless(
    answer: &str,
    told: &[&str],
    rounds: &[(Option<&str>, &str)],
) -> Option<Priceless> {
    let wanted = money_amounts(answer);
    if wanted.is_empty() {
        return None;
    }
    let written: Vec<&str> = told
        .iter()
        .copied()
        .chain(rounds.iter().filter(|(e, _)| e.is_none()).map(|(_, o)| *o))
        .collect();
    let money: Vec<f64> = written.iter().flat_map(|t| money_amounts(t)).collect();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
    let column = |x: f64| {
        written
            .iter()
            .find_map(|t| column_of(x, t, MONEY_COLUMN_WORDS))
    };
    // Each calculation: its expression, numbers, value, and whether a sum of money is in it.
    struct Worked<'e> {
        expr: &'e str,
        operands: Vec<(String, f64)>,
        value: f64,
        priced: bool,
    }
    let mut money_results: Vec<f64> = Vec::new();
    let mut worked: Vec<Worked> = Vec::new();
    for (expr, obs) in rounds {
        let Some(expr) = expr else { continue };
        if works_with_dates(expr) {
            continue;
        }
        let Some((_, value)) = numbers(obs).into_iter().next() else {
            continue;
        };
        let operands = numbers(expr);
        let priced = operands.iter().any(|&(_, x)| {
            money.iter().chain(&money_results).any(|&m| close(m, x)) || column(x).is_some()
        });
        if priced {
            money_results.push(value);
        }
        worked.push(Worked {
            expr,
            operands,
            value,
            priced,
        });
    }
    // The last calculation that gave an amount of the answer, and that amount as written.
    let given = numbers(answer);
    let (w, amount) = worked.into_iter().rev().find_map(|w| {
        given
            .iter()
            .find(|(raw, v)| wanted.iter().any(|x| close(*x, *v)) && same(raw, *v, w.value))
            .map(|(raw, _)| raw.clone())
            .map(|raw| (w, raw))
    })?;
    // A number of it found nowhere (made up, or the worked example's) is the evidence
    // check's to send back: the calculation is not short of a price but of its inputs.
    let ungrounded = check("", told, rounds).ungrounded_inputs;
    if w.priced || w.operands.iter().any(|(raw, _)| ungrounded.contains(raw)) {
        return None;
    }
    // Each number with any column of the rows shown that holds it (not a number: a header);
    // not for 0 and 1, the constants of `(1 + 0.21)`, which some id holds too.
    let operands: Vec<(String, Option<String>)> = w
        .operands
        .into_iter()
        .map(|(r, x)| {
            let named = (x != 0.0 && x != 1.0)
                .then(|| {
                    written
                        .iter()
                        .find_map(|t| column_where(x, t, |n| n.parse::<f64>().is_err()))
                })
                .flatten();
            (r, named)
        })
        .collect();
    let rates = rate_lines(&written);
    // A number of the calculation that counts the unit of one of the prices shown: the
    // calculation times that price is what the rules give, in the simplest case.
    let suggestion = operands.iter().find_map(|(_, column)| {
        let unit = column_unit(column.as_deref()?)?;
        let rate = rates.iter().find(|r| same_unit(r.unit, unit))?;
        Some(format!("({}) * {}", w.expr, rate.amount))
    });
    Some(Priceless {
        amount,
        expression: w.expr.to_string(),
        operands,
        rates,
        suggestion,
    })
}

/// A line of a passage that gives a sum of money per unit.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLine {
    /// The line, trimmed.
    pub line: String,
    /// The sum of money, as written (`68`).
    pub amount: String,
    /// Its unit, singular (`hour`).
    pub unit: &'static str,
}

/// The lines of `texts` (passages, not rows of a table) that give a sum of money per unit
/// ("Labour is charged at 68 euros per hour"), at most [`MAX_RATE_LINES`], each once, in the
/// order they come.
fn rate_lines(texts: &[&str]) -> Vec<RateLine> {
    let mut out: Vec<RateLine> = Vec::new();
    for line in texts.iter().flat_map(|t| t.lines()) {
        let line = line.trim();
        if line.contains(" | ") || out.iter().any(|l| l.line == line) {
            continue;
        }
        let money = money_amounts(line);
        // `68 euros per hour`: a sum of money, then its unit.
        let rated = numbers_at(line).into_iter().find_map(|(raw, v, i)| {
            if !money.iter().any(|m| (m - v).abs() < 1e-9) {
                return None;
            }
            written_rate(line, i + raw.len()).map(|(unit, _)| (raw, unit))
        });
        if let Some((amount, unit)) = rated {
            out.push(RateLine {
                line: line.to_string(),
                amount,
                unit,
            });
            if out.len() == MAX_RATE_LINES {
                break;
            }
        }
    }
    out
}

/// The unit a column's values count, from the words of its name (`labour_hrs` → `hour`,
/// `nights` → `night`, `qty` → `unit`), where one of [`RATE_UNITS`] or a short form of one
/// names it.
fn column_unit(column: &str) -> Option<&'static str> {
    crate::call::tidy::identifier_words(column)
        .iter()
        .rev()
        .find_map(|w| match w.as_str() {
            "hrs" | "hr" | "h" => Some("hour"),
            "qty" | "quantity" | "units" | "pcs" => Some("unit"),
            "kms" | "kilometres" | "kilometers" => Some("km"),
            "kgs" | "kilos" => Some("kg"),
            w => rate_unit(w),
        })
}

/// Whether a price per `rate` counts what a column of unit `column` counts (`unit`, `item`
/// and `piece` are one).
fn same_unit(rate: &str, column: &str) -> bool {
    fn one(u: &str) -> &str {
        if matches!(u, "item" | "piece") {
            "unit"
        } else {
            u
        }
    }
    one(rate) == one(column)
}

/// The most lines of rates [`priceless_message`] quotes.
const MAX_RATE_LINES: usize = 3;

/// What the loop tells the model when its answer gives a sum of money from a calculation
/// with no price in it.
pub fn priceless_message(p: &Priceless) -> String {
    let named: Vec<String> = p
        .operands
        .iter()
        .filter_map(|(raw, col)| col.as_ref().map(|c| format!("{raw} is {c}")))
        .collect();
    let named = if named.is_empty() {
        String::new()
    } else {
        format!(" ({})", named.join(", "))
    };
    let rates = if p.rates.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = p.rates.iter().map(|r| format!("\"{}\"", r.line)).collect();
        format!(
            " The documents shown give these prices: {}.",
            quoted.join(" ")
        )
    };
    let again = match &p.suggestion {
        Some(s) => {
            format!("work the answer out again with it, as {s} if that is the price that applies")
        }
        None => "work the answer out again from it".to_string(),
    };
    format!(
        "[check: the answer's {} is a sum of money worked out as {}, and none of those \
         numbers is a price{named}.{rates} Find the price that applies (per hour, per item, \
         per day, per night: in the documents or the data) and {again}.]",
        p.amount, p.expression
    )
}

/// What the loop tells the model when its answer gives a `rate` and the task asks for the
/// whole amount.
pub fn rate_message(rate: &Rate) -> String {
    let dates = "; a stay's nights are the days from its arrival to its departure";
    match rate {
        Rate::Written { rate, unit } => format!(
            "[check: your answer gives an amount per {unit} ({rate}), but the task asks for \
             the whole amount, not the amount for one {unit}. Find how many {unit}s it covers \
             (from the task, the rows or the documents{dates}), multiply with the calculator, \
             then give the final_answer with the total.]",
            dates = if matches!(unit.as_str(), "night" | "day") {
                dates
            } else {
                ""
            }
        ),
        Rate::Column { value, column } => format!(
            "[check: your answer's {value} is a {column} of a row above, the amount for one \
             night, item or person, but the task asks for the whole amount. Find how many it \
             covers (from the task, the rows or the documents{dates}), multiply with the \
             calculator, then give the final_answer with the total.]"
        ),
    }
}

/// Units a task may ask a count of days in.
const DAY_UNITS: &[&str] = &["day", "days", "night", "nights"];

/// The dates (`YYYY-MM-DD`, days of the calendar) written in `line`, as the calculator's day
/// numbers, with their text.
fn line_dates(line: &str) -> Vec<(i64, String)> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = i == 0 || !chars[i - 1].is_alphanumeric();
        if let (true, Some((Some(n), len))) =
            (starts, crate::tools::calculator::date_at(&chars[i..]))
        {
            out.push((n, chars[i..i + len].iter().collect()));
            i += len;
        } else {
            i += 1;
        }
    }
    out
}

/// When `task` asks how many days (or nights) something took, `answer` gives one count of
/// days that is not the days between two dates of one row shown (a row of `seen`, the tools'
/// results and the context before round 1, apart from sample rows of a larger table), and no
/// call worked with dates (`used_dates`): the count came from elsewhere, most often a
/// document's rule. Returns the answer's count and the first such row's dates. A task asking
/// for a total is left alone (a sum of several rows' days is no difference of one row's
/// dates). Regression: "How many days did order 10277 take to ship?" was answered "12 working
/// days", a shipper's delivery time from the documents, with the order's dates 2025-12-28
/// and 2026-01-06 in the rows shown (9 days).
pub fn days_not_between(
    task: &str,
    answer: &str,
    seen: &[&str],
    used_dates: bool,
) -> Option<(String, Vec<String>)> {
    let asks = (holds_word(task, "how many") || holds_word(task, "how long"))
        && DAY_UNITS.iter().any(|u| holds_word(task, u))
        && !counts_days_of_a_thing(task);
    if !asks || used_dates || TOTAL_WORDS.iter().any(|w| holds_word(task, w)) {
        return None;
    }
    let amounts = answer_amounts(task, answer);
    let [(start, end, count)] = amounts.as_slice() else {
        return None;
    };
    let count = *count;
    // The count is one of days: "12 days", "12 working days".
    let after = answer[*end..].to_lowercase();
    let unit = after
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(2)
        .any(|w| DAY_UNITS.contains(&w));
    if !unit {
        return None;
    }
    let rows = dated_rows(seen, usize::MAX);
    let between = |r: &Vec<(i64, String)>| {
        r.iter().enumerate().any(|(i, a)| {
            r[i + 1..]
                .iter()
                .any(|b| ((a.0 - b.0).abs() as f64 - count).abs() < 1e-9)
        })
    };
    if rows.is_empty() || rows.iter().any(between) {
        return None;
    }
    Some((
        answer[*start..*end].to_string(),
        rows[0].iter().map(|(_, t)| t.clone()).collect(),
    ))
}

/// Whether `task` counts a thing measured in days ("days of annual leave", "nights of
/// parking") rather than the time something took: an entitlement, a rule or a sum, not the
/// days between two dates of a row ("days of her stay" is a time taken). Regression: "How
/// many days of annual leave is Anouk Smits entitled to?" answered with the documents' 25
/// days (the rule, before the part-time share) was sent back because her leave request's
/// dates are two days apart, and the model answered 2.
fn counts_days_of_a_thing(task: &str) -> bool {
    const SPAN_WORDS: &[&str] = &[
        "the", "a", "an", "his", "her", "their", "its", "my", "your", "our", "this", "that",
    ];
    let lower = task.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(3)
        .any(|w| DAY_UNITS.contains(&w[0]) && w[1] == "of" && !SPAN_WORDS.contains(&w[2]))
}

/// Whether a call's arguments work with dates: two dates (a difference for the calculator)
/// or SQLite's `julianday`.
pub fn works_with_dates(args: &str) -> bool {
    line_dates(args).len() >= 2 || args.to_lowercase().contains("julianday")
}

/// What the loop tells the model when its answer's `count` of days is not the days between
/// the `dates` of a row it was shown.
pub fn days_message(count: &str, dates: &[String]) -> String {
    let (first, last) = (&dates[0], &dates[dates.len() - 1]);
    format!(
        "[check: the task asks how many days, and a row above holds the dates {}; your \
         answer's {count} is not the days between any two of them. If the task asks for the \
         time between two of these dates, compute it with the calculator ({last} - {first} \
         gives the days from {first} to {last}), then give the final_answer with it.]",
        dates.join(", ")
    )
}

/// A sum of money worked out from a price per day or per night times a count of days that no
/// row shown gives ([`priced_days_not_between`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PricedDays {
    /// The answer's amount, as written.
    pub amount: String,
    /// The count of days or nights, as the model wrote it (`6 nights`).
    pub count: String,
    /// The count's number (`6`).
    pub number: String,
    /// The price per day or night it was multiplied by: the passage's line.
    pub rate: String,
    /// The price's amount, as the line writes it (`20`).
    pub per: String,
    /// Each two dates of a row shown and the days between them (only the rows of the month
    /// the task names, where it names one and rows have dates in it): a stay's arrival and
    /// departure, a loan's due and return dates.
    pub spans: Vec<(String, String, i64)>,
    /// The month the task names, as it writes it (`June`).
    pub month: Option<String>,
}

/// The first month `task` names (`June`, `in April 2025`), as written, and its number; `May`
/// only with its capital, the verb being lower case.
fn named_month(task: &str) -> Option<(String, usize)> {
    task.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .find_map(|w| {
            let lower = w.to_lowercase();
            let number = DATE_WORDS[..12].iter().position(|m| *m == lower)? + 1;
            (lower != "may" || w == "May").then(|| (w.to_string(), number))
        })
}

/// The most rows whose dates [`priced_days_not_between`] reads (and whose days it adds up
/// for a total).
const MAX_DATED_ROWS: usize = 8;

/// When `answer`'s amount is a price per day or per night of a passage shown (`seen`) times
/// a count of days or nights the model wrote in `working` (its steps' thoughts and the
/// answer: "June is 6 months, so 6 nights") that `task` does not give, and the rows shown
/// hold dates none of whose differences is that count (nor, for a total, a sum of them),
/// with no call that worked with dates (`used_dates`): the count was guessed where the rows'
/// dates give it. A task that asks how many days is the days check's
/// ([`days_not_between`]); a task that counts days of a thing ("days of annual leave") is left
/// alone. Regression: "Tomás Ruiz brings his dog on his June stay. What will the dog cost?"
/// was answered 120 euros, 20 euros per night times "6 nights" ("June is 6 months"), with
/// his June booking from 2025-06-02 to 2025-06-06 in the rows shown before round 1 (80).
pub fn priced_days_not_between(
    task: &str,
    answer: &str,
    working: &[&str],
    seen: &[&str],
    used_dates: bool,
) -> Option<PricedDays> {
    if used_dates || holds_word(task, "how many") || counts_days_of_a_thing(task) {
        return None;
    }
    // The counts of days the task gives, in digits or words ("two nights", "a day").
    let task_l = task.to_lowercase();
    let task_words: Vec<&str> = task_l
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let task_counts = task_words.windows(2).any(|w| {
        DAY_UNITS.contains(&w[1]) && (w[0].parse::<f64>().is_ok() || NUMBER_WORDS.contains(&w[0]))
    });
    if task_counts {
        return None;
    }
    let mut rows = dated_rows(seen, MAX_DATED_ROWS);
    // A month the task names ("his June stay"): the rows with a date in it are the ones it
    // means, where there are any.
    let month = named_month(task);
    if let Some((_, number)) = month {
        let in_month = |r: &Vec<(i64, String)>| {
            r.iter()
                .any(|(_, d)| d.get(5..7).and_then(|m| m.parse::<usize>().ok()) == Some(number))
        };
        if rows.iter().any(in_month) {
            rows.retain(in_month);
        }
    }
    if rows.is_empty() {
        return None;
    }
    // Each two dates of a row, and for a total the first and last of each row.
    let spans: Vec<(String, String, i64)> = rows
        .iter()
        .flat_map(|r| {
            r.iter().enumerate().flat_map(move |(i, a)| {
                r[i + 1..]
                    .iter()
                    .map(move |b| (a.1.clone(), b.1.clone(), (b.0 - a.0).abs()))
            })
        })
        .collect();
    let outer: Vec<i64> = rows
        .iter()
        .map(|r| (r[r.len() - 1].0 - r[0].0).abs())
        .collect();
    let total = TOTAL_WORDS.iter().any(|w| holds_word(task, w));
    // Prices per day or night: "20 euros per night", and "0.25 euros per item per day".
    let rates: Vec<RateLine> = rate_lines(seen)
        .into_iter()
        .filter(|r| matches!(r.unit, "day" | "night") || per_day(&r.line))
        .collect();
    let amounts = answer_amounts(task, answer);
    for text in working {
        for (raw, count, at) in numbers_at(text) {
            let unit = text[at + raw.len()..]
                .split(|c: char| !c.is_alphanumeric())
                .find(|w| !w.is_empty())
                .unwrap_or("")
                .to_lowercase();
            if !DAY_UNITS.contains(&unit.as_str()) || count.fract() != 0.0 || count < 1.0 {
                continue;
            }
            let count_days = count as i64;
            if spans.iter().any(|s| s.2 == count_days) || (total && sums_to(&outer, count_days)) {
                continue;
            }
            for rate in &rates {
                let Ok(per) = rate.amount.replace(',', "").parse::<f64>() else {
                    continue;
                };
                let product = per * count;
                if let Some((start, end, _)) = amounts
                    .iter()
                    .find(|(_, _, a)| (a - product).abs() < 0.005 * product.max(1.0))
                {
                    return Some(PricedDays {
                        amount: answer[*start..*end].to_string(),
                        count: format!("{raw} {unit}"),
                        number: raw,
                        rate: rate.line.clone(),
                        per: rate.amount.clone(),
                        month: month.map(|(name, _)| name),
                        spans,
                    });
                }
            }
        }
    }
    None
}

/// Number words a task may give a count of days in ("two nights", "a day").
const NUMBER_WORDS: &[&str] = &[
    "a", "an", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "fourteen", "fifteen", "twenty", "thirty",
];

/// Whether a line of a price says it is per day or per night after its first unit ("0.25
/// euros per item per day").
fn per_day(line: &str) -> bool {
    let lower = line.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .any(|w| matches!(w[0], "per" | "a" | "each" | "every") && matches!(w[1], "day" | "night"))
}

/// The rows of `seen` (tables' rows, sample rows of a larger table left out) that hold two or
/// more dates: their dates as the calculator's day numbers, with their text; at most `most`,
/// each once.
fn dated_rows(seen: &[&str], most: usize) -> Vec<Vec<(i64, String)>> {
    let mut rows: Vec<Vec<(i64, String)>> = Vec::new();
    for text in seen {
        let mut sample = false;
        for line in text.lines() {
            if line.starts_with("-- ") {
                sample = line.ends_with(PARTIAL_SAMPLE);
                continue;
            }
            let dates = line_dates(line);
            if sample || dates.len() < 2 {
                continue;
            }
            if !rows.contains(&dates) {
                rows.push(dates);
            }
            if rows.len() == most {
                return rows;
            }
        }
    }
    rows
}

/// Whether `count` is the sum of the days of some of `spans` (the nights of two stays, for a
/// total).
fn sums_to(spans: &[i64], count: i64) -> bool {
    let n = spans.len().min(MAX_DATED_ROWS);
    (1u32..(1 << n)).any(|mask| {
        (0..n)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| spans[i])
            .sum::<i64>()
            == count
    })
}

/// The texts the round after [`priced_days_message`] may not write: the count as a word of
/// its own (` 6 `: `6 nights`, `6 days`, `is 6 months`) and the price times it, either way
/// round (`20 * 6`), so that the step cannot copy the thought and the calculation it was
/// sent back for (the 1.5B model, told its "6 nights" were no row's, wrote "6 days", then
/// "6 months").
pub fn priced_days_forbidden(p: &PricedDays) -> Vec<String> {
    vec![
        format!(" {} ", p.number),
        format!("{} * {}", p.per, p.number),
        format!("{} * {}", p.number, p.per),
    ]
}

/// What the loop tells the model when its answer multiplied a price per day or night by a
/// count of days no row's dates give (the first [`MAX_DATED_ROWS`] spans of dates named).
pub fn priced_days_message(p: &PricedDays) -> String {
    let rows: Vec<String> = p
        .spans
        .iter()
        .take(MAX_DATED_ROWS)
        .map(|(first, last, days)| format!("{first} to {last}: {days} days apart"))
        .collect();
    let which = match &p.month {
        Some(month) => format!("the rows of {month} above give other ones"),
        None => "the dates of the rows above give other ones".to_string(),
    };
    format!(
        "[check: your answer's {} is a price per day or night (\"{}\") times {}, but the task \
         gives no such count and {which} ({}). A stay's nights, or a loan's or a hire's days, \
         are the days between its row's dates: take them from the row the task means, \
         multiply the price by them with the calculator, then give the final_answer with the \
         result.]",
        p.amount,
        p.rate,
        p.count,
        rows.join("; ")
    )
}

/// When `answer` names one of the names a search said no passage of its result holds, and
/// gives a value (a word with a digit or an `@`: an email, a phone number, an amount) found
/// in that result and in none of `elsewhere` (the task, the context, the other results; the
/// passages shown before round 1 ([`CONTEXT_HEADING`]) only when they hold the name): the
/// value belongs to what the passage is about, not to the name. Returns the value and the
/// name. `searches` are the search results, each with the search's note naming what no
/// passage holds ([`NO_PASSAGE_HOLDS`]). Regression: asked for Hugo Lambert's email, the
/// 1.5B model searched the documents for "Hugo Lambert email", was told no passage holds
/// "Hugo Lambert", and answered with the library's own address; his row, with his email, had
/// been shown before round 1.
pub fn value_of_another(
    answer: &str,
    searches: &[&str],
    elsewhere: &[&str],
) -> Option<(String, String)> {
    for result in searches {
        let Some(note) = result
            .lines()
            .find_map(|l| l.strip_prefix('(')?.strip_prefix(NO_PASSAGE_HOLDS))
        else {
            continue;
        };
        let names: Vec<&str> = note.split('"').skip(1).step_by(2).collect();
        let Some(name) = names.into_iter().find(|n| holds_word(answer, n)) else {
            continue;
        };
        let value = answer
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
            .filter(|w| {
                w.chars().count() >= 4 && w.contains(|c: char| c.is_ascii_digit() || c == '@')
            })
            .find(|w| {
                holds_word(result, w)
                    && !elsewhere.iter().any(|e| {
                        holds_word(e, w) && (!e.starts_with(CONTEXT_HEADING) || holds_word(e, name))
                    })
            });
        if let Some(value) = value {
            return Some((value.to_string(), name.to_string()));
        }
    }
    None
}

/// What the loop tells the model when its answer gives `value` for `name` from a passage
/// that does not mention the name.
pub fn another_message(value: &str, name: &str) -> String {
    format!(
        "[check: your answer gives {value} for {name}, but it comes from a passage that does \
         not mention {name} (the search said so): it belongs to what that passage is about. \
         Find what belongs to {name} (the rows above that hold the name, or a query of the \
         database), then give the final_answer with it.]"
    )
}

/// The conditions of an sql result that found nothing through a value no row holds, as the
/// sql tool notes them (`(no row of visit has reason = 'consultation'; the values of reason
/// there are: …)`), each as `column = 'value'` with whether one of `told` (the task, earlier
/// questions, facts) names the value. One nobody named was made up; one the task names may
/// be what it asks about ("how many hamsters") or a word of it put in the wrong column
/// ("consultation fees" as a visit's reason).
pub fn empty_conditions(observation: &str, told: &[&str]) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    for line in observation.lines() {
        let Some(rest) = line.strip_prefix("(no row of ") else {
            continue;
        };
        let Some((_, cond)) = rest.split_once(" has ") else {
            continue;
        };
        let Some((cond, _)) = cond.split_once("; the values of ") else {
            continue;
        };
        let Some((_, value)) = cond.split_once(" '") else {
            continue;
        };
        let value = value.strip_suffix('\'').unwrap_or(value).replace("''", "'");
        // `LIKE` patterns are named by their text without the wildcards.
        let words: Vec<String> = value
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        let named =
            !words.is_empty() && told.iter().any(|t| words.iter().all(|w| holds_word(t, w)));
        if !out.iter().any(|(c, _)| c == cond) {
            out.push((cond.to_string(), named));
        }
    }
    out
}

/// What the loop tells the model when its answer rests on a query that found nothing through
/// `conditions` (from [`empty_conditions`]): when none is named by the task, to query again
/// without it; else to query again without it, or to confirm there is none when the task asks
/// about exactly that value.
pub fn empty_result_message(conditions: &[(String, bool)]) -> String {
    let list: Vec<&str> = conditions.iter().map(|(c, _)| c.as_str()).collect();
    let list = list.join(" and ");
    if conditions.iter().all(|(_, named)| !named) {
        format!(
            "[check: the answer rests on a query that found nothing because of {list}: no row \
             holds that value, and the task does not name it, so the empty result says nothing \
             about the task. Query again without that condition, or with one of the values \
             listed above if the task means one of them, then give the final_answer from that \
             result.]"
        )
    } else {
        format!(
            "[check: the answer rests on a query that found nothing because of {list}: no row \
             holds that value in that column (its values are listed above). If the task's word \
             belongs to something else (another column, or a word describing what to count or \
             add up), query again without that condition; if the task asks about exactly that \
             value, query to confirm there is none (another column, or LIKE). Then give the \
             final_answer from that result.]"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(rate: &str, unit: &str) -> Rate {
        Rate::Written {
            rate: rate.into(),
            unit: unit.into(),
        }
    }

    /// Regression (issue 19): "What will the dog cost?" on a June stay was answered with the
    /// documents' rate, "20 euros per night".
    #[test]
    fn a_rate_written_for_the_whole_of_a_stay_is_found() {
        let dog = "Tomás Ruiz brings his dog on his June stay. What will the dog cost?";
        assert_eq!(
            rate_for_total(dog, "The dog will cost 20 euros per night.", &[]),
            Some(written("20 euros per night", "night"))
        );
        let board = "How much would it cost to board Thor at the clinic for 3 nights?";
        for (answer, rate) in [
            ("It costs 27 euros a night.", "27 euros a night"),
            ("Boarding is 27€/night", "27€/night"),
            (
                "Thor's boarding costs 27 for each night",
                "27 for each night",
            ),
        ] {
            assert_eq!(
                rate_for_total(board, answer, &[]),
                Some(written(rate, "night")),
                "{answer}"
            );
        }
        let total = "What did the guides cost in total for the trip?";
        assert_eq!(
            rate_for_total(total, "The guides cost 90 euros per day in 2025.", &[]),
            Some(written("90 euros per day", "day"))
        );
    }

    /// Regression (issue 19, garage-two-4): "What is the labour of job 14 worth with VAT
    /// added?" was answered 2.7225 euros, the job's 2.25 hours times 1.21, with the rate per
    /// hour on the line above the VAT rule. The calculation is found to hold no price, its
    /// hours are named by their column, and the passages' prices per unit are quoted.
    #[test]
    fn a_sum_of_money_from_no_price_names_its_numbers_and_the_prices_shown() {
        let notes = "Passages of the user's documents that share words with this task:\n\
            prices.md:3\n  Labour is charged at 68 euros per hour, counted in quarter hours.\n  \
            VAT of 21% is added to every invoice.\n  A diagnosis costs a flat 45 euros.\n\n\
            Some rows of the tables this task's words point to:\n\
            job_id | kind | labour_hrs | status\n14 | brakes | 2.25 | done";
        let told = ["What is the labour of job 14 worth with VAT added?", notes];
        let answer = "The labour of job 14 with VAT added is 2.7225 euros.";
        let found = priceless(answer, &told, &[(Some("2.25 * 1.21"), "2.7225")]).unwrap();
        assert_eq!(found.amount, "2.7225");
        assert_eq!(
            found.operands,
            [
                ("2.25".to_string(), Some("labour_hrs".to_string())),
                ("1.21".to_string(), None)
            ]
        );
        let lines: Vec<&str> = found.rates.iter().map(|r| r.line.as_str()).collect();
        assert_eq!(
            lines,
            ["Labour is charged at 68 euros per hour, counted in quarter hours."]
        );
        assert_eq!(found.suggestion.as_deref(), Some("(2.25 * 1.21) * 68"));
        let message = priceless_message(&found);
        assert!(message.contains("(2.25 is labour_hrs)"), "{message}");
        assert!(
            message.contains("\"Labour is charged at 68 euros per hour"),
            "{message}"
        );
        // Worked out from the rate: no check.
        let rounds = [(Some("2.25 * 68 * 1.21"), "185.13")];
        assert_eq!(priceless("It is 185.13 euros.", &told, &rounds), None);
    }

    /// Regression (issue 19): "How much was the room for Sara Conti's April stay, before any
    /// discount?" was answered with the room's nightly `Rate`, 249 (it is 5 nights).
    #[test]
    fn a_value_of_a_rate_column_answered_for_the_whole_of_a_stay_is_found() {
        let task = "How much was the room for Sara Conti's April stay, before any discount?";
        let answer = "The room for Sara Conti's April stay, before any discount, was 249.";
        let column = |c: &str| {
            Some(Rate::Column {
                value: "249".into(),
                column: c.into(),
            })
        };
        assert_eq!(rate_for_total(task, answer, &["Rate\n249"]), column("Rate"));
        let rows = "RoomNo | Kind | Floor | Rate | SeaView\n401 | suite | 4 | 249 | 1";
        assert_eq!(
            rate_for_total(task, answer, &["passage", rows]),
            column("Rate")
        );
        for name in ["UnitPrice", "price_per_night", "Unit Price", "DailyRate"] {
            let t = format!("BookingId | {name}\n8 | 249");
            assert_eq!(rate_for_total(task, answer, &[&t]), column(name), "{name}");
        }
        // A column of totals or counts, a value in another row's place, a number of a
        // passage: no rate.
        for t in [
            "BookingId | Amount\n8 | 249",
            "BookingId | Operator\n8 | 249",
            "Rate | Total\n129 | 249",
            "The suite's rate is 249 euros.",
        ] {
            assert_eq!(rate_for_total(task, answer, &[t]), None, "{t}");
        }
        // No span named, or a rate asked for.
        let rows = ["Rate\n249"];
        assert_eq!(rate_for_total("How much is room 401?", "249", &rows), None);
        assert_eq!(
            rate_for_total("What is the rate of room 401 for my stay?", "249", &rows),
            None
        );
    }

    /// Regression (issue 19): "How many days did order 10277 take to ship?" was answered with
    /// a shipper's delivery time from the documents, "12 working days"; the order's row,
    /// shown before round 1, holds 2025-12-28 and 2026-01-06 (9 days).
    #[test]
    fn a_count_of_days_no_two_dates_of_a_row_give_is_found() {
        let task = "How many days did order 10277 take to ship?";
        let shown = "-- \"Order\": the row whose Order ID is 10277\n\
                     Order ID | Order Date | Shipped Date | Ship Via\n\
                     10277 | 2025-12-28 | 2026-01-06 | Speedy Express";
        let dates = vec!["2025-12-28".to_string(), "2026-01-06".to_string()];
        assert_eq!(
            days_not_between(
                task,
                "Order 10277 took 12 working days to ship.",
                &[shown],
                false
            ),
            Some(("12".into(), dates.clone()))
        );
        let message = days_message("12", &dates);
        assert!(
            message.contains("(2026-01-06 - 2025-12-28 gives"),
            "{message}"
        );
        // The days between the dates, or the count worked out with dates: no check.
        for answer in ["It took 9 days.", "Order 10277 took 9 days to ship."] {
            assert_eq!(days_not_between(task, answer, &[shown], false), None);
        }
        assert_eq!(
            days_not_between(task, "It took 12 days.", &[shown], true),
            None
        );
    }

    /// Regression (issue 19): "Tomás Ruiz brings his dog on his June stay. What will the dog
    /// cost?" was answered 120 euros, the documents' 20 euros per night times "6 nights"
    /// ("June is 6 months"), with his June booking (2025-06-02 to 2025-06-06) shown.
    #[test]
    fn a_price_per_night_times_nights_no_row_gives_is_found() {
        let task = "Tomás Ruiz brings his dog on his June stay. What will the dog cost?";
        let shown = [
            "Passages:\nfacilities.md:6\n  Dogs are welcome in rooms on the first floor for 20 \
             euros per night; other pets are not allowed.",
            "-- Booking: every row whose GuestId is the GuestId of the Guest rows above\n\
             BookingId | GuestId | RoomNo | Arrival | Departure | Adults\n\
             2 | 2 | 101 | 2025-03-04 | 2025-03-06 | 1\n\
             17 | 2 | 103 | 2025-06-02 | 2025-06-06 | 2",
        ];
        let thought = "The dog costs 20 euros per night. June is 6 months, so the dog will \
                       stay for 6 nights: 20 * 6 = 120 euros.";
        let answer = "The dog will cost 120 euros.";
        let p = priced_days_not_between(task, answer, &[thought, answer], &shown, false)
            .expect("a count of nights no row gives");
        assert_eq!((p.amount.as_str(), p.count.as_str()), ("120", "6 nights"));
        // The June row only: the task names June.
        assert_eq!(p.spans, vec![("2025-06-02".into(), "2025-06-06".into(), 4)]);
        let message = priced_days_message(&p);
        assert!(
            message.contains(
                "the rows of June above give other ones (2025-06-02 to 2025-06-06: 4 days apart)"
            ),
            "{message}"
        );
        assert_eq!(priced_days_forbidden(&p), vec![" 6 ", "20 * 6", "6 * 20"]);
        // With no month named, every row with dates.
        let stay = "Tomás Ruiz brings his dog on his stay. What will the dog cost?";
        let p = priced_days_not_between(stay, answer, &[thought, answer], &shown, false)
            .expect("a count of nights no row gives");
        assert_eq!(p.spans.len(), 2);
        assert!(priced_days_message(&p).contains("the dates of the rows above give other ones (2025-03-04 to 2025-03-06: 2 days apart; 2025-06-02"));
        // The nights of the June row, a count the task gives, the dates worked with, a
        // count that is no factor of the answer: no check.
        let right = "The dog costs 20 euros per night for 4 nights: 80 euros.";
        assert_eq!(
            priced_days_not_between(task, "80 euros.", &[right], &shown, false),
            None
        );
        let given = "Tomás Ruiz brings his dog for 6 nights. What will the dog cost?";
        assert_eq!(
            priced_days_not_between(given, answer, &[thought, answer], &shown, false),
            None
        );
        assert_eq!(
            priced_days_not_between(task, answer, &[thought, answer], &shown, true),
            None
        );
        let other = "The dog stays 6 nights; the cost is 95 euros.";
        assert_eq!(
            priced_days_not_between(task, "95 euros.", &[other], &shown, false),
            None
        );
        // For a total, the nights of both stays added up are a count the rows give.
        let total = "What did Tomás Ruiz's dog cost in total over his stays?";
        assert_eq!(
            priced_days_not_between(total, answer, &[thought, answer], &shown, false),
            None
        );
    }

    /// A price per item per day is a price per day, and every two dates of a row give a count
    /// (a loan's due and return dates, not only its first and last).
    #[test]
    fn a_fine_per_item_per_day_times_days_no_two_dates_give_is_found() {
        let task = "Lars Eriksen returned The River Oracle late. How much is his fine?";
        let shown = [
            "fines.md:1\n  Overdue items cost 0.25 euros per item per day, up to at most 10 euros per item.",
            "-- loan: every row whose member_no is the member_no of the member rows above\n\
             loan_id | book_id | loaned_on | due_on | returned_on\n\
             31 | 7 | 2025-03-01 | 2025-03-22 | 2025-03-29",
        ];
        let guessed = "The fine is 0.25 euros per day for 10 days: 2.50 euros.";
        let p = priced_days_not_between(task, "His fine is 2.50 euros.", &[guessed], &shown, false)
            .expect("a count of days no two dates give");
        assert_eq!((p.count.as_str(), p.per.as_str()), ("10 days", "0.25"));
        assert_eq!(
            p.spans,
            vec![
                ("2025-03-01".into(), "2025-03-22".into(), 21),
                ("2025-03-01".into(), "2025-03-29".into(), 28),
                ("2025-03-22".into(), "2025-03-29".into(), 7),
            ]
        );
        assert!(priced_days_message(&p).contains("2025-03-22 to 2025-03-29: 7 days apart"));
        let right = "The fine is 0.25 euros per day for 7 days: 1.75 euros.";
        assert_eq!(
            priced_days_not_between(task, "His fine is 1.75 euros.", &[right], &shown, false),
            None
        );
    }

    #[test]
    fn a_count_of_days_without_dates_to_take_it_from_is_left_alone() {
        let shown = "-- \"Order\": the row whose Order ID is 10277\n\
                     Order ID | Order Date | Shipped Date\n10277 | 2025-12-28 | 2026-01-06";
        // A total of several rows' days, a question not of days, an answer not of days.
        for (task, answer) in [
            (
                "How many nights did Greta stay in total?",
                "She stayed 12 nights.",
            ),
            (
                "When did order 10277 ship?",
                "It shipped 12 days after 2025-12-28.",
            ),
            (
                "How many days did order 10277 take to ship?",
                "Order 10277 took 12.",
            ),
        ] {
            assert_eq!(
                days_not_between(task, answer, &[shown], false),
                None,
                "{task}"
            );
        }
        // A count of a thing measured in days (an entitlement) is no time taken. Regression
        // (the office suite): the rule's 25 days were sent back for a leave request's dates.
        let leave = "-- hr_leaverequest: every row whose employee_id is the id of the \
                     hr_employee rows above\n\
                     id | employee_id | kind | start_date | end_date | days\n\
                     4 | 19 | annual | 2025-02-24 | 2025-02-26 | 3";
        let task = "How many days of annual leave is Anouk Smits entitled to in 2025?";
        assert!(counts_days_of_a_thing(task));
        assert_eq!(
            days_not_between(task, "She is entitled to 25 days.", &[leave], false),
            None
        );
        // "Days of her stay" is a time taken: still checked.
        let task = "How many nights of her stay were in May?";
        assert!(!counts_days_of_a_thing(task));
        assert!(days_not_between(task, "12 nights.", &[leave], false).is_some());
        // Dates only in sample rows of a larger table, one date a row, or none.
        let task = "How many days can unopened goods be returned?";
        let sample = "-- \"Order\": 3 of its 40 rows (query for the others)\n\
                      Order ID | Order Date | Shipped Date\n10248 | 2025-07-04 | 2025-07-16";
        for seen in [
            sample,
            "Order ID | Order Date\n10248 | 2025-07-04",
            "Returns: 21 days.",
        ] {
            assert_eq!(
                days_not_between(task, "Within 21 days.", &[seen], false),
                None,
                "{seen}"
            );
        }
        assert!(works_with_dates(
            r#"{"expression":"2026-01-06 - 2025-12-28"}"#
        ));
        assert!(works_with_dates(
            "SELECT julianday(shipped) - JULIANDAY(placed) FROM o"
        ));
        assert!(!works_with_dates(
            "SELECT * FROM o WHERE placed = '2025-12-28'"
        ));
    }

    /// Regression (issue 19): asked for Hugo Lambert's email, the model searched for "Hugo
    /// Lambert email", was told no passage holds "Hugo Lambert", and answered with the
    /// library's own address.
    #[test]
    fn a_value_from_a_passage_about_something_else_is_found() {
        let search = "membership.md:7\n  Questions about membership: membership@townlibrary.example.\n\
                      (no passage shown holds \"Hugo Lambert\": these match the query's other words)";
        let rows =
            "member_no | first_nm | last_nm | email\n1016 | Hugo | Lambert | hugo.l@post.example";
        let task = "What is his email address?";
        let wrong = "Hugo Lambert's email address is membership@townlibrary.example.";
        assert_eq!(
            value_of_another(wrong, &[search], &[task, rows]),
            Some((
                "membership@townlibrary.example".into(),
                "Hugo Lambert".into()
            ))
        );
        // His own value, a value shown elsewhere too, an answer not naming him, a search
        // whose passages hold the name: no check.
        let right = "Hugo Lambert's email address is hugo.l@post.example.";
        assert_eq!(value_of_another(right, &[search], &[task, rows]), None);
        let elsewhere = [task, rows, "Write to membership@townlibrary.example."];
        assert_eq!(value_of_another(wrong, &[search], &elsewhere), None);
        // The same passage shown before round 1 is no other source, unless it names him.
        let before =
            format!("{CONTEXT_HEADING} (…):\nmembership.md:7\n  membership@townlibrary.example");
        assert!(value_of_another(wrong, &[search], &[task, rows, &before]).is_some());
        let named = format!("{before}\n  Hugo Lambert");
        assert_eq!(
            value_of_another(wrong, &[search], &[task, rows, &named]),
            None
        );
        let unnamed = "The email address is membership@townlibrary.example.";
        assert_eq!(value_of_another(unnamed, &[search], &[task, rows]), None);
        let holds = "members.md:3\n  Hugo Lambert: membership@townlibrary.example.";
        assert_eq!(value_of_another(wrong, &[holds], &[task, rows]), None);
        // Words without a digit or an @ are no values here.
        let word = "Hugo Lambert's email is on the membership form.";
        assert_eq!(value_of_another(word, &[search], &[task]), None);
    }

    #[test]
    fn a_rate_the_task_asks_for_or_an_answer_with_its_total_is_left_alone() {
        let board = "How much would it cost to board Thor at the clinic for 3 nights?";
        let rows = ["Service | Price\nboarding | 32"];
        // The total beside the rate; the task's own 3 is no second amount.
        for answer in [
            "At 32 euros per night, 3 nights cost 96 euros.",
            "It costs 96 euros for 3 nights.",
            "It costs 96 euros.",
        ] {
            assert_eq!(rate_for_total(board, answer, &rows), None, "{answer}");
        }
        // Tasks that ask for a rate.
        for task in [
            "How much does it cost to hire an electric bicycle for a day?",
            "What is the nightly rate of room 101 for my stay?",
            "How much does a stay cost per night?",
            "What do they charge each night of the stay?",
        ] {
            for answer in [
                "It costs 25 euros a day, 109 euros per night.",
                "It costs 25 euros a day.",
            ] {
                assert_eq!(rate_for_total(task, answer, &[]), None, "{task}");
            }
        }
        // No span named: "what does the dog cost" may ask the rate.
        assert_eq!(
            rate_for_total(
                "What does a dog cost at the hotel?",
                "20 euros per night.",
                &[]
            ),
            None
        );
        // Not a unit of time, people or things, or no rate word.
        let dog = "Tomás Ruiz brings his dog on his June stay. What will the dog cost?";
        assert_eq!(
            rate_for_total(dog, "20 euros for the dog's basket.", &[]),
            None
        );
        assert_eq!(rate_for_total(dog, "It costs 80 euros a stay.", &[]), None);
    }

    #[test]
    fn conditions_that_found_nothing_say_whether_the_task_names_their_value() {
        let obs = "SUM(fee)\nNULL\n(no row of visit has reason = 'consultation'; the values of \
                   reason there are: 'vaccination', 'annual check-up', …)";
        let c = "reason = 'consultation'".to_string();
        assert_eq!(
            empty_conditions(obs, &["How much in consultation fees is still unpaid?"]),
            [(c.clone(), true)]
        );
        assert_eq!(
            empty_conditions(obs, &["How much in fees is still unpaid?"]),
            [(c.clone(), false)]
        );
        let like = "n\n0\n(no row of pet has species LIKE '%hamster%'; the values of species \
                    there are: 'dog', 'cat')";
        assert!(!empty_conditions(like, &["How many hamsters do we treat?"])[0].1);
        assert!(empty_conditions(like, &["How many pets are a hamster?"])[0].1);
        assert!(empty_conditions("n\n3", &["anything"]).is_empty());
        assert!(empty_result_message(&[(c.clone(), false)]).contains("does not name it"));
        assert!(empty_result_message(&[(c, true)]).contains("without that condition"));
    }

    #[test]
    fn a_total_answered_with_the_amounts_it_is_made_of_is_named() {
        let task = "What was the total freight charged on orders placed in March 2025?";
        let rows = "Freight\n52.45\n50.44\n99.71\n70.22\n57.74";
        let listed = "The total freight was 52.45 euros, 50.44 euros, 99.71 euros, 70.22 euros, \
                      and 57.74 euros.";
        assert_eq!(
            listed_total(task, listed, &[rows]).unwrap(),
            ["52.45", "50.44", "99.71", "70.22", "57.74"]
        );
        assert!(listed_total_message(&["52.45".into(), "50.44".into()]).contains("2 amounts"));
        // The sum beside its parts, one amount, a list asked for per group, or amounts found in
        // no one result: not a listed total.
        let summed = "The total is 330.56 euros (52.45 + 50.44 + 99.71 + 70.22 + 57.74).";
        assert!(listed_total(task, summed, &[rows]).is_none());
        assert!(listed_total(task, "The total freight was 330.56 euros.", &[rows]).is_none());
        let per = "What is the total freight of each order in March 2025?";
        assert!(listed_total(per, listed, &[rows]).is_none());
        assert!(listed_total("What was the freight of order 2?", listed, &[rows]).is_none());
        assert!(listed_total(task, "52.45 and 50.44", &["Freight\n52.45", "x\n50.44"]).is_none());
        // A number of the task is not one of the amounts ("in 2025").
        let one_row = "Freight | year\n52.45 | 2025";
        assert!(listed_total(task, "52.45 in 2025", &[one_row]).is_none());
    }

    #[test]
    fn a_question_of_which_one_answered_by_a_bare_maximum_is_told_apart() {
        assert!(asks_which("What is the cheapest product?"));
        assert!(asks_which("Who is the oldest library member?"));
        assert!(asks_which("Which customer spent the most?"));
        assert!(!asks_which("What is the highest price of a helmet?"));
        assert!(!asks_which("What was the largest order total?"));
        assert!(asks_which("What is the most expensive item in the shop?"));
        assert!(!asks_which("How many orders are there?"));
        assert!(selects_only_extremes("SELECT MIN(price) FROM products;"));
        assert!(selects_only_extremes(
            "select max(total) as top, min(total) from orders"
        ));
        assert!(!selects_only_extremes(
            "SELECT name, MIN(price) FROM products"
        ));
        assert!(!selects_only_extremes(
            "SELECT name FROM products ORDER BY price LIMIT 1"
        ));
        assert!(!selects_only_extremes(
            "SELECT name FROM products WHERE price = (SELECT MIN(price) FROM products)"
        ));
        assert!(extreme_only_message("cheapest").contains("which one is the cheapest"));
    }

    #[test]
    fn an_answer_given_again_is_told_the_last_result() {
        let last = "first_nm | last_nm | dob\nGeorge | Ellis | 1948-08-30\n(ordered by dob: the \
                    earliest birth date first: the oldest first)";
        let m = again_message(&["Ben".into(), "Carter".into()], &[], Some(last));
        assert!(m.contains("gives again Ben, Carter"), "{m}");
        assert!(m.contains("no tool result shows them"), "{m}");
        assert!(m.contains("George | Ellis | 1948-08-30"), "{m}");
        let long: String = (0..20).map(|i| format!("{i}\n")).collect();
        let m = again_message(&["7".into()], &[], Some(&long));
        assert!(
            m.contains("(… 8 more lines)") && !m.contains("\n13\n"),
            "{m}"
        );
        assert!(!again_message(&["7".into()], &[], None).contains("last tool result"));
        // A value the calculator gave from an input found nowhere: the input is named.
        let m = again_message(&["449.5".into()], &["420".into()], Some("449.5"));
        assert!(
            m.contains("it rests on 420, which appears in no tool result"),
            "{m}"
        );
    }

    #[test]
    fn an_answer_from_a_partial_sample_of_a_table_is_named() {
        let note = "Passages of the user's documents:\n  Members pay 14 euros.\n\n\
                    Some rows of the tables this task's words point to:\n\
                    -- members: 3 of its 17 rows (query for the others)\n\
                    member_no | first_nm | last_nm | dob\n\
                    1001 | Olivia | Grant | 1985-02-11\n\
                    1002 | Ben | Carter | 2014-09-03\n\
                    -- branches\n\
                    branch_code | branch_name\n\
                    CEN | Central Library";
        let task = "Who is the oldest library member?";
        assert_eq!(
            from_sample(
                "Olivia Grant is the oldest member, born 1985-02-11.",
                &[note],
                &[task],
                &[]
            ),
            vec!["Olivia", "Grant", "1985-02-11"]
        );
        // Rows shown in full (no partial heading), the passages and the column names are not
        // a sample; a value also found in a tool result is evidence.
        assert!(
            from_sample("Central Library, 14 euros, first_nm", &[note], &[task], &[]).is_empty()
        );
        let ordered = "-- loans: 5 of the 9 rows whose member_no is 1001 (query for the others)\n\
                       loan_id | loan_date\n7 | 2025-03-02\n\
                       (ordered by loan_date DESC: the latest date first: the most recent first)";
        assert!(from_sample("the latest one", &[ordered], &[task], &[]).is_empty());
        assert!(from_sample(
            "Olivia Grant",
            &[note],
            &[task, "first_nm\nOlivia Grant"],
            &[]
        )
        .is_empty());
        // A row a tool result points to (its birth date, queried alone) is no guess; a
        // word shorter than LINK_CHARS ("14") ties nothing.
        let dob = "MIN(dob)\n1985-02-11";
        assert!(from_sample("Olivia Grant", &[note], &[task], &[dob]).is_empty());
        assert_eq!(
            from_sample("Ben Carter", &[note], &[task], &[dob, "n\n14"]),
            ["Ben", "Carter"]
        );
        // A calculation on sampled values: the numbers of its expression.
        let fees = "-- visit: 3 of its 30 rows (query for the others)\n\
                    visit_id | fee\n1 | 48\n2 | 62\n3 | 7";
        assert_eq!(
            from_sample("48 + 62", &[fees], &[task], &[]),
            vec!["48", "62"]
        );
    }

    /// Regression (the garage and office suites): the calculator computed `2.75 * 68` = 187
    /// and `35 * 186` = 6510, and the model answered 185 and 6,110 (its thought's own
    /// products) three times. Once made-up numbers were sent back, the answer is decoded
    /// under a pattern that writes only the evidence's numbers, in the forms a person would.
    #[test]
    fn a_grounded_answer_writes_only_the_numbers_of_the_evidence() {
        let evidence = [
            "A job takes 2 hours and 45 minutes of labour at 68 euros per hour.",
            "VAT of 21% is added.",
            "187",
            "≈ 6.19834710744 (exactly 750/121)",
            "6510",
        ];
        let literals = grounded_literals(&evidence, &["21 * 22 * 1.19"]).unwrap();
        for l in [
            "2", "45", "68", "187", "21", "1.21", "0.21", "6.2", "6.20", "6", "6,510", "462",
        ] {
            assert!(literals.contains(&l.to_string()), "{l} in {literals:?}");
        }
        let re = regex::Regex::new(&grounded_answer_pattern(&literals)).unwrap();
        for ok in [
            "The labour costs 187 euros.",
            "187",
            "It is 6,510 euros, or 6.20 with VAT of 21%.",
            "No number at all",
            "2 hours and 45 minutes: 187.",
        ] {
            assert!(re.is_match(ok), "{ok}");
        }
        for bad in [
            "The labour costs 185 euros.",
            "6,110 euros",
            "6, 110",
            "1870",
            "187.5",
            "6.19",
        ] {
            assert!(!re.is_match(bad), "{bad}");
        }
        // Too many numbers to list: no pattern.
        let many: Vec<String> = (0..2000).map(|i| format!("{}", 100_000 + i * 7)).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(grounded_literals(&many, &[]).is_none());
    }

    /// Regression (the office suite): "8% of 3,900 euros for a full year is 11,232 euros."
    /// was sent back for its "11", an employee id of a sample row: the thousands comma split
    /// the number in two. A number written with thousands commas is one word, and a sampled
    /// value written that way is still found.
    #[test]
    fn a_number_with_thousands_commas_is_one_word() {
        let claims = "-- expenses_claim: 3 of its 25 rows (query for the others)\n\
                      id | employee_id | amount\n1 | 11 | 1232\n2 | 12 | 142.6";
        let task = "Someone earns 3,900 euros a month. What is 8% of their salary for a full year?";
        assert!(from_sample(
            "8% of 3,900 euros for a full year is 11,232 euros.",
            &[claims],
            &[task],
            &[]
        )
        .is_empty());
        assert_eq!(
            from_sample("The claim was 1,232 euros.", &[claims], &[task], &[]),
            vec!["1232"]
        );
        assert_eq!(
            words("3,4 and 1,234,567 or 12,3456"),
            ["and", "1234567", "12", "3456"]
        );
    }

    #[test]
    fn arithmetic_the_answer_shows_is_checked_not_sent_back() {
        let task = ["A shop sells 37 boxes of 24 pens each, and 100 loose pens. How many pens?"];
        // A chain worked step by step: 888 is 37 * 24, 988 is 888 + 100.
        let c = check("37 * 24 + 100 = 888 + 100 = 988", &task, &[]);
        assert!(c.unsupported.is_empty(), "{c:?}");
        assert_eq!(c.shown, ["37 * 24", "888 + 100"]);
        assert!(
            check("37 \\times 24 = 888 pens, and 888 + 100 = 988.", &task, &[])
                .unsupported
                .is_empty()
        );
        // Wrong arithmetic, and a right result from a number found nowhere, are sent back.
        assert_eq!(check("37 * 24 = 878", &task, &[]).unsupported, ["878"]);
        assert_eq!(
            check("888 + 988 = 1876", &task, &[]).unsupported,
            ["888", "988", "1876"]
        );
        assert_eq!(
            check("37 * 26 = 962", &task, &[]).unsupported,
            ["26", "962"]
        );
        // A value not right after the `=` is not what the arithmetic gives.
        assert_eq!(
            check("37 * 24 = about 888", &task, &[]).unsupported,
            ["888"]
        );
    }

    #[test]
    fn numbers_are_read_with_commas_decimals_and_signs_but_not_inside_words() {
        let n: Vec<f64> = numbers("It costs 1,234.50 euros, -3 degrees, Q4_K and 2nd place; 7.")
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        assert_eq!(n, vec![1234.5, -3.0, 7.0]);
    }

    #[test]
    fn an_answer_is_supported_by_its_evidence_allowing_rounding() {
        let ev = [
            "Result of calculator:\n269.70000000000005",
            "Task: What would 3 Helmet Pro cost?",
        ];
        assert!(unsupported("3 Helmet Pro cost 269.7 euros.", &ev).is_empty());
        assert!(unsupported("28.9 kg", &["28.945"]).is_empty());
        assert_eq!(
            unsupported(
                "Martha's bedroom is 240 square feet, 2 rooms.",
                &["300 and 60, 2"]
            ),
            ["240"]
        );
        assert_eq!(unsupported("1,200 or 1200", &["5"]), ["1,200", "1200"]);
    }

    #[test]
    fn a_calculator_result_from_made_up_inputs_is_not_evidence() {
        // 22.5 was never looked up: 3 * 22.5 = 67.5 does not support the answer.
        let base = ["Task: What would 3 Helmet Pro cost?"];
        let c = check(
            "They cost 67.5 euros.",
            &base,
            &[(Some("3 * 22.5"), "67.5")],
        );
        assert_eq!(c.unsupported, ["67.5"]);
        assert_eq!(c.ungrounded_inputs, ["22.5"]);
        // Looked up first, then computed: supported.
        let rounds = [(None, "price\n89.9"), (Some("3 * 89.9"), "269.7")];
        assert_eq!(check("269.7 euros", &base, &rounds), Check::default());
        // Halves and percentages need no lookup.
        let c = check("42", &["84 bottles"], &[(Some("84 / 2"), "42")]);
        assert_eq!(c, Check::default());
        assert!(check_message_with(&["67.5".into()], &["22.5".into()]).contains("rests on 22.5"));
    }

    #[test]
    fn a_percent_stands_for_its_fraction_and_what_is_left_after_it() {
        // Regression: "What would it have been with a 15% discount?" answered by
        // `48 * (1 - 0.15)` = 40.8 was sent back as unsupported.
        let base = [
            "The fee was 48 euros.",
            "What would it have been with a 15% discount?",
        ];
        for expr in [
            "48 * (1 - 0.15)",
            "48 * 0.85",
            "48 - 48 * 0.15",
            "48 * 1.15",
        ] {
            let rounds = [(Some(expr), "40.8")];
            let c = check("It would have been 40.8 euros.", &base, &rounds);
            assert!(c.ungrounded_inputs.is_empty(), "{expr}: {c:?}");
        }
        // A fraction no percent stands for is still a made-up input.
        let c = check("40.8", &base, &[(Some("48 * 0.7"), "33.6")]);
        assert_eq!(c.ungrounded_inputs, ["0.7"]);
    }

    #[test]
    fn arithmetic_in_the_thought_with_units_in_words_supports_the_answer() {
        let base = [
            "Job 3 needs a courtesy car for 2 days. What does the courtesy car cost?",
            "For shorter jobs a courtesy car costs 30 euros per day.",
        ];
        let thought = "The job needs a courtesy car for 2 days, which costs 30 euros per day. \
                       The total cost is 30 euros * 2 days = 60 euros.";
        let answer = "The courtesy car for job 3 costs 60 euros.";
        assert_eq!(check(answer, &base, &[]).unsupported, ["60"]);
        let c = check_with_thought(answer, thought, &base, &[]);
        assert!(c.unsupported.is_empty(), "{c:?}");
        assert_eq!(c.shown, ["30 * 2"]);
        // Arithmetic that is wrong, or on a number found nowhere, supports nothing.
        let wrong = "The total cost is 30 euros * 2 days = 70 euros.";
        let c = check_with_thought("It costs 70 euros.", wrong, &base, &[]);
        assert_eq!(c.unsupported, ["70"]);
        let made_up = "The total cost is 35 euros * 2 days = 70 euros.";
        let c = check_with_thought("It costs 70 euros.", made_up, &base, &[]);
        assert_eq!(c.unsupported, ["70"]);
        // Up to three words of a unit, on either side of an operator.
        assert_eq!(
            without_units("20 euros per night * 6 nights = 120 euros"),
            "20 * 6 = 120 euros"
        );
    }

    /// Regression (issue 19, the garage suite): "What does the labour on job 12 cost, before
    /// VAT?" was answered "about 6.20 euros": the job's 7.5 hours divided by 1.21; the rate per
    /// hour was never found.
    #[test]
    fn a_sum_of_money_from_a_calculation_with_no_price_is_named() {
        let task = "What does the labour on job 12 cost, before VAT?";
        let context =
            "Passages of the user's documents:\n  VAT of 21% is added to every invoice.\n\
                       -- job: the row whose job_id is 12\n\
                       job_id | veh_id | kind | labour_hrs\n12 | 1 | repair | 7.5";
        let told = [task, context];
        let rounds = [(
            Some("7.5 / (1 + 0.21)"),
            "≈ 6.19834710744 (exactly 750/121)",
        )];
        let p = priceless(
            "The labour on job 12 costs approximately 6.20 euros before VAT.",
            &told,
            &rounds,
        )
        .unwrap();
        assert_eq!(p.amount, "6.20");
        assert_eq!(p.expression, "7.5 / (1 + 0.21)");
        assert_eq!(
            p.operands,
            [
                ("7.5".to_string(), Some("labour_hrs".to_string())),
                ("1".to_string(), None),
                ("0.21".to_string(), None)
            ]
        );
        assert_eq!((p.rates.len(), p.suggestion.as_deref()), (0, None));
        let m = priceless_message(&p);
        assert!(
            m.contains("6.20") && m.contains("none of those numbers is a price"),
            "{m}"
        );
        // With the rate from the documents, from a column of prices, or from an earlier
        // calculation that had one: a price is in it.
        let priced = [task, "Labour is charged at 68 euros per hour."];
        let rounds = [(Some("7.5 * 68"), "510")];
        assert_eq!(priceless("It costs 510 euros.", &priced, &rounds), None);
        let rows = [task, "descr | unit_cost\nwiper blade | 11"];
        let rounds = [(Some("11 * 3"), "33"), (Some("33 * 1.2"), "39.6")];
        assert_eq!(
            priceless("3 blades cost 39.60 euros.", &rows, &rounds),
            None
        );
        // A price the task gives with a word of paying, not a currency.
        let word = ["Each apple costs 2 and Tom buys 5 apples. How much does he pay?"];
        assert_eq!(
            priceless("Tom pays $10.", &word, &[(Some("2 * 5"), "10")]),
            None
        );
        // A number of the calculation found nowhere (made up): the evidence check's case.
        assert_eq!(
            priceless(
                "It costs 9.07 euros.",
                &told,
                &[(Some("7.5 * 1.21"), "9.075")]
            )
            .map(|p| p.amount),
            Some("9.07".to_string())
        );
        assert_eq!(
            priceless(
                "It costs 157.3 euros.",
                &told,
                &[(Some("130 * 1.21"), "157.3")]
            ),
            None
        );
        // An answer that is not a sum of money, or whose amount no calculation gave.
        assert_eq!(
            priceless(
                "The job took 7.5 hours.",
                &told,
                &[(Some("7.5 * 1"), "7.5")]
            ),
            None
        );
        assert_eq!(
            priceless("It costs 40 euros.", &told, &[(Some("7.5 * 2"), "15")]),
            None
        );
    }

    /// Regression: "What does it cost to board a cat at the clinic for 6 nights?" answered
    /// "18 euros" (one night's price, found in the documents): no check saw the step left out.
    #[test]
    fn an_amount_of_the_task_that_no_calculation_used_is_named() {
        let task = "What does it cost to board a cat at the clinic for 6 nights?";
        assert_eq!(
            unused_quantities(
                task,
                "For 6 nights it is 18 euros.",
                &[],
                &["Boarding a cat costs 18 euros a night."]
            ),
            ["6 nights"]
        );
        // Used by a calculator call, or by the reasoning: fine.
        assert!(
            unused_quantities(task, "108 euros", &[r#"{"expression":"18 * 6"}"#], &[]).is_empty()
        );
        assert!(
            unused_quantities(task, "108 euros", &["18 * 6 = 108\nAnswer: 108"], &[]).is_empty()
        );
        // An answer with no number is not a computed result.
        assert!(
            unused_quantities("Name 3 dog breeds.", "Poodle, Beagle, Boxer", &[], &[]).is_empty()
        );
        // A percent is used by its fraction or what is left after it.
        let task = "Rex has to lose 15% of his weight. What should his target weight be?";
        assert_eq!(
            unused_quantities(task, "34 kg", &[], &["weight_kg\n34"]),
            ["15%"]
        );
        assert!(unused_quantities(task, "28.9 kg", &["34 * 0.85"], &[]).is_empty());
        // Worked out in the head from a shown number, by one operation: used.
        assert!(unused_quantities(task, "28.9 kg", &[], &["weight_kg\n34"]).is_empty());
        let task = "How much would 5 Trail Gloves cost?";
        let seen = ["name | price | stock\nTrail Gloves | 24 | 120"];
        assert!(unused_quantities(task, "5 Trail Gloves cost 120 euros.", &[], &seen).is_empty());
        assert_eq!(
            unused_quantities(task, "They cost 24 euros.", &[], &seen),
            ["5 Trail"]
        );
    }

    #[test]
    fn years_dates_labels_and_ones_are_not_amounts() {
        for task in [
            "How many visits were there in 2025?",
            "What did order 1042 cost?",
            "Who visited on 3 March?",
            "Is the clinic open at 9 am?",
            "What is the fee for 1 night?",
            "What does room #6 cost per night?",
            "How much does return shipping cost for orders below 100 euros?",
            "Who has more than 5 items on loan?",
            "Which pet came on 2025-03-10?",
            "How many visits took place in April? Use MONTH(visit_date) = 4 in the query.",
            "Job 15 needs a courtesy car. What does it cost?",
            "What was charged for booking 7?",
        ] {
            assert!(
                unused_quantities(task, "It is 48 euros.", &[], &[]).is_empty(),
                "{task}"
            );
        }
        assert_eq!(
            unused_quantities(
                "What would 3 Helmet Pro cost?",
                "89.9 euros",
                &[],
                &["Helmet Pro | 89.9"]
            ),
            ["3 Helmet"]
        );
    }

    #[test]
    fn a_message_names_the_sampled_values_too() {
        let m = with_sample_note(&check_message(&["55.50".into()]), &["48".into()]);
        assert!(
            m.starts_with("[check: 55.50 in your answer does not appear"),
            "{m}"
        );
        assert!(m.ends_with("48 comes from the few sample rows shown before the first step, not from the whole table: query the table with the sql tool.]"), "{m}");
        assert_eq!(with_sample_note("[check: x]", &[]), "[check: x]");
    }

    #[test]
    fn the_message_names_the_numbers() {
        assert!(check_message(&["240".into()]).contains("240 in your answer does not appear"));
        assert!(check_message(&["1".into(), "2".into()]).contains("If they come from arithmetic"));
    }

    #[test]
    fn superlatives_and_queries_that_compare_rows_are_told_apart() {
        assert_eq!(
            superlative("Which customer has spent the most in total?"),
            Some("most")
        );
        assert_eq!(superlative("Who is the oldest member?"), Some("oldest"));
        assert_eq!(superlative("List at most 3 books."), None);
        assert_eq!(superlative("At least how many loans are open?"), None);
        assert_eq!(superlative("How many almost-new books are there?"), None);
        assert!(compares_rows("SELECT name FROM t ORDER BY x DESC LIMIT 1"));
        assert!(compares_rows("SELECT a, SUM(b) FROM t GROUP  BY a"));
        assert!(compares_rows(
            "SELECT name FROM t WHERE dob = (SELECT min(dob) FROM t)"
        ));
        assert!(!compares_rows(
            "SELECT FirstName FROM customer WHERE CustomerId = 1"
        ));
        assert!(!compares_rows("SELECT max_price FROM t"));
    }

    #[test]
    fn an_answer_naming_the_other_end_of_a_limited_order_is_named() {
        let q = "SELECT first_nm, last_nm, dob FROM members ORDER BY dob DESC LIMIT 1";
        let young = "first_nm | last_nm | dob\nMia | Hoffmann | 2016-01-14\n(ordered by dob DESC: the latest birth date first: the youngest first)";
        let r = young;
        assert_eq!(
            order_contradiction(
                "Mia Hoffmann is the oldest library member, born in 2016.",
                q,
                r
            ),
            Some(("oldest".to_string(), "youngest".to_string()))
        );
        // The right end, no limit (every row shown), or no order note: nothing to say.
        assert_eq!(
            order_contradiction("Mia Hoffmann is the youngest member.", q, r),
            None
        );
        assert_eq!(
            order_contradiction("Mia is the oldest.", &q.replace(" LIMIT 1", ""), r),
            None
        );
        assert_eq!(
            order_contradiction("Mia is the oldest.", q, "first_nm\nMia"),
            None
        );
        let r = "loan_date\n2025-01-04\n(ordered by loan_date: the earliest date first: the longest ago first)";
        assert_eq!(
            order_contradiction(
                "The most recent loan was on 2025-01-04.",
                "SELECT loan_date FROM loans ORDER BY loan_date LIMIT 1",
                r
            ),
            Some(("most recent".to_string(), "longest ago".to_string()))
        );
        // A word inside another word is no end ("boldest").
        assert_eq!(
            order_contradiction("Mia is the boldest pick.", q, young),
            None
        );
        assert!(order_message("oldest", "youngest").contains("lists the youngest first"));
    }

    /// Regression (issue 19, the garage suite): asked who had been a customer the longest,
    /// the 1.5B model ordered by the date they came `DESC LIMIT 1`, was told the most recent
    /// came first, and named the newest customer as the one of longest standing.
    #[test]
    fn the_longest_over_dates_is_the_earliest_end() {
        let q = "SELECT fname, lname, since FROM cust ORDER BY since DESC LIMIT 1";
        let r = "fname | lname | since\nBilal | Yilmaz | 2025-01-27\n(ordered by since DESC: the latest date first: the most recent first)";
        assert_eq!(
            order_contradiction("Bilal Yilmaz has been our customer the longest.", q, r),
            Some(("longest".to_string(), "most recent".to_string()))
        );
        let r = "fname\nNora\n(ordered by since: the earliest date first: the longest ago first)";
        assert_eq!(
            order_contradiction(
                "Nora has been our customer the longest.",
                &q.replace(" DESC", ""),
                r
            ),
            None
        );
    }
}
