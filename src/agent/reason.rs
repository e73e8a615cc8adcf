//! The `reason` action: the model works the task out step by step in plain text, as it was
//! trained to, and every calculation it writes is checked by the calculator as it goes.
//!
//! Why: a loop whose first step must be a tool call made its model translate a whole word
//! problem into one expression, with a one-sentence thought; the same model alone, reasoning
//! step by step, answered more problems right (BENCHMARKS.md, issue 19). Reasoning in a JSON
//! string inside the agent's long prompt was worse than the model's own chat. So `reason` runs
//! in a context of its own (the task, what the tools found so far, "think step by step"): the
//! prompt under which the model reasons best. Its KV cache is separate from the agent's, so
//! the agent's conversation stays cached.
//!
//! The tool in it: whenever the text reaches `EXPRESSION =` and the expression is plain
//! arithmetic (`45 * 6`, `\frac{11}{15} \times 300`, `(300 - 60) / 2`), generation stops, the
//! calculator computes the value, and the value is written after the `=` for the model, which
//! goes on from it. The model's own arithmetic is never the last word; its reasoning is its own.
//! (The calculator annotations of the GSM8K paper, done at decode time.)
//!
//! A program it writes (a coder model's habit) is run the same way: at the output block that
//! follows a Python block, straight-line arithmetic is run ([`super::program`]) and its real
//! output written in, where the model would have made one up.
//!
//! The result is the agent's observation: the reasoning with its last line, `Answer: …`.
//!
//! Votes (self-consistency): with `--reason-votes N` above 1, reasonings are sampled
//! ([`VOTE_TEMPERATURE`]) beside the greedy one, up to N in all, until the vote is settled
//! ([`vote_settled`]); the greedy answer ([`answer_key`]) stands unless more than half of
//! them reached one other answer ([`tally`]).

use std::sync::OnceLock;

use serde_json::json;

use crate::model::template::Message;
use crate::tools::calculator::{evaluate, Num};
use crate::tools::ToolInfo;

/// The action's name in the step schema.
pub const REASON: &str = "reason";

/// The most tokens of one reasoning. Half of the 1.5B model's reasonings of word problems
/// take under 300 tokens; at 512, one in 27 was cut before its answer line (one of them in
/// the middle of `\boxed{9000`), and a reasoning cut short has no answer to give.
pub const REASON_MAX_TOKENS: usize = 1024;

/// The most characters of the tools' results shown to the reasoning.
const FOUND_MAX_CHARS: usize = 3000;

/// The instruction after the task: the same words as the model-alone baseline, so the loop
/// reasons at least as well as its model does alone.
pub const INSTRUCTION: &str =
    "Think step by step, then give the final answer on the last line, as: Answer: <the answer>";

/// The temperature of the reasonings sampled for a vote (the greedy one is the first): the
/// self-consistency paper's 0.7, with the sampler's default top-k and top-p.
pub const VOTE_TEMPERATURE: f32 = 0.7;

/// The most reasonings one `reason` step may take (`--reason-votes`).
pub const MAX_VOTES: usize = 8;

/// What a reasoning's answer says, for comparing two reasonings: the numbers of its last
/// `Answer:` line (or last `\boxed{}`), as the calculator would read them (`1,200` is 1200,
/// `18.50` is 18.5), or where it has none its words in lower case. `None` when the reasoning
/// gives no answer (cut by its token limit, say).
pub fn answer_key(text: &str) -> Option<String> {
    static NUMBER: OnceLock<regex::Regex> = OnceLock::new();
    let number =
        NUMBER.get_or_init(|| regex::Regex::new(r"-?\d+(?:\.\d+)?").expect("the pattern is valid"));
    let line = text
        .lines()
        .rev()
        .find_map(|l| {
            let lower = l.to_ascii_lowercase();
            lower
                .find("answer:")
                .map(|i| l[i + "answer:".len()..].to_string())
        })
        .or_else(|| last_boxed(text).map(str::to_string))?;
    let line = normalize(&line);
    let numbers: Vec<String> = number
        .find_iter(&line)
        .map(|m| {
            let n = m.as_str();
            match n.split_once('.') {
                Some((int, frac)) if frac.trim_end_matches('0').is_empty() => int.to_string(),
                Some((int, frac)) => format!("{int}.{}", frac.trim_end_matches('0')),
                None => n.to_string(),
            }
        })
        .collect();
    if !numbers.is_empty() {
        return Some(numbers.join(" "));
    }
    let words: Vec<String> = line
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// The content of the last `\boxed{…}` in `text`, braces balanced; `None` when there is none,
/// it is empty, or it is not closed (a reply cut by the token limit). The model-alone
/// baseline reads its answers with it too.
pub fn last_boxed(text: &str) -> Option<&str> {
    let at = text.rfind("\\boxed{")? + "\\boxed{".len();
    let mut depth = 1usize;
    for (i, c) in text[at..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    let inner = text[at..at + i].trim();
                    return (!inner.is_empty()).then_some(inner);
                }
            }
            _ => {}
        }
    }
    None
}

/// The vote of reasonings whose answers are `keys`, in the order they were made, the greedy
/// one first: the index of the reasoning whose answer wins, and how many reached it. The
/// greedy answer stands unless more than half of the reasonings reached one other answer: a
/// sampled reasoning is a noisier guess than the greedy one (on the suite's word problems the
/// greedy answer was right where three samples split 2, 2 and 0 against it). When the greedy
/// reasoning gave no answer, the answer most reached wins (a tie: the one given first).
/// Reasonings without an answer do not vote; `None` when none has one.
pub fn tally(keys: &[Option<String>]) -> Option<(usize, usize)> {
    let count = |key: &String| keys.iter().filter(|k| k.as_ref() == Some(key)).count();
    let mut best: Option<(usize, usize)> = None;
    for (i, key) in keys.iter().enumerate() {
        let Some(key) = key else { continue };
        if keys[..i].iter().any(|k| k.as_ref() == Some(key)) {
            continue;
        }
        let n = count(key);
        if best.is_none_or(|(_, c)| n > c) {
            best = Some((i, n));
        }
    }
    match &keys.first() {
        Some(Some(greedy)) => match best {
            Some((i, n)) if i != 0 && 2 * n > keys.len() => Some((i, n)),
            _ => Some((0, count(greedy))),
        },
        _ => best,
    }
}

/// Whether a vote of at most `most` reasonings, `keys` made so far (the greedy one first),
/// is decided: no answer but the greedy one can still reach more than half of `most`, or
/// every reasoning has been made. (Without a greedy answer, every reasoning is made.)
pub fn vote_settled(keys: &[Option<String>], most: usize) -> bool {
    let left = most.saturating_sub(keys.len());
    if left == 0 {
        return true;
    }
    let Some(Some(greedy)) = keys.first() else {
        return false;
    };
    let strongest = keys
        .iter()
        .flatten()
        .filter(|k| *k != greedy)
        .map(|k| keys.iter().filter(|x| x.as_ref() == Some(k)).count())
        .max()
        .unwrap_or(0);
    // A new answer could take every reasoning left; a given one adds them to its count.
    2 * (strongest + left) <= most
}

/// `reason` as the step schema and the system text list it: no arguments.
pub fn info() -> ToolInfo {
    ToolInfo {
        name: REASON.to_string(),
        description: "Works the task out step by step in plain text, with every calculation checked by the calculator, and ends with the answer it found. \
                      Use it first for word problems and for any task that needs several steps of arithmetic or logic; then give the final_answer from it. \
                      It sees the task, what was shown before the first step and the tools' results so far, not the whole database or documents: look things up first."
            .to_string(),
        args_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
    }
}

/// The most characters of earlier turns and facts the reasoning is shown (the newest kept).
const EARLIER_MAX_CHARS: usize = 1500;

/// The reasoning's own conversation: what the task rests on (the session's earlier turns, as
/// (task, answer), and the long-term facts found for it; the newest kept when they are long),
/// the task, what the tools found so far (what was `shown` before round 1, then the results
/// of the calls in `found`, oldest first, the newest kept when they are long), and the
/// instruction. Without the earlier turns, "And how many would be left after selling 5 of
/// them?" was reasoned about with no idea what "them" was.
pub fn messages(
    task: &str,
    history: &[(String, String)],
    facts: &[String],
    shown: &[String],
    found: &[String],
) -> Vec<Message> {
    let found: Vec<String> = shown.iter().chain(found).cloned().collect();
    let mut lines: Vec<String> = facts.iter().map(|f| format!("- {}", f.trim())).collect();
    if !lines.is_empty() {
        lines.insert(0, "Known facts:".to_string());
    }
    let turns: Vec<String> = history
        .iter()
        .map(|(t, a)| format!("Earlier question: {}\nAnswer: {}", t.trim(), a.trim()))
        .collect();
    lines.extend(turns);
    let kept = newest_within(&lines, EARLIER_MAX_CHARS);
    let mut user = String::new();
    if !kept.is_empty() {
        user.push_str(&kept.join("\n"));
        user.push_str("\n\n");
    }
    user.push_str(task.trim());
    if !found.is_empty() {
        let kept = newest_within(&found, FOUND_MAX_CHARS);
        user.push_str("\n\nWhat the tools found:\n");
        for f in kept {
            user.push_str(f.trim());
            user.push('\n');
        }
    }
    user.push('\n');
    user.push_str(INSTRUCTION);
    vec![
        Message::system("You are a helpful assistant."),
        Message::user(user),
    ]
}

/// The newest of `items` (the last ones) that fit in `max` characters together, oldest
/// first; the newest one always, however long.
fn newest_within(items: &[String], max: usize) -> Vec<&str> {
    let mut kept: Vec<&str> = Vec::new();
    let mut chars = 0;
    for item in items.iter().rev() {
        chars += item.len();
        if chars > max && !kept.is_empty() {
            break;
        }
        kept.push(item);
    }
    kept.reverse();
    kept
}

/// `answer` without the LaTeX a reasoning leaves in it: `\boxed{273}` and `\text{kg}` become
/// their content, `\(` `\)` `\[` `\]` go, and so do control characters. In a JSON string
/// the model's `\boxed` is the escape `\b` (a backspace) and `oxed`, `\text` a tab and
/// `ext`, `\frac` a form feed and `rac`: those are read back as the commands first.
/// Regression: the final answers "Layla earned \u{8}oxed{273}\\) dollars babysitting." and
/// "… before VAT is \u{8}oxed{542.64}\\) euros." reached the user with a backspace in them.
pub fn plain_answer(answer: &str) -> String {
    if !answer
        .chars()
        .any(|c| c == '\\' || (c.is_control() && c != '\n'))
    {
        return answer.to_string();
    }
    let mut s = answer.to_string();
    for (from, to) in [
        ("\u{8}oxed{", "\\boxed{"),
        ("\u{c}rac{", "\\frac{"),
        ("\text{", "\\text{"),
        ("\times", "\\times"),
    ] {
        s = s.replace(from, to);
    }
    static WRAPPED: OnceLock<regex::Regex> = OnceLock::new();
    let wrapped = WRAPPED.get_or_init(|| {
        regex::Regex::new(r"\\(?:boxed|text|mathrm|mbox)\{([^{}]*)\}")
            .expect("the pattern is valid")
    });
    static FRAC: OnceLock<regex::Regex> = OnceLock::new();
    let frac = FRAC.get_or_init(|| {
        regex::Regex::new(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}").expect("the pattern is valid")
    });
    loop {
        let next = wrapped.replace_all(&s, "$1").into_owned();
        let next = frac.replace_all(&next, "$1/$2").into_owned();
        if next == s {
            break;
        }
        s = next;
    }
    for (from, to) in [
        ("\\(", ""),
        ("\\)", ""),
        ("\\[", ""),
        ("\\]", ""),
        ("\\times", "×"),
        ("\\cdot", "·"),
        ("\\%", "%"),
        ("\\$", "$"),
    ] {
        s = s.replace(from, to);
    }
    let s: String = s
        .chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .collect();
    // The spaces the removed parts leave: one between words, none before punctuation.
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == ' ' && out.ends_with(' ') {
            continue;
        }
        if matches!(c, '.' | ',' | ';' | ':' | '!' | '?') && out.ends_with(' ') {
            out.pop();
        }
        out.push(c);
    }
    out.trim().to_string()
}

/// When `text` ends with `EXPRESSION =` and the expression is arithmetic the calculator
/// evaluates (at least one operator between numbers), the expression as the calculator read it
/// and the value to write after the `=`; else `None`.
pub fn checked_equation(text: &str) -> Option<(String, String)> {
    let body = text.trim_end_matches([' ', '\t']);
    let before = body.strip_suffix('=')?;
    // `==`, `<=`, `>=`, `!=` are comparisons, not a result to fill in.
    if before.ends_with(['=', '<', '>', '!']) {
        return None;
    }
    let line = before.rsplit('\n').next().unwrap_or(before);
    let expr = expression_suffix(&normalize(line))?;
    let value = evaluate(&expr).ok()?;
    Some((expr, inline_value(&value)?))
}

/// How the reasoning opens the output block of a program it wrote.
const OUTPUT_FENCE: &str = "```output\n";

/// When `text` ends by opening an output block (```` ```output ````) right after a Python
/// block whose program runs ([`super::program::run`]), the program and its output, to be
/// written in the block for the model; else `None` (the model writes the block itself).
/// Regression: the reasoning wrote a right program for "One-third of a class of 39 students
/// took part … How many did not?", then its output as `13.0`, and answered 13 (it is 26).
pub fn program_output(text: &str) -> Option<(String, String)> {
    let before = text.strip_suffix(OUTPUT_FENCE)?;
    let start = before.rfind("```python")?;
    let block = &before[start + "```python".len()..];
    let end = block.rfind("```")?;
    if !block[end + 3..].trim().is_empty() {
        return None;
    }
    let code = &block[..end];
    let output = super::program::run(code)?;
    Some((code.trim().to_string(), output))
}

/// The arithmetic that ends `text` (its last line, LaTeX and typographic operators read as
/// the calculator's), when there is an operator between two operands: what an answer's
/// `37 * 24 + 100 = 988` says it computed before the `=`.
pub(crate) fn arithmetic_tail(text: &str) -> Option<String> {
    let line = text.rsplit('\n').next().unwrap_or(text);
    expression_suffix(&normalize(line))
}

/// The value as the reasoning should read it: an integer or a short decimal; a longer one
/// rounded to 4 decimals. `None` for a value that has no such form (too large).
fn inline_value(v: &Num) -> Option<String> {
    if let Some(i) = v.to_integer() {
        return Some(i.to_string());
    }
    let x = v.as_f64();
    if !x.is_finite() || x.abs() >= 1e15 {
        return None;
    }
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    Some(if s == "-0" { "0".into() } else { s.to_string() })
}

/// One line of reasoning with LaTeX and typographic operators written as the calculator's:
/// `\times`, `\cdot`, `×` → `*`; `\div`, `÷` → `/`; `−` → `-`; `\frac{a}{b}` → `((a)/(b))`;
/// math delimiters, `$` and `\left`/`\right` dropped; units and labels in `\text{…}` or
/// `\mathrm{…}` (`211 \text{ boxes}`) dropped; thousands separators (`1,200`) joined.
fn normalize(line: &str) -> String {
    static SEPARATOR: OnceLock<regex::Regex> = OnceLock::new();
    static FRAC: OnceLock<regex::Regex> = OnceLock::new();
    static UNIT: OnceLock<regex::Regex> = OnceLock::new();
    let frac = FRAC.get_or_init(|| {
        regex::Regex::new(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}").expect("the pattern is valid")
    });
    // Only words: `\text{42}` is a number written as text, kept.
    let unit = UNIT.get_or_init(|| {
        regex::Regex::new(r"\\(?:text|mathrm|mbox)\{[^{}0-9]*\}").expect("the pattern is valid")
    });
    let mut s = unit.replace_all(line, " ").into_owned();
    for (from, to) in [
        ("\\times", "*"),
        ("\\cdot", "*"),
        ("×", "*"),
        ("\\div", "/"),
        ("÷", "/"),
        ("−", "-"),
        ("\\left", ""),
        ("\\right", ""),
        ("\\(", " "),
        ("\\)", " "),
        ("\\[", " "),
        ("\\]", " "),
        ("\\$", " "),
        ("$", " "),
        ("\\,", ""),
    ] {
        s = s.replace(from, to);
    }
    loop {
        let next = frac.replace_all(&s, "(($1)/($2))").into_owned();
        if next == s {
            break;
        }
        s = next;
    }
    let sep = SEPARATOR
        .get_or_init(|| regex::Regex::new(r"(\d),(\d{3})\b").expect("the pattern is valid"));
    loop {
        let next = sep.replace_all(&s, "$1$2").into_owned();
        if next == s {
            break;
        }
        s = next;
    }
    s
}

/// The arithmetic at the end of `s`: the longest run of digits, operators, parentheses and
/// spaces that ends it, trimmed to start at a number or an opening parenthesis, with its
/// parentheses balanced; `None` unless it holds an operator between two operands.
fn expression_suffix(s: &str) -> Option<String> {
    let start = s
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_digit() || " \t.+-*/^()".contains(*c))
        .last()
        .map(|(i, _)| i)?;
    let mut e = s[start..].trim();
    // A leading `)` or operator belongs to what came before.
    loop {
        let t = e.trim_start_matches(|c: char| "+*/^) \t".contains(c));
        // Unbalanced `(` on the left: drop them one at a time.
        let opens = t.matches('(').count();
        let closes = t.matches(')').count();
        if opens > closes {
            match t.strip_prefix('(') {
                Some(rest) => {
                    e = rest;
                    continue;
                }
                None => return None,
            }
        }
        if closes > opens {
            return None;
        }
        e = t;
        break;
    }
    let e = e.trim();
    static BINARY: OnceLock<regex::Regex> = OnceLock::new();
    let binary = BINARY.get_or_init(|| {
        regex::Regex::new(r"[\d)]\s*[-+*/^]\s*[-\d(.]").expect("the pattern is valid")
    });
    binary.is_match(e).then(|| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latex_and_control_characters_leave_an_answer() {
        assert_eq!(
            plain_answer("Layla earned \u{8}oxed{273}\\) dollars babysitting."),
            "Layla earned 273 dollars babysitting."
        );
        assert_eq!(
            plain_answer("The cost is \\(\\boxed{542.64}\\) euros."),
            "The cost is 542.64 euros."
        );
        assert_eq!(
            plain_answer("Rex should weigh 28.9\text{ kg}, that is 34 \times 0.85."),
            "Rex should weigh 28.9 kg, that is 34 × 0.85."
        );
        assert_eq!(
            plain_answer("Each gets $\\frac{3}{4}$ of a pie, or \u{c}rac{6}{8}."),
            "Each gets $3/4$ of a pie, or 6/8."
        );
        // An answer without them is left exactly as it is.
        for plain in ["It costs $30.00.", "Two lines\nof answer", "a  b"] {
            assert_eq!(plain_answer(plain), plain);
        }
    }

    #[test]
    fn answers_are_compared_by_their_numbers_or_words() {
        let key = |t: &str| answer_key(t);
        assert_eq!(
            key("So 3 * 4 = 12.\nAnswer: $1,200.50 in total"),
            Some("1200.5".into())
        );
        assert_eq!(key("Answer: 18.00 dollars"), key("answer: \\$18"));
        assert_eq!(key("Answer: 5 hours and 30 minutes"), Some("5 30".into()));
        assert_eq!(key("Answer: The Blue Hall."), Some("the blue hall".into()));
        assert_eq!(
            key("the total is \\boxed{\\frac{1}{2}}"),
            key("Answer: \\boxed{1/2}")
        );
        assert_eq!(key("Step 1: 4 + 4 = 8, and then"), None);
        // The last answer line counts: a reasoning may state a draft answer and correct it.
        assert_eq!(
            key("Answer: 7\nWait, that is wrong.\nAnswer: 9"),
            Some("9".into())
        );
    }

    fn keys(s: &[Option<&str>]) -> Vec<Option<String>> {
        s.iter().map(|x| x.map(String::from)).collect()
    }

    #[test]
    fn the_greedy_answer_stands_unless_more_than_half_reach_another() {
        let t = |s: &[Option<&str>]| tally(&keys(s));
        assert_eq!(
            t(&[Some("110"), Some("90"), Some("90"), Some("90")]),
            Some((1, 3))
        );
        // Two of four is not more than half: the greedy 10 stands against 2, 2, 0.
        assert_eq!(
            t(&[Some("10"), Some("2"), Some("2"), Some("0")]),
            Some((0, 1))
        );
        assert_eq!(
            t(&[Some("5"), Some("7"), Some("7"), Some("5")]),
            Some((0, 2))
        );
        // Without a greedy answer the most common wins, the first of a tie.
        assert_eq!(t(&[None, Some("20"), Some("17"), Some("0")]), Some((1, 1)));
        assert_eq!(t(&[None, Some("7"), Some("8"), Some("8")]), Some((2, 2)));
        assert_eq!(t(&[None, None]), None);
    }

    #[test]
    fn a_vote_stops_once_the_greedy_answer_cannot_be_outvoted() {
        let s = |k: &[Option<&str>]| vote_settled(&keys(k), 4);
        assert!(!s(&[Some("7")]));
        // A sample that agrees settles it: the others could reach 2 of 4 at most.
        assert!(s(&[Some("7"), Some("7")]));
        assert!(!s(&[Some("7"), Some("9")]));
        // Two samples that disagree with each other: none can reach 3 of 4.
        assert!(s(&[Some("7"), Some("9"), Some("8")]));
        assert!(!s(&[Some("7"), Some("9"), Some("9")]));
        assert!(s(&[Some("7"), Some("9"), Some("9"), Some("9")]));
        // Without a greedy answer every reasoning is made.
        assert!(!s(&[None, Some("9"), Some("9")]));
    }

    fn check(text: &str) -> Option<String> {
        checked_equation(text).map(|(_, v)| v)
    }

    #[test]
    fn plain_and_latex_arithmetic_before_an_equals_sign_is_computed() {
        assert_eq!(check("Rolls baked: 45 * 6 =").as_deref(), Some("270"));
        assert_eq!(check("So 300 - 60 = ").as_deref(), Some("240"));
        assert_eq!(check("\\[ (300 - 60) / 2 =").as_deref(), Some("120"));
        assert_eq!(
            check("Finley gets \\frac{11}{15} \\times 300 =").as_deref(),
            Some("220")
        );
        assert_eq!(check("$1,200 × 3 =").as_deref(), Some("3600"));
        assert_eq!(check("cost: \\$2.50 \\times 4 =").as_deref(), Some("10"));
        assert_eq!(check("Each: 100 ÷ 3 =").as_deref(), Some("33.3333"));
        assert_eq!(check("0.2 * 0.5 =").as_deref(), Some("0.1"));
        assert_eq!(check("2 − 5 =").as_deref(), Some("-3"));
        // Units in `\text{…}`, inside a fraction and between factors (the 0.5B's habit).
        assert_eq!(
            check("\\text{Boxes} = \\frac{1234 \\text{ eggs}}{6 \\text{ eggs/box}} =").as_deref(),
            Some("205.6667")
        );
        assert_eq!(
            check("211 \\text{ boxes} \\times 3 \\mathrm{dollars} =").as_deref(),
            Some("633")
        );
        assert_eq!(
            check("1. First step.\n2. Total: 14 + 16 + 12 =").as_deref(),
            Some("42")
        );
    }

    #[test]
    fn what_is_not_arithmetic_is_left_to_the_model() {
        // No operator: a name for a number, or a value already written.
        assert_eq!(check("Let x ="), None);
        assert_eq!(check("The total is 42 ="), None);
        assert_eq!(check("45 * 6 = 270 ="), None);
        // Words in the way: the expression is only what follows them, with no operator.
        assert_eq!(check("20% of 50 ="), None);
        // Comparisons, and text that does not end with `=`.
        assert_eq!(check("if a + b =="), None);
        assert_eq!(check("3 + 4 <="), None);
        assert_eq!(check("3 + 4"), None);
        // An unbalanced `)` that belongs to a sentence, and division by zero.
        assert_eq!(check("(the sum) 3 + 4) ="), None);
        assert_eq!(check("5 / 0 ="), None);
    }

    #[test]
    fn a_program_is_run_where_its_output_block_opens() {
        let text = "Let's check with Python.\n```python\nstudents = 39\nleft = students - students / 3\nprint(left)\n```\n```output\n";
        let (code, out) = program_output(text).unwrap();
        assert!(code.starts_with("students = 39"));
        assert_eq!(out, "26.0");
        // Not at the output block yet, text between the blocks, or a program that is not
        // run: the model goes on.
        assert!(program_output(&text[..text.len() - 1]).is_none());
        assert!(program_output(&text.replace("```\n```output", "```\nSo:\n```output")).is_none());
        assert!(
            program_output("```python\nfor i in range(3):\n    print(i)\n```\n```output\n")
                .is_none()
        );
    }

    #[test]
    fn parentheses_opened_in_the_sentence_are_not_part_of_the_expression() {
        assert_eq!(
            checked_equation("(that is, (3 + 4) * 2 ="),
            Some(("(3 + 4) * 2".to_string(), "14".to_string()))
        );
    }

    #[test]
    fn the_reasoning_sees_the_task_and_the_newest_results() {
        let m = messages("How much?", &[], &[], &[], &[]);
        assert_eq!(m.len(), 2);
        assert!(m[1].content.starts_with("How much?\n"));
        assert!(m[1].content.ends_with(INSTRUCTION));
        let old = "a".repeat(FOUND_MAX_CHARS);
        let m = messages("How much?", &[], &[], &[], &[old, "price\n32.5".into()]);
        assert!(m[1]
            .content
            .contains("What the tools found:\nprice\n32.5\n"));
        assert!(
            !m[1].content.contains("aaa"),
            "the oldest long result is left out"
        );
    }

    /// Regression: in a session, "And how many would be left after selling 5 of them?" was
    /// reasoned about without the earlier turn that said what "them" was (12 Floor Pumps).
    #[test]
    fn the_reasoning_sees_the_earlier_turns_and_facts() {
        let history = [(
            "How many Floor Pumps are in stock?".to_string(),
            "There are 12 units of the Floor Pump in stock.".to_string(),
        )];
        let facts = ["The shop is in Berlin.".to_string()];
        let m = messages(
            "And how many would be left after selling 5 of them?",
            &history,
            &facts,
            &[],
            &[],
        );
        let u = &m[1].content;
        assert!(u.starts_with("Known facts:\n- The shop is in Berlin.\nEarlier question: How many Floor Pumps are in stock?\nAnswer: There are 12 units"), "{u}");
        assert!(u.contains("in stock.\n\nAnd how many would be left"), "{u}");
        // Long histories keep the newest turns.
        let long: Vec<(String, String)> = (0..100)
            .map(|i| (format!("question {i}"), "x".repeat(40)))
            .collect();
        let u = &messages("Now?", &long, &[], &[], &[])[1].content;
        assert!(
            u.contains("question 99") && !u.contains("question 0\n"),
            "{u}"
        );
    }

    /// Regression: the reasoning priced a lost book at an assumed $20 while the sample rows
    /// shown before round 1 held its replacement cost (24.5), and the passages the fee: it had
    /// been shown only the results of calls.
    #[test]
    fn the_reasoning_sees_what_was_shown_before_the_first_step() {
        let shown = [
            "Passages of the user's documents:\n  For a lost item you pay its replacement cost plus a fee of 5 euros.".to_string(),
            "-- books\ntitle | repl_cost\nThe River Oracle | 24.5".to_string(),
        ];
        let u = &messages("I lost The River Oracle. How much?", &[], &[], &shown, &[])[1].content;
        assert!(u.contains("What the tools found:\nPassages"), "{u}");
        assert!(u.contains("The River Oracle | 24.5\n"), "{u}");
        // Results of calls come after it, and it is the first left out when they are long.
        let call = format!("result {}", "x".repeat(FOUND_MAX_CHARS - 10));
        let u = &messages("How much?", &[], &[], &shown, &[call])[1].content;
        assert!(u.contains("result xxx") && !u.contains("24.5"), "{u}");
    }
}
