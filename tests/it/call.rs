//! `cairn call`, function-calling mode: calls chosen by the real presets, the no-call branch,
//! parallel calls, loose definitions normalised, uncompilable ones named, many questions at
//! once; and 200 random questions over random function sets on tiny random-weight models,
//! where every output must parse and every call must validate against its function.

use std::path::{Path, PathBuf};

use cairn::call::{functions, CallOptions, FunctionCaller};
use cairn::model::sampling::{Rng, SamplingParams};
use serde_json::{json, Value};

use crate::common::{cairn, preset_path, tiny_model, TinySpec};

fn functions_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/functions.json")
}

fn call(model: &str, extra: &[&str], question: &str) -> Value {
    let home = tempfile::tempdir().unwrap();
    let out = cairn(home.path())
        .args(["call", "--model"])
        .arg(preset_path(model))
        .arg("--functions")
        .arg(functions_file())
        .args(extra)
        .arg(question)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

#[test]
fn one_question_one_function_call_with_its_arguments() {
    let r = call("qwen2.5-coder-0.5b", &[], "What is the weather in Paris?");
    assert_eq!(r["text"], Value::Null, "{r}");
    assert_eq!(r["calls"][0]["name"], "get_weather", "{r}");
    assert_eq!(r["calls"][0]["arguments"]["city"], "Paris", "{r}");
}

#[test]
fn the_right_function_is_chosen_among_several() {
    let r = call(
        "qwen2.5-coder-0.5b",
        &[],
        "Convert 250 euros to US dollars.",
    );
    assert_eq!(r["calls"][0]["name"], "convert_currency", "{r}");
    let a = &r["calls"][0]["arguments"];
    assert_eq!(a["amount"].as_f64(), Some(250.0), "{r}");
    assert_eq!(a["from"], "EUR", "{r}");
    assert_eq!(a["to"], "USD", "{r}");
}

#[test]
fn parallel_calls_come_as_several_calls() {
    let r = call(
        "qwen2.5-coder-0.5b",
        &["--parallel", "--require-call"],
        "What is the weather in Paris and in Rome?",
    );
    let cities: Vec<&str> = r["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["arguments"]["city"].as_str().unwrap())
        .collect();
    assert_eq!(cities, vec!["Paris", "Rome"], "{r}");
}

#[test]
fn no_call_when_no_function_fits_gives_the_text() {
    let r = call("qwen2.5-coder-0.5b", &[], "Hello, who are you?");
    assert_eq!(r["calls"], json!([]), "{r}");
    assert!(!r["text"].as_str().unwrap().is_empty(), "{r}");
}

/// Issue 20: the fit check asks the model apart, with only the one function shown, whether
/// calling it does what the question asks. Primed by a list of functions, the 1.5B preset
/// called one for 25 of the suite's 45 questions that no function fits; asked apart, the
/// model's own yes-or-no sends back the ones it judges unfit.
///
/// Measured on the 1.5B preset, the one whose calls make the check by default. The 0.5B
/// model's yes-or-no is a coin flip (0.48–0.59 for every pair): a first version of this test
/// asserted on it and failed on AVX-512 machines, where "Mona Lisa, get_weather" came out
/// 0.5085 instead of just under a half.
#[test]
fn the_fit_check_tells_a_fitting_function_from_one_that_is_not() {
    let (fs, _) = functions::parse_functions(
        &std::fs::read_to_string(functions_file()).unwrap(),
        "functions.json",
    )
    .unwrap();
    let weather = fs.iter().find(|f| f.name == "get_weather").unwrap();
    let email = fs.iter().find(|f| f.name == "send_email").unwrap();
    let lm = crate::common::preset_model("qwen2.5-coder-1.5b").clone();
    let mut caller = FunctionCaller::new(lm, SamplingParams::default()).unwrap();
    let fits = caller
        .fit_probability("What is the weather in Paris?", weather)
        .unwrap();
    let unfit = caller
        .fit_probability("Who painted the Mona Lisa?", weather)
        .unwrap();
    let wrong = caller
        .fit_probability("What is the weather in Paris?", email)
        .unwrap();
    let email_fits = caller
        .fit_probability("Send an email to Bob saying hi.", email)
        .unwrap();
    // Measured 0.68, 0.21, 0.08 and 0.65 on an AVX-512 machine: far from the line either way.
    assert!(fits > 0.55, "weather in Paris, get_weather: {fits}");
    assert!(email_fits > 0.55, "email to Bob, send_email: {email_fits}");
    assert!(unfit < 0.4, "Mona Lisa, get_weather: {unfit}");
    assert!(wrong < 0.4, "weather in Paris, send_email: {wrong}");

    // The 1.5B makes the check by default and reports its fit; with the check off, none is
    // made. By default the 0.5B model makes no fit check: its yes-or-no is no better than chance.
    assert!(caller.fit_check(&CallOptions::default()));
    let small = crate::common::preset_model("qwen2.5-coder-0.5b").clone();
    let small = FunctionCaller::new(small, SamplingParams::default()).unwrap();
    assert!(!small.fit_check(&CallOptions::default()));
    for fit_check in [true, false] {
        let opts = CallOptions {
            fit_check: Some(fit_check),
            ..CallOptions::default()
        };
        let r = caller
            .call("What is the weather in Paris?", &fs, &opts)
            .unwrap();
        assert_eq!(r.output.calls[0].name, "get_weather");
        match r.fit_probability {
            Some(p) => assert!(fit_check && p > 0.55, "{p}"),
            None => assert!(!fit_check),
        }
    }
}

#[test]
fn the_tiny_preset_gives_valid_output_too() {
    let r = call(
        "smollm2-135m",
        &["--require-call"],
        "What is the weather in Paris?",
    );
    let c = &r["calls"][0];
    let defs: Value =
        serde_json::from_str(&std::fs::read_to_string(functions_file()).unwrap()).unwrap();
    let def = defs
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["function"]["name"] == c["name"])
        .unwrap_or_else(|| panic!("unknown function in {r}"));
    let mut params = def["function"]["parameters"].clone();
    params["additionalProperties"] = json!(false);
    assert!(
        jsonschema::is_valid(&params, &c["arguments"]),
        "{r} against {params}"
    );
}

#[test]
fn loose_definitions_are_normalised_and_reported_with_v() {
    let home = tempfile::tempdir().unwrap();
    let f = home.path().join("loose.json");
    std::fs::write(
        &f,
        r#"[{"name": "add", "description": "Adds two numbers.",
             "parameters": {"type": "dict", "properties": {"a": {"type": "float"}, "b": {"type": "float"},
                            "pair": {"type": "tuple", "items": {"type": "int"}}},
                            "required": ["a", "b"], "strict": true}}]"#,
    )
    .unwrap();
    let out = cairn(home.path())
        .args(["call", "-v", "--require-call", "--model"])
        .arg(preset_path("smollm2-135m"))
        .arg("--functions")
        .arg(&f)
        .arg("Add 2 and 3.")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for note in [
        "add: parameters: type \"dict\" read as \"object\"",
        "add: parameters: unknown keyword `strict` ignored",
        "add: parameters.properties.a: type \"float\" read as \"number\"",
        "add: parameters.properties.pair: type \"tuple\" read as \"array\"",
        "add: parameters.properties.pair.items: type \"int\" read as \"integer\"",
    ] {
        assert!(stderr.contains(note), "missing `{note}` in {stderr}");
    }
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["calls"][0]["name"], "add");
    assert!(r["calls"][0]["arguments"]["a"].is_number(), "{r}");
}

#[test]
fn an_uncompilable_definition_names_the_function_and_the_keyword() {
    let home = tempfile::tempdir().unwrap();
    let f = home.path().join("bad.json");
    std::fs::write(
        &f,
        r#"[{"name": "fine", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}},
            {"name": "broken", "parameters": {"type": "object", "properties": {"when": {"type": "string", "pattern": "(?<=a)b"}}}}]"#,
    )
    .unwrap();
    cairn(home.path())
        .args(["call", "--model"])
        .arg(preset_path("smollm2-135m"))
        .arg("--functions")
        .arg(&f)
        .arg("hi")
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "function `broken`: its parameters cannot be used for decoding: parameter `when`, keyword `pattern`",
        ));
}

#[test]
fn bad_definitions_and_an_empty_question_fail_before_the_model_loads() {
    let home = tempfile::tempdir().unwrap();
    let f = home.path().join("dup.json");
    std::fs::write(&f, r#"[{"name": "a"}, {"name": "a"}]"#).unwrap();
    cairn(home.path())
        .args(["call", "--model", "/nonexistent.gguf", "--functions"])
        .arg(&f)
        .arg("hi")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("two functions are named `a`"));
    cairn(home.path())
        .args(["call", "--model", "/nonexistent.gguf", "--functions"])
        .arg(functions_file())
        .arg(" ")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("the question is empty"));
}

#[test]
fn json_lines_answers_each_line_in_order_and_reports_bad_lines() {
    let home = tempfile::tempdir().unwrap();
    let defs: Value =
        serde_json::from_str(&std::fs::read_to_string(functions_file()).unwrap()).unwrap();
    let input = home.path().join("in.jsonl");
    let lines = [
        json!({"id": "a", "question": "What is the weather in Paris?", "functions": defs})
            .to_string(),
        "{not json".to_string(),
        json!({"id": "c", "question": "Convert 10 euros to US dollars.", "functions": defs})
            .to_string(),
    ];
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let out = cairn(home.path())
        .args(["call", "--model"])
        .arg(preset_path("qwen2.5-coder-0.5b"))
        .arg("--json-lines")
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a bad line makes exit 1");
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["id"], "a");
    assert_eq!(rows[0]["calls"][0]["name"], "get_weather");
    assert_eq!(rows[1]["id"], "line-2");
    assert!(rows[1]["error"]
        .as_str()
        .unwrap()
        .contains("line 2: not valid JSON"));
    assert_eq!(rows[2]["id"], "c");
    assert_eq!(rows[2]["calls"][0]["name"], "convert_currency");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("prompt tokens reused from the cache"),
        "{stderr}"
    );
}

/// A random parameter schema a byte-level tiny model can finish: bounded strings and arrays,
/// enums, bounded integers, numbers and integers without bounds, a nested object.
fn random_params(rng: &mut Rng, depth: usize) -> Value {
    let n = 1 + (rng.next_u64() % 3) as usize;
    let mut props = serde_json::Map::new();
    let mut required = Vec::new();
    for i in 0..n {
        let name = format!("p{i}");
        let s = match rng.next_u64() % 5 {
            0 => json!({"type": "string", "maxLength": 4}),
            1 => json!({"enum": ["red", "green", 7]}),
            2 => json!({"type": "integer", "minimum": -50, "maximum": 50}),
            3 if rng.next_u64().is_multiple_of(2) => {
                json!({"type": "array", "items": {"type": "boolean"}, "maxItems": 3})
            }
            // No bound of its own: the grammar's digit caps must end it.
            3 => {
                let t = ["number", "integer"][(rng.next_u64() % 2) as usize];
                json!({ "type": t })
            }
            _ if depth == 0 => random_params(rng, depth + 1),
            _ => json!({"type": "boolean"}),
        };
        if rng.next_u64().is_multiple_of(2) {
            required.push(name.clone());
        }
        props.insert(name, s);
    }
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

#[test]
fn two_hundred_random_questions_on_tiny_models_always_give_valid_calls() {
    let mut rng = Rng::new(7);
    for spec in [TinySpec::llama(), TinySpec::qwen2()] {
        let spec = TinySpec {
            context: 4096,
            ..spec
        };
        let (_dir, path) = tiny_model(&spec);
        let lm =
            cairn::model::LoadedModel::load(&path, None, &cairn::model::LoadOptions::default())
                .unwrap();
        let mut caller = FunctionCaller::new(lm, SamplingParams::default()).unwrap();
        for q in 0..100 {
            let nf = 1 + (rng.next_u64() % 3) as usize;
            let defs: Vec<Value> = (0..nf)
                .map(|i| {
                    json!({"type": "function", "function": {
                        "name": format!("f{i}"), "description": format!("Function {i}."),
                        "parameters": random_params(&mut rng, 0)}})
                })
                .collect();
            let (fs, _) = functions::from_value(&json!(defs), "random").unwrap();
            let opts = CallOptions {
                parallel: rng.next_u64().is_multiple_of(3),
                require_call: rng.next_u64().is_multiple_of(2),
                max_tokens: 2500,
                raw_arguments: false,
                fit_check: Some(true),
            };
            let words = ["weather", "add", "red", "what", "is", "3", "please"];
            let question: Vec<&str> = (0..4)
                .map(|_| words[(rng.next_u64() % words.len() as u64) as usize])
                .collect();
            let question = question.join(" ");
            let r = caller
                .call(&question, &fs, &opts)
                .unwrap_or_else(|e| panic!("{} question {q}: {e}", spec.arch));
            let out = &r.output;
            if opts.require_call {
                assert!(!out.calls.is_empty(), "question {q}: a call was required");
            }
            if !opts.parallel {
                assert!(out.calls.len() <= 1, "question {q}: one call at most");
            }
            if out.calls.is_empty() {
                assert!(out.text.is_some(), "question {q}: no call and no text");
            }
            for c in &out.calls {
                let f = fs
                    .iter()
                    .find(|f| f.name == c.name)
                    .unwrap_or_else(|| panic!("question {q}: unknown function {}", c.name));
                assert!(
                    jsonschema::is_valid(&f.parameters, &c.arguments),
                    "{} question {q}: {} does not validate against {}",
                    spec.arch,
                    c.arguments,
                    f.parameters
                );
            }
        }
    }
}

/// Whether the grammar of `opts` over `fs` lets the tiny model's byte tokens spell `text` from
/// the start of the reply.
fn grammar_allows(lm: &cairn::model::LoadedModel, fs: &[functions::Function], text: &str) -> bool {
    let compiler =
        cairn::constrain::ConstraintCompiler::new(&lm.tokenizer, lm.model.config.vocab).unwrap();
    let grammar = cairn::call::call_grammar(fs, &CallOptions::default(), None);
    let mut c = compiler
        .compile(&cairn::constrain::ConstraintSpec::Lark(grammar), "test")
        .unwrap();
    for id in lm.tokenizer.encode(text).unwrap() {
        let mut logits = vec![0f32; lm.model.config.vocab];
        c.mask_logits(&mut logits).unwrap();
        if logits[id as usize] == f32::NEG_INFINITY {
            return false;
        }
        c.consume(id).unwrap();
    }
    true
}

/// Regression (issue 20): a numeric argument was decoded as `00000…` until the token limit cut
/// the reply. Every number in a call grammar now has at most 15 digits before the point, 10
/// after it, and no exponent.
#[test]
fn number_arguments_cannot_run_on_in_the_call_grammar() {
    let (_dir, path) = tiny_model(&TinySpec::qwen2());
    let lm = cairn::model::LoadedModel::load(&path, None, &cairn::model::LoadOptions::default())
        .unwrap();
    let (fs, _) = functions::from_value(
        &json!([{"name": "f", "description": "F.", "parameters": {"type": "object",
            "properties": {"x": {"type": "number"}, "n": {"type": "integer"}},
            "required": ["x", "n"]}}]),
        "test",
    )
    .unwrap();
    let head = r#"{"name": "f", "arguments": {"x": "#;
    let digits = |n: usize| "5".repeat(n);
    assert!(grammar_allows(&lm, &fs, &format!("{head}{}", digits(15))));
    assert!(!grammar_allows(&lm, &fs, &format!("{head}{}", digits(16))));
    assert!(grammar_allows(
        &lm,
        &fs,
        &format!("{head}-0.{}", digits(10))
    ));
    assert!(!grammar_allows(
        &lm,
        &fs,
        &format!("{head}0.{}", digits(11))
    ));
    assert!(!grammar_allows(&lm, &fs, &format!("{head}1e")));
    let n = r#"{"name": "f", "arguments": {"x": 2.5, "n": "#;
    assert!(grammar_allows(&lm, &fs, &format!("{n}-{}", digits(15))));
    assert!(!grammar_allows(&lm, &fs, &format!("{n}{}", digits(16))));
    assert!(!grammar_allows(&lm, &fs, &format!("{n}5.")));
}

/// Issue 20: the 0.5B preset wrote `"2:15:00"` for a start time described as "HH:MM" and
/// `"01-2025"` for a month described as "YYYY-MM". A format the description names in the
/// usual letters is a pattern of the call grammar, so only that form can be written.
#[test]
fn a_format_named_in_a_description_is_the_only_form_the_grammar_allows() {
    let (_dir, path) = tiny_model(&TinySpec::qwen2());
    let lm = cairn::model::LoadedModel::load(&path, None, &cairn::model::LoadOptions::default())
        .unwrap();
    let (fs, _) = functions::from_value(
        &json!([{"name": "f", "description": "F.", "parameters": {"type": "object",
            "properties": {"t": {"type": "string", "description": "Start time as HH:MM, 24-hour"},
                           "m": {"type": "string", "description": "Month in YYYY-MM format"}},
            "required": ["t", "m"]}}]),
        "test",
    )
    .unwrap();
    let t = r#"{"name": "f", "arguments": {"t": ""#;
    assert!(grammar_allows(&lm, &fs, &format!("{t}14:15\"")));
    for bad in ["2:15", "2:15:00", "14:15 pm", "25:00"] {
        assert!(!grammar_allows(&lm, &fs, &format!("{t}{bad}\"")), "{bad}");
    }
    let m = r#"{"name": "f", "arguments": {"t": "09:05", "m": ""#;
    assert!(grammar_allows(&lm, &fs, &format!("{m}2025-01\"")));
    assert!(!grammar_allows(&lm, &fs, &format!("{m}01-2025\"")));
}

/// Issue 20: the 0.5B preset closed calls before the optional arguments the question gives
/// ("within 2 km" with no `radius_km`). They are filled in from a second decoding with them
/// required, keeping only values the question holds; `--raw-arguments` shows the first
/// decoding, without them.
#[test]
fn optional_arguments_the_question_gives_are_filled_in() {
    let home = tempfile::tempdir().unwrap();
    let f = home.path().join("places.json");
    std::fs::write(
        &f,
        r#"[{"type": "function", "function": {"name": "find_places",
            "description": "Finds places of a kind near a location.",
            "parameters": {"type": "object", "properties": {
              "location": {"type": "string", "description": "Where to search, e.g. 'Central Station'"},
              "kind": {"type": "string", "description": "What kind of place, e.g. 'cafe'"},
              "radius_km": {"type": "number", "description": "How far to search, in kilometres"},
              "open_now": {"type": "boolean", "description": "Only places open now"},
              "visit_date": {"type": "string", "description": "Day of the visit, YYYY-MM-DD"}},
              "required": ["location", "kind"]}}}]"#,
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let out = cairn(home.path())
            .args(["call", "-v", "--model"])
            .arg(preset_path("qwen2.5-coder-0.5b"))
            .arg("--functions")
            .arg(&f)
            .args(extra)
            .arg("Find a pharmacy near Oak Street open now within 2 km")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        (r["calls"][0]["arguments"].clone(), stderr)
    };
    let (raw, _) = run(&["--raw-arguments"]);
    assert!(raw.get("radius_km").is_none(), "the first decoding: {raw}");
    let (a, stderr) = run(&[]);
    assert_eq!(a["radius_km"].as_f64(), Some(2.0), "{a}");
    assert_eq!(a["open_now"], true, "{a}");
    assert!(
        a.get("visit_date").is_none(),
        "a made-up date stays out: {a}"
    );
    assert!(
        stderr.contains("`radius_km`: 2, which the question gives"),
        "{stderr}"
    );
}
