//! Scoring function calls against expected ones, as an AST checker does: the right function,
//! every expected argument present with an equal value (strings after normalising case and
//! whitespace, numbers numerically, arrays and objects element by element), no argument the
//! question did not give; an argument at the definition's `default` counts the same present or
//! absent (the function applies it either way); and a text reply where no
//! function fits (`"expected": []`). `cairn call --json-lines` scores every line that carries
//! `"expected"` and reports the totals ([`CallScores`]).

use serde::Serialize;
use serde_json::Value;

use super::{Call, CallOutput, Function};

/// Why a reply passed or failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The expected call(s), or text where none fits.
    Correct,
    /// Text where a call was expected.
    NoCall,
    /// A call where no function fits.
    CalledWhenNoneFits,
    /// Not the expected number of calls.
    CallCount,
    /// A function other than the expected one.
    WrongFunction,
    /// The right function with an argument missing, different, or not asked for.
    WrongArguments,
}

/// Whether two JSON values are equal as the scorer compares them.
pub fn values_match(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::String(a), Value::String(b)) => normalise(a) == normalise(b),
        (Value::Number(a), Value::Number(b)) => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
            _ => false,
        },
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| values_match(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|w| values_match(v, w)))
        }
        _ => want == got,
    }
}

/// Lower case, runs of whitespace as one space, trimmed.
fn normalise(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Whether `got` is the call `want` of `function`.
fn call_matches(want: &Call, got: &Call, function: Option<&Function>) -> bool {
    if want.name != got.name {
        return false;
    }
    let (Some(w), Some(g)) = (want.arguments.as_object(), got.arguments.as_object()) else {
        return values_match(&want.arguments, &got.arguments);
    };
    let props = function.and_then(|f| f.parameters.get("properties"));
    let is_default = |k: &str, v: &Value| {
        props
            .and_then(|p| p.get(k))
            .and_then(|p| p.get("default"))
            .is_some_and(|d| values_match(d, v))
    };
    // An argument at its default means the same present or absent, either way round.
    w.iter().all(|(k, v)| match g.get(k) {
        Some(x) => values_match(v, x),
        None => is_default(k, v),
    }) && g
        .iter()
        .filter(|(k, _)| !w.contains_key(*k))
        .all(|(k, v)| is_default(k, v))
}

/// Judges `output` against the `expected` calls (empty: no function fits) over `functions`.
/// Several expected calls may come in any order.
pub fn judge(expected: &[Call], output: &CallOutput, functions: &[Function]) -> Verdict {
    let got = &output.calls;
    match (expected.is_empty(), got.is_empty()) {
        (true, true) => return Verdict::Correct,
        (true, false) => return Verdict::CalledWhenNoneFits,
        (false, true) => return Verdict::NoCall,
        (false, false) => {}
    }
    if got.len() != expected.len() {
        return Verdict::CallCount;
    }
    let function = |name: &str| functions.iter().find(|f| f.name == name);
    let mut used = vec![false; got.len()];
    for want in expected {
        let hit = got
            .iter()
            .enumerate()
            .position(|(i, g)| !used[i] && call_matches(want, g, function(&want.name)));
        match hit {
            Some(i) => used[i] = true,
            None if got.iter().any(|g| g.name == want.name) => return Verdict::WrongArguments,
            None => return Verdict::WrongFunction,
        }
    }
    Verdict::Correct
}

/// Reads a line's `"expected"`: an array of `{"name", "arguments"}` objects.
pub fn read_expected(v: &Value) -> Result<Vec<Call>, String> {
    let Some(items) = v.as_array() else {
        return Err("\"expected\" is not an array of calls".into());
    };
    items
        .iter()
        .map(|c| {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .ok_or("an expected call has no \"name\" string")?;
            Ok(Call {
                name: name.to_string(),
                arguments: c
                    .get("arguments")
                    .cloned()
                    .unwrap_or(Value::Object(Default::default())),
            })
        })
        .collect()
}

/// Totals over the scored lines of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CallScores {
    /// Lines whose expected reply is a call.
    pub needed: usize,
    /// Of those, answered exactly right.
    pub exact: usize,
    /// Of those, answered with some call (right or wrong).
    pub called: usize,
    /// Lines where no function fits.
    pub none_fits: usize,
    /// Of those, answered in text.
    pub avoided: usize,
    /// Replies cut by the token limit (or calls left incomplete).
    pub cut: usize,
    /// Lines that failed with an error.
    pub errors: usize,
    /// Wall time of the scored lines, ms.
    pub total_ms: f64,
    /// Scored lines.
    pub lines: usize,
}

impl CallScores {
    /// Adds one scored line: its verdict (`None` when it failed with an error), whether it
    /// was cut, and its wall time.
    pub fn add(&mut self, expected: &[Call], verdict: Option<&Verdict>, cut: bool, ms: f64) {
        self.lines += 1;
        self.total_ms += ms;
        self.cut += usize::from(cut);
        if expected.is_empty() {
            self.none_fits += 1;
            self.avoided += usize::from(verdict == Some(&Verdict::Correct));
        } else {
            self.needed += 1;
            self.exact += usize::from(verdict == Some(&Verdict::Correct));
            self.called += usize::from(!matches!(verdict, None | Some(Verdict::NoCall)));
        }
        self.errors += usize::from(verdict.is_none());
    }

    /// The summary as lines of text: exact-call accuracy, calls made when needed, calls
    /// avoided when none fits, cut replies, mean latency.
    pub fn summary(&self) -> String {
        let pct = |a: usize, b: usize| {
            if b == 0 {
                "-".to_string()
            } else {
                format!("{a}/{b} ({:.0}%)", 100.0 * a as f64 / b as f64)
            }
        };
        format!(
            "exact-call accuracy {}\ncalls made when needed {}\ntext when no function fits {}\nreplies cut by the token limit {}; errors {}\nmean latency {:.0} ms over {} lines",
            pct(self.exact, self.needed),
            pct(self.called, self.needed),
            pct(self.avoided, self.none_fits),
            self.cut,
            self.errors,
            self.total_ms / self.lines.max(1) as f64,
            self.lines
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f() -> Function {
        Function {
            name: "weather".into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {
                "city": {"type": "string"},
                "units": {"type": "string", "default": "celsius"}}}),
        }
    }

    fn call(name: &str, args: Value) -> Call {
        Call {
            name: name.into(),
            arguments: args,
        }
    }

    fn out(calls: Vec<Call>) -> CallOutput {
        let text = calls.is_empty().then(|| "text".to_string());
        CallOutput {
            calls,
            text,
            truncated: false,
        }
    }

    #[test]
    fn values_compare_after_normalising_case_whitespace_and_number_form() {
        assert!(values_match(&json!(" New  York"), &json!("new york")));
        assert!(values_match(&json!(30), &json!(30.0)));
        assert!(!values_match(&json!(30), &json!(300)));
        assert!(values_match(&json!(["A", 1]), &json!(["a", 1.0])));
        assert!(!values_match(&json!(["a", 1]), &json!([1, "a"])));
        assert!(values_match(&json!({"on": true}), &json!({"on": true})));
        assert!(!values_match(
            &json!({"on": true}),
            &json!({"on": true, "x": 1})
        ));
        assert!(!values_match(&json!("5"), &json!(5)));
    }

    #[test]
    fn an_extra_argument_passes_only_at_its_default() {
        let want = [call("weather", json!({"city": "Oslo"}))];
        let fs = [f()];
        let j = |args| judge(&want, &out(vec![call("weather", args)]), &fs);
        assert_eq!(j(json!({"city": "oslo"})), Verdict::Correct);
        assert_eq!(
            j(json!({"city": "Oslo", "units": "Celsius"})),
            Verdict::Correct
        );
        assert_eq!(
            j(json!({"city": "Oslo", "units": "fahrenheit"})),
            Verdict::WrongArguments
        );
        assert_eq!(j(json!({})), Verdict::WrongArguments);
        let stated = [call("weather", json!({"city": "Oslo", "units": "celsius"}))];
        let left_out = out(vec![call("weather", json!({"city": "Oslo"}))]);
        assert_eq!(judge(&stated, &left_out, &fs), Verdict::Correct);
        assert_eq!(j(json!({"city": "Bergen"})), Verdict::WrongArguments);
    }

    #[test]
    fn text_and_calls_are_judged_against_what_fits() {
        let fs = [f()];
        let want = [call("weather", json!({"city": "Oslo"}))];
        assert_eq!(judge(&want, &out(vec![]), &fs), Verdict::NoCall);
        assert_eq!(
            judge(&want, &out(vec![call("news", json!({}))]), &fs),
            Verdict::WrongFunction
        );
        assert_eq!(judge(&[], &out(vec![]), &fs), Verdict::Correct);
        assert_eq!(
            judge(&[], &out(vec![call("weather", json!({"city": "x"}))]), &fs),
            Verdict::CalledWhenNoneFits
        );
        let two = [
            call("weather", json!({"city": "Oslo"})),
            call("weather", json!({"city": "Rome"})),
        ];
        let swapped = out(vec![
            call("weather", json!({"city": "Rome"})),
            call("weather", json!({"city": "Oslo"})),
        ]);
        assert_eq!(judge(&two, &swapped, &fs), Verdict::Correct);
        assert_eq!(
            judge(&two, &out(vec![two[0].clone()]), &fs),
            Verdict::CallCount
        );
    }

    #[test]
    fn totals_count_each_kind_of_line() {
        let mut s = CallScores::default();
        let want = [call("weather", json!({"city": "Oslo"}))];
        s.add(&want, Some(&Verdict::Correct), false, 100.0);
        s.add(&want, Some(&Verdict::WrongArguments), false, 100.0);
        s.add(&want, Some(&Verdict::NoCall), false, 100.0);
        s.add(&[], Some(&Verdict::Correct), false, 100.0);
        s.add(&[], None, true, 100.0);
        assert_eq!((s.needed, s.exact, s.called), (3, 1, 2));
        assert_eq!((s.none_fits, s.avoided, s.cut, s.errors), (2, 1, 1, 1));
        let text = s.summary();
        assert!(text.contains("exact-call accuracy 1/3 (33%)"), "{text}");
        assert!(
            text.contains("text when no function fits 1/2 (50%)"),
            "{text}"
        );
    }
}
