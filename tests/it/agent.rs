//! The agent loop's control logic, driven by a scripted policy (the one place a stand-in for
//! the model is allowed): circuit breaker, dead loops, last-round final answer, retries with
//! backoff, budget trimming, every stop reason, memory and trace. The tools are real.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn::agent::{
    Agent, AgentOptions, Event, EventKind, EventSink, ForbidRepeats, ScriptedPolicy, StopReason,
};
use cairn::memory::MemoryStore;
use cairn::tools::calculator::CalculatorTool;
use cairn::tools::{Observation, RegistryOptions, Tool, ToolError, ToolRegistry};
use serde_json::{json, Value};

use crate::common::{answer, step};

/// A tool that fails with a chosen error a given number of times, then answers.
struct Flaky {
    name: &'static str,
    failures: usize,
    error: ToolError,
    answer: String,
    calls: Arc<AtomicUsize>,
    delay: Duration,
    /// Whether each answer starts with the call's number (`page 0: …`), so no two are alike.
    paged: bool,
}

impl Flaky {
    fn new(name: &'static str, failures: usize, error: ToolError, answer: &str) -> Self {
        Flaky {
            name,
            failures,
            error,
            answer: answer.to_string(),
            calls: Arc::new(AtomicUsize::new(0)),
            delay: Duration::ZERO,
            paged: false,
        }
    }
}

impl Tool for Flaky {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        "A test tool.".into()
    }
    fn args_schema(&self) -> Value {
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": false})
    }
    fn run(&self, _args: &Value) -> Result<Observation, ToolError> {
        std::thread::sleep(self.delay);
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n < self.failures {
            Err(self.error.clone())
        } else if self.paged {
            Ok(Observation::new(format!("page {n}: {}", self.answer)))
        } else {
            Ok(Observation::new(self.answer.clone()))
        }
    }
}

/// Collects events for inspection.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Event>>>);

impl EventSink for Events {
    fn event(&mut self, e: &Event) {
        self.0.lock().unwrap().push(e.clone());
    }
}

impl Events {
    fn kinds(&self) -> Vec<EventKind> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.kind.clone())
            .collect()
    }
}

fn registry(extra: Vec<Arc<dyn Tool>>) -> ToolRegistry {
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(CalculatorTool)).unwrap();
    for t in extra {
        reg.register(t).unwrap();
    }
    reg
}

fn calc(expr: &str) -> Value {
    step("calculator", json!({"expression": expr}))
}

fn agent(
    steps: Vec<Value>,
    tools: ToolRegistry,
    options: AgentOptions,
) -> (Agent<ScriptedPolicy>, Events) {
    let mut a = Agent::new(ScriptedPolicy::new(steps, 4096), tools, None, options).unwrap();
    let events = Events::default();
    a.add_sink(Box::new(events.clone()));
    (a, events)
}

/// The action names a step schema allows.
fn allowed(schema: &Value) -> Vec<String> {
    schema["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            b["properties"]["action"]["const"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn last_prompt_text(p: &ScriptedPolicy) -> String {
    p.prompts
        .last()
        .unwrap()
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_tool_result_is_fed_back_and_the_final_answer_ends_the_task() {
    let (mut a, _) = agent(
        vec![calc("17 * 23"), answer("391")],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task("What is 17 * 23?", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
    assert_eq!(r.answer, "391");
    assert_eq!(r.rounds, 2);
    assert_eq!(r.tool_calls.len(), 1);
    assert!(r.tool_calls[0].ok);
    assert!(last_prompt_text(a.policy()).contains("Result of calculator:\n391"));
}

#[test]
fn an_invalid_input_error_becomes_the_observation_with_its_hint() {
    let (mut a, _) = agent(
        vec![calc("17 +* 23"), calc("17 * 23"), answer("391")],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task("What is 17 * 23?", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
    assert!(!r.tool_calls[0].ok);
    assert_eq!(
        r.tool_calls[0].error_class,
        Some(cairn::tools::ErrorClass::InvalidInput)
    );
    let p = &a.policy().prompts[1];
    let obs = &p.last().unwrap().content;
    assert!(obs.contains("calculator failed"), "{obs}");
    assert!(obs.contains("hint:"), "{obs}");
    assert!(r.tool_calls[1].ok);
}

#[test]
fn the_circuit_opens_after_consecutive_failures_of_one_tool_and_the_tool_leaves_the_schema() {
    let options = AgentOptions {
        circuit_threshold: 2,
        max_failed_rounds: 5,
        ..AgentOptions::default()
    };
    let (mut a, events) = agent(
        vec![calc("1 +"), calc("2 +"), answer("cannot compute")],
        registry(vec![]),
        options,
    );
    let r = a.run_task("add", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
    assert_eq!(r.circuits_opened, vec!["calculator".to_string()]);
    let schemas = &a.policy().schemas;
    assert!(allowed(&schemas[1]).contains(&"calculator".to_string()));
    assert_eq!(allowed(&schemas[2]), vec!["final_answer"]);
    assert!(events.kinds().iter().any(
        |k| matches!(k, EventKind::CircuitOpen { tool, failures: 2, .. } if tool == "calculator")
    ));
}

#[test]
fn with_the_defaults_a_tool_turned_off_by_its_circuit_leaves_a_round_to_answer() {
    // Regression: with the circuit and the failed-rounds stop both at three, the third failed
    // query in a row stopped the task with no answer; the circuit never got to turn the tool
    // off and let the model go on.
    let (mut a, events) = agent(
        vec![
            calc("1 +"),
            calc("2 +"),
            calc("3 +"),
            answer("I could not compute it"),
        ],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task("add", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
    assert_eq!(r.answer, "I could not compute it");
    assert_eq!(r.rounds, 4);
    assert!(events.kinds().iter().any(
        |k| matches!(k, EventKind::CircuitOpen { tool, failures: 3, .. } if tool == "calculator")
    ));
    assert!(!allowed(&a.policy().schemas[3]).contains(&"calculator".to_string()));
}

#[test]
fn consecutive_failed_rounds_stop_the_task_with_the_last_error() {
    let (mut a, _) = agent(
        vec![calc("1 +"), calc("2 +"), calc("3 +")],
        registry(vec![]),
        AgentOptions {
            circuit_threshold: 10,
            max_failed_rounds: 3,
            ..AgentOptions::default()
        },
    );
    let r = a.run_task("add", None);
    assert_eq!(r.stop_reason, StopReason::Failures);
    assert_eq!(r.rounds, 3);
    assert!(r.answer.is_empty());
    assert!(r.error.as_deref().unwrap().contains("3 +"), "{:?}", r.error);
}

#[test]
fn a_repeated_action_gets_the_cached_observation_and_turns_its_tool_off() {
    let flaky = Flaky::new("probe", 0, ToolError::invalid("unused"), "42 widgets");
    let calls = flaky.calls.clone();
    let probe = step("probe", json!({"q": "widgets"}));
    let (mut a, events) = agent(
        vec![probe.clone(), probe, calc("6 * 7"), answer("42")],
        registry(vec![Arc::new(flaky)]),
        AgentOptions::default(),
    );
    let r = a.run_task("How many widgets?", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the tool ran once");
    assert_eq!(r.dead_loops, 1);
    assert!(r.tool_calls[1].cached);
    let schemas = &a.policy().schemas;
    // After the repeat the tool is gone for the rest of the task, so the same call can never
    // be chosen a third time.
    assert!(allowed(&schemas[1]).contains(&"probe".to_string()));
    assert_eq!(allowed(&schemas[2]), vec!["calculator", "final_answer"]);
    assert_eq!(allowed(&schemas[3]), vec!["calculator", "final_answer"]);
    let obs = &a.policy().prompts[2].last().unwrap().content;
    assert!(
        obs.contains("42 widgets") && obs.contains("same arguments"),
        "{obs}"
    );
    // The loop's note comes after the result's data block, not inside it.
    let end = obs.find("[end of result]").expect("a framed result");
    let note = obs
        .find("turned off for the rest of this task")
        .expect("the note");
    assert!(end < note, "{obs}");
    assert!(events
        .kinds()
        .iter()
        .any(|k| matches!(k, EventKind::DeadLoop { times: 2, .. })));
}

/// Regression (issue 19): the 1.5B model searched "Corolla", "Corolla's Corolla",
/// "Corolla's Corolla's", … six rounds, each time the same passage came back, and answered with
/// its last thought; the word-for-word rule never fired, since no two calls were alike. A
/// result another call of the same tool already gave gets a note the first time, and turns
/// the tool off the second; a short result (a count of 0) that two questions may share does
/// neither.
#[test]
fn calls_that_keep_bringing_back_the_same_result_turn_their_tool_off() {
    // Three different calls of a tool that always answers `text`, then an answer.
    let three_calls = |text: &str, queries: [&str; 3]| {
        let flaky = Flaky::new("probe", 0, ToolError::invalid("unused"), text);
        let calls = flaky.calls.clone();
        let steps = queries
            .iter()
            .map(|q| step("probe", json!({ "q": q })))
            .chain(std::iter::once(answer("done")))
            .collect();
        let (mut a, events) = agent(
            steps,
            registry(vec![Arc::new(flaky)]),
            AgentOptions::default(),
        );
        let r = a.run_task("What does the MOT test cost?", None);
        assert_eq!(r.stop_reason, StopReason::FinalAnswer);
        assert_eq!(calls.load(Ordering::SeqCst), 3, "each new call ran");
        (a, events, r)
    };
    let passage = "prices.md:5\n  An MOT test costs 55 euros, labour included; a retest within 10 working days is free.\n  A diagnosis costs a flat 45 euros.";
    let (a, events, r) = three_calls(
        passage,
        ["Corolla", "Corolla's Corolla", "Corolla's Corolla's"],
    );
    assert_eq!(r.dead_loops, 1);
    let prompts = &a.policy().prompts;
    let second = &prompts[2].last().unwrap().content;
    assert!(
        second.contains("same result your call of round 1 gave") && !second.contains("turned off"),
        "{second}"
    );
    let third = &prompts[3].last().unwrap().content;
    assert!(
        third.contains("now 3 times") && third.contains("probe is turned off"),
        "{third}"
    );
    let schemas = &a.policy().schemas;
    assert!(allowed(&schemas[2]).contains(&"probe".to_string()));
    assert_eq!(allowed(&schemas[3]), vec!["calculator", "final_answer"]);
    assert!(events
        .kinds()
        .iter()
        .any(|k| matches!(k, EventKind::DeadLoop { times: 3, .. })));

    // A short result shared by different calls is no sign of a stuck model.
    let (a, _, r) = three_calls("COUNT(*)\n0", ["a", "b", "c"]);
    assert_eq!(r.dead_loops, 0);
    assert!(allowed(&a.policy().schemas[3]).contains(&"probe".to_string()));
}

#[test]
fn canonical_arguments_sort_keys_so_key_order_cannot_hide_a_repeat() {
    let flaky = Flaky::new("probe", 0, ToolError::invalid("unused"), "ok");
    let mut reg = registry(vec![]);
    reg.register(Arc::new(flaky)).unwrap();
    let a1 = json!({"thought": "t", "action": "calculator", "args": {"expression": "1+1"}});
    let (mut a, _) = agent(
        vec![a1.clone(), a1, answer("2")],
        reg,
        AgentOptions::default(),
    );
    let r = a.run_task("1+1", None);
    assert_eq!(r.dead_loops, 1);
    assert_eq!(
        cairn::agent::canonical_json(&json!({"b": 1, "a": {"d": 2, "c": [1, {"f": 0, "e": 1}]}})),
        r#"{"a":{"c":[1,{"e":1,"f":0}],"d":2},"b":1}"#
    );
}

#[test]
fn the_last_allowed_round_only_offers_final_answer() {
    let (mut a, _) = agent(
        vec![calc("1 + 1"), calc("2 + 2"), answer("4")],
        registry(vec![]),
        AgentOptions {
            max_rounds: 3,
            ..AgentOptions::default()
        },
    );
    let r = a.run_task("sum", None);
    assert_eq!(r.stop_reason, StopReason::MaxRounds);
    assert_eq!(r.answer, "4");
    assert_eq!(r.rounds, 3);
    let schemas = &a.policy().schemas;
    assert_eq!(allowed(&schemas[1]), vec!["calculator", "final_answer"]);
    assert_eq!(allowed(&schemas[2]), vec!["final_answer"]);
}

#[test]
fn transient_errors_are_retried_with_exponential_backoff_inside_one_round() {
    let flaky = Flaky::new(
        "probe",
        2,
        ToolError::transient("database is locked"),
        "done",
    );
    let calls = flaky.calls.clone();
    let (mut a, events) = agent(
        vec![step("probe", json!({"q": "x"})), answer("done")],
        registry(vec![Arc::new(flaky)]),
        AgentOptions {
            retry_base: Duration::from_millis(40),
            ..AgentOptions::default()
        },
    );
    let start = Instant::now();
    let r = a.run_task("probe", None);
    let elapsed = start.elapsed();
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(r.rounds, 2, "retries are not rounds");
    assert_eq!(r.retries, 2);
    assert_eq!(r.tool_calls[0].attempts, 3);
    assert!(r.tool_calls[0].ok);
    // 40 ms, then 80 ms.
    assert!(elapsed >= Duration::from_millis(120), "{elapsed:?}");
    let waits: Vec<u64> = events
        .kinds()
        .iter()
        .filter_map(|k| match k {
            EventKind::Retry { wait_ms, .. } => Some(*wait_ms),
            _ => None,
        })
        .collect();
    assert_eq!(waits, vec![40, 80]);
}

#[test]
fn a_transient_error_that_outlasts_the_retries_is_a_failed_round() {
    let flaky = Flaky::new("probe", 10, ToolError::transient("busy"), "never");
    let (mut a, _) = agent(
        vec![step("probe", json!({"q": "x"})), answer("gave up")],
        registry(vec![Arc::new(flaky)]),
        AgentOptions {
            retry_base: Duration::from_millis(1),
            retry_attempts: 2,
            ..AgentOptions::default()
        },
    );
    let r = a.run_task("probe", None);
    assert_eq!(r.tool_calls[0].attempts, 2);
    assert!(!r.tool_calls[0].ok);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
}

#[test]
fn a_fatal_error_stops_the_task_at_once() {
    let flaky = Flaky::new(
        "probe",
        10,
        ToolError::fatal("the database file is gone"),
        "never",
    );
    let (mut a, _) = agent(
        vec![step("probe", json!({"q": "x"})), answer("unused")],
        registry(vec![Arc::new(flaky)]),
        AgentOptions::default(),
    );
    let r = a.run_task("probe", None);
    assert_eq!(r.stop_reason, StopReason::Fatal);
    assert_eq!(r.rounds, 1);
    assert_eq!(r.error.as_deref(), Some("the database file is gone"));
    assert_eq!(a.policy().remaining(), 1);
}

#[test]
fn stop_when_ends_the_task_on_a_matching_observation() {
    let (mut a, _) = agent(
        vec![calc("2 + 2"), calc("6 * 7"), answer("unused")],
        registry(vec![]),
        AgentOptions {
            stop_when: Some(regex::Regex::new(r"^42$").unwrap()),
            ..AgentOptions::default()
        },
    );
    let r = a.run_task("find 42", None);
    assert_eq!(r.stop_reason, StopReason::StopWhen);
    assert_eq!(r.answer, "42");
    assert_eq!(r.rounds, 2);
}

#[test]
fn the_wall_clock_limit_stops_the_task_between_rounds() {
    let mut slow = Flaky::new("slow", 0, ToolError::invalid("unused"), "ok");
    slow.delay = Duration::from_millis(80);
    let (mut a, _) = agent(
        vec![step("slow", json!({"q": "x"})), answer("unused")],
        registry(vec![Arc::new(slow)]),
        AgentOptions {
            timeout: Some(Duration::from_millis(40)),
            ..AgentOptions::default()
        },
    );
    let r = a.run_task("slow", None);
    assert_eq!(r.stop_reason, StopReason::Timeout);
    assert_eq!(r.rounds, 1);
    assert!(r.error.unwrap().contains("time limit"));
}

#[test]
fn old_rounds_are_dropped_and_observations_cut_to_fit_the_budget_and_the_trace_says_so() {
    let big = "word ".repeat(300); // ~375 tokens by the scripted count
    let mut big_tool = Flaky::new("big", 0, ToolError::invalid("unused"), &big);
    // Each call a different page (the same result again would turn the tool off).
    big_tool.paged = true;
    let steps: Vec<Value> = (0..5)
        .map(|i| step("big", json!({"q": format!("part {i}")})))
        .chain(std::iter::once(answer("done")))
        .collect();
    let options = AgentOptions {
        max_step_tokens: 100,
        ..AgentOptions::default()
    };
    let mut a = Agent::new(
        ScriptedPolicy::new(steps, 1400),
        registry(vec![Arc::new(big_tool)]),
        None,
        options,
    )
    .unwrap();
    let events = Events::default();
    a.add_sink(Box::new(events.clone()));
    let r = a.run_task("collect the parts", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer, "{r:?}");
    assert!(r.dropped_rounds > 0);
    for p in &a.policy().prompts {
        assert!(cairn::agent::scripted_tokens(p) <= 1300);
        assert!(
            p.iter()
                .any(|m| m.content.contains("Task: collect the parts")),
            "the task is kept"
        );
        assert_eq!(p[0].role, cairn::model::template::Role::System);
    }
    let last = last_prompt_text(a.policy());
    assert!(last.contains("were dropped to fit the context"), "{last}");
    assert!(events
        .kinds()
        .iter()
        .any(|k| matches!(k, EventKind::Trim { dropped_rounds, .. } if *dropped_rounds > 0)));
}

#[test]
fn an_observation_too_big_for_the_context_is_cut_with_a_marker() {
    let huge = "x".repeat(8000);
    let tool = Flaky::new("huge", 0, ToolError::invalid("unused"), &huge);
    let mut reg = ToolRegistry::new(RegistryOptions {
        max_chars: 100_000,
        ..RegistryOptions::default()
    });
    reg.register(Arc::new(tool)).unwrap();
    let mut a = Agent::new(
        ScriptedPolicy::new(vec![step("huge", json!({"q": "x"})), answer("ok")], 1400),
        reg,
        None,
        AgentOptions {
            max_step_tokens: 100,
            ..AgentOptions::default()
        },
    )
    .unwrap();
    let r = a.run_task("get it", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
    let last = last_prompt_text(a.policy());
    assert!(last.contains("characters to fit the context]"), "{last}");
    assert!(cairn::agent::scripted_tokens(a.policy().prompts.last().unwrap()) <= 1300);
}

#[test]
fn a_task_longer_than_the_context_stops_with_budget_before_any_round() {
    let task = "please ".repeat(3000);
    let (mut a, _) = agent(
        vec![answer("unused")],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task(&task, None);
    assert_eq!(r.stop_reason, StopReason::Budget);
    assert_eq!(r.rounds, 0);
    assert!(r.error.unwrap().contains("shorten the task"));
}

#[test]
fn a_step_cut_off_by_the_token_limit_is_a_failed_round_shown_to_the_model() {
    let long = calc("1 + ".repeat(25).trim_end_matches(" + "));
    let (mut a, _) = agent(
        vec![long, answer("short")],
        registry(vec![]),
        AgentOptions {
            max_step_tokens: 30,
            ..AgentOptions::default()
        },
    );
    let r = a.run_task("add many ones", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
    assert_eq!(r.rounds, 2);
    assert_eq!(r.tool_calls.len(), 1, "the cut-off step is an invalid call");
    assert!(!r.tool_calls[0].valid && !r.tool_calls[0].ok);
    let obs = &a.policy().prompts[1].last().unwrap().content;
    assert!(obs.contains("cut off at the limit of 30 tokens"), "{obs}");
}

/// Regression (issue 19): `last_name = 'O''Neill) AND …`, one quote short, made every quote
/// after it open a string where the 1.5B model meant to close one; the query never ended and
/// the step was cut off at 512 tokens. Told only that, and shown its whole step again, the
/// model wrote the same query to the limit in each of the three rounds after, and the task
/// ended with no answer. The message now names the string and where it should have closed,
/// and the prompts after show the step only up to there.
#[test]
fn a_query_cut_off_after_a_string_one_quote_short_is_shown_up_to_where_it_should_close() {
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("claims.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE claims (first_name TEXT, last_name TEXT, km INTEGER);
         INSERT INTO claims VALUES ('Siobhan', 'O''Neill', 140), ('Siobhan', 'O''Neill', 170),
                                   ('Ruben', 'Dijkstra', 96);",
    )
    .unwrap();
    drop(conn);
    let runaway = format!(
        "SELECT SUM(km) FROM claims WHERE last_name = 'O''Neill) AND first_name = 'km{}",
        " AND km > 0 AND first_name = 'km".repeat(10)
    );
    let sql = |q: &str| step("sql", json!({ "query": q }));
    let (mut a, events) = agent(
        vec![
            sql(&runaway),
            sql("SELECT SUM(km) FROM claims WHERE last_name = 'O''Neill'"),
            answer("Siobhan O'Neill claimed 310 km."),
        ],
        registry(vec![Arc::new(
            SqlTool::open(&db, SqlOptions::default()).unwrap(),
        )]),
        AgentOptions {
            max_step_tokens: 80,
            ..AgentOptions::default()
        },
    );
    let r = a.run_task("How many kilometres has Siobhan O'Neill claimed?", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer, "{:?}", r.error);
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("Siobhan O'Neill claimed 310 km.", 3)
    );
    assert!(!r.tool_calls[0].valid && r.tool_calls[1].ok);
    let round2 = &a.policy().prompts[1];
    let shown = &round2[round2.len() - 2].content;
    assert!(
        shown.ends_with("WHERE last_name = 'O''Neill …"),
        "the cut-off step as shown: {shown}"
    );
    let said = &round2.last().unwrap().content;
    assert!(said.contains("cut off at the limit of 80 tokens"), "{said}");
    assert!(
        said.contains("the string 'O''Neill) AND first_name = ' runs on into the query's own text: a closing quote is missing after O''Neill"),
        "{said}"
    );
    assert!(said.contains("so O'Neill is written 'O''Neill'"), "{said}");
    // The trace keeps the step as the model wrote it.
    let bad: Vec<String> = events
        .kinds()
        .iter()
        .filter_map(|k| match k {
            EventKind::BadStep { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(bad.len(), 1);
    assert!(
        bad[0].len() == 320 && bad[0].contains("AND km > 0"),
        "{}",
        bad[0]
    );
}

#[test]
fn self_check_below_the_threshold_keeps_the_task_going() {
    let (mut a, events) = agent(
        vec![
            answer("half"),
            json!({"done": 0.2}),
            calc("6 * 7"),
            answer("42"),
            json!({"done": 0.9}),
        ],
        registry(vec![]),
        AgentOptions {
            self_check: Some(0.5),
            ..AgentOptions::default()
        },
    );
    let r = a.run_task("What is 6 * 7?", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
    assert_eq!(r.answer, "42");
    let checks: Vec<bool> = events
        .kinds()
        .iter()
        .filter_map(|k| match k {
            EventKind::SelfCheck { accepted, .. } => Some(*accepted),
            _ => None,
        })
        .collect();
    assert_eq!(checks, vec![false, true]);
}

#[test]
fn steps_turns_and_facts_go_to_memory_and_the_next_turn_of_the_session_sees_them() {
    let store = MemoryStore::open_in_memory().unwrap();
    let mut a = Agent::new(
        ScriptedPolicy::new(
            vec![
                calc("89.9 * 10"),
                answer("Ten Helmet Pro cost 899 euros."),
                answer("899 euros."),
                answer("I do not know."),
            ],
            4096,
        ),
        registry(vec![]),
        Some(store),
        AgentOptions::default(),
    )
    .unwrap();
    let r1 = a.run_task("What do ten Helmet Pro at 89.9 euros cost?", Some("shop"));
    assert_eq!(r1.stop_reason, StopReason::FinalAnswer);
    let store = a.memory().unwrap();
    let sid = store.session("shop").unwrap();
    let turns = store.turns(sid).unwrap();
    assert_eq!(turns.len(), 1);
    let end = turns[0].end.as_ref().unwrap();
    assert_eq!(end.stop_reason, "final_answer");
    assert_eq!(end.answer, "Ten Helmet Pro cost 899 euros.");
    let steps = store.steps(turns[0].id).unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].record.action, "calculator");
    assert_eq!(steps[0].record.observation, "899");
    assert!(!store.session_facts(sid).unwrap().is_empty());

    a.run_task("And the Helmet Pro price for ten again?", Some("shop"));
    let p = last_prompt_text(a.policy());
    assert!(p.contains("Earlier in this conversation:"), "{p}");
    assert!(p.contains("Ten Helmet Pro cost 899 euros."), "{p}");

    a.run_task("What do ten Helmet Pro cost?", Some("other"));
    let p = last_prompt_text(a.policy());
    assert!(!p.contains("899"), "another session sees nothing: {p}");
}

#[test]
fn the_trace_file_has_one_json_event_per_line_ending_with_the_stop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let (mut a, _) = agent(
        vec![calc("1 +"), calc("1 + 1"), answer("2")],
        registry(vec![]),
        AgentOptions::default(),
    );
    a.add_sink(Box::new(cairn::agent::TraceWriter::create(&path).unwrap()));
    a.run_task("1+1", None);
    let text = std::fs::read_to_string(&path).unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"task_start"));
    assert_eq!(names.last(), Some(&"stop"));
    for want in ["prompt", "step", "tool_result"] {
        assert!(names.contains(&want), "{names:?}");
    }
    assert_eq!(events.last().unwrap()["reason"], "final_answer");
    assert!(events.iter().all(|e| e["t_ms"].is_u64()));
}

#[test]
fn bad_options_are_refused_with_the_flag_named() {
    let e = Agent::new(
        ScriptedPolicy::new(vec![], 100),
        registry(vec![]),
        None,
        AgentOptions {
            max_rounds: 0,
            ..AgentOptions::default()
        },
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("--max-rounds"), "{e}");
}

/// Regression: a failing call repeated three times used to count as three failed rounds and
/// stop the task with `failures` before the dead-loop rule could ask for the final answer
/// (seen on the suite's doc-5 and doc-7 with the default preset). Then the same tasks were
/// dead loops: the model chose the same failing call a third time (doc-7 with another call
/// in between). Now a call repeated word for word turns its tool off for the rest of the
/// task, so it cannot be chosen a third time (with `--forbid-repeats failed` the failed call
/// cannot be made again at all, see the next test).
#[test]
fn a_repeated_failing_call_turns_its_tool_off_for_the_rest_of_the_task() {
    let flaky = Flaky::new("probe", 0, ToolError::invalid("unused"), "ok");
    let (mut a, _) = agent(
        vec![
            calc("1 +"),
            calc("1 +"),
            step("probe", json!({"q": "x"})),
            answer("I cannot compute that."),
        ],
        registry(vec![Arc::new(flaky)]),
        AgentOptions::default(),
    );
    let r = a.run_task("add", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer, "{r:?}");
    assert_eq!(r.dead_loops, 1);
    let schemas = &a.policy().schemas;
    assert!(allowed(&schemas[1]).contains(&"calculator".to_string()));
    assert_eq!(allowed(&schemas[2]), vec!["probe", "final_answer"]);
    assert_eq!(allowed(&schemas[3]), vec!["probe", "final_answer"]);
    let obs = &a.policy().prompts[2].last().unwrap().content;
    assert!(
        obs.contains("turned off for the rest of this task"),
        "{obs}"
    );
    assert_eq!(r.answer, "I cannot compute that.");
}

/// Issue 19: a failing call repeated word for word turned its whole tool off, so a model that
/// then saw how to fix its query could not run it. With `--forbid-repeats failed` the failed
/// call is forbidden in the grammar of every later step of the task (the decode refuses it),
/// and the tool stays on.
#[test]
fn a_failed_call_is_forbidden_word_for_word_and_its_tool_stays_on() {
    let failed_only = || AgentOptions {
        forbid_repeats: ForbidRepeats::Failed,
        ..AgentOptions::default()
    };
    let (mut a, events) = agent(
        vec![calc("1 +"), calc("1 + 1"), calc("1 + 1 + 1"), answer("3")],
        registry(vec![]),
        failed_only(),
    );
    let r = a.run_task("add ones", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer, "{r:?}");
    assert_eq!(r.dead_loops, 0);
    assert!(!r.tool_calls[0].ok && r.tool_calls[1].ok);
    let p = a.policy();
    let failed = r#""action":"calculator","args":{"expression":"1 +"}"#.to_string();
    assert!(p.forbidden[0].is_empty());
    // Forbidden from the next round to the end of the task; the call that worked is not.
    assert_eq!(p.forbidden[1], std::slice::from_ref(&failed));
    assert_eq!(p.forbidden[2], std::slice::from_ref(&failed));
    assert_eq!(p.forbidden[3], std::slice::from_ref(&failed));
    assert!(allowed(&p.schemas[1]).contains(&"calculator".to_string()));
    assert!(allowed(&p.schemas[3]).contains(&"calculator".to_string()));
    // The trace says what was forbidden, and when.
    let forbidden: Vec<(usize, String)> = events
        .kinds()
        .into_iter()
        .filter_map(|k| match k {
            EventKind::Forbidden { round, call } => Some((round, call)),
            _ => None,
        })
        .collect();
    assert_eq!(forbidden, [(1, failed)]);

    // A script that makes the forbidden call again is one the model could not have decoded.
    let (mut a, _) = agent(
        vec![calc("1 +"), calc("1 +"), answer("?")],
        registry(vec![]),
        failed_only(),
    );
    let r = a.run_task("add", None);
    assert_eq!(r.stop_reason, StopReason::Error, "{r:?}");
    assert!(r.error.unwrap().contains("forbade"));
}

/// `--forbid-repeats all` forbids calls that worked too; `none` forbids nothing; a transient
/// failure, which a later try may cure, is never forbidden.
#[test]
fn which_calls_are_forbidden_follows_forbid_repeats() {
    let run = |mode: ForbidRepeats, tools: ToolRegistry, first: Value| {
        let (mut a, _) = agent(
            vec![first, calc("2 * 2"), answer("4")],
            tools,
            AgentOptions {
                forbid_repeats: mode,
                retry_base: Duration::from_millis(1),
                ..AgentOptions::default()
            },
        );
        let r = a.run_task("two twos", None);
        assert_eq!(r.stop_reason, StopReason::FinalAnswer, "{r:?}");
        a.policy().forbidden.clone()
    };
    let worked = r#""action":"calculator","args":{"expression":"2 + 2"}"#.to_string();
    let f = run(ForbidRepeats::All, registry(vec![]), calc("2 + 2"));
    assert_eq!(f[1], std::slice::from_ref(&worked));
    assert_eq!(f[2].len(), 2, "{f:?}");
    assert!(run(ForbidRepeats::Failed, registry(vec![]), calc("2 + 2"))[2].is_empty());
    assert!(run(ForbidRepeats::None, registry(vec![]), calc("2 +"))[2].is_empty());
    let down = Flaky::new("probe", 99, ToolError::transient("busy"), "ok");
    let f = run(
        ForbidRepeats::All,
        registry(vec![Arc::new(down)]),
        step("probe", json!({"q": "x"})),
    );
    assert_eq!(f[1].len(), 0, "a transient failure stays allowed: {f:?}");
}

/// Regression (issue 19): "What does it cost to board a cat for 6 nights?" was answered with
/// the price of one night, a number the documents held, so the evidence check passed it. An
/// amount the task gives that no call used is named and the answer sent back once; the model
/// computes with it and answers again.
#[test]
fn an_answer_that_left_out_an_amount_of_the_task_is_sent_back_once() {
    let (mut a, events) = agent(
        vec![
            answer("6 nights cost 18 euros."),
            calc("18 * 6"),
            answer("6 nights cost 108 euros."),
        ],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task("A night costs 18 euros. What do 6 nights cost?", None);
    assert_eq!(r.answer, "6 nights cost 108 euros.");
    assert_eq!(r.rounds, 3);
    let checks: Vec<Vec<String>> = events
        .kinds()
        .iter()
        .filter_map(|k| match k {
            EventKind::AmountCheck { unused, .. } => Some(unused.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        checks,
        vec![vec!["18 euros".to_string(), "6 nights".to_string()]]
    );
    // The round after the check must call a tool: no final_answer in its grammar.
    let allowed: Vec<Vec<String>> = events
        .kinds()
        .iter()
        .filter_map(|k| match k {
            EventKind::Prompt { allowed, .. } => Some(allowed.clone()),
            _ => None,
        })
        .collect();
    let has_final = |i: usize| allowed[i].iter().any(|n| n == "final_answer");
    assert!(has_final(0) && !has_final(1) && has_final(2), "{allowed:?}");
    let text = last_prompt_text(a.policy());
    assert!(
        text.contains(
            "[check: the task gives \"18 euros\", \"6 nights\", and no calculation used them."
        ),
        "{text}"
    );
    // Used by the first call: accepted at once.
    let (mut a, events) = agent(
        vec![calc("18 * 6"), answer("108 euros.")],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task("A night costs 18 euros. What do 6 nights cost?", None);
    assert_eq!((r.answer.as_str(), r.rounds), ("108 euros.", 2));
    assert!(!events
        .kinds()
        .iter()
        .any(|k| matches!(k, EventKind::AmountCheck { .. })));
}

/// Issue 19: a final answer whose numbers appear in no result, the task or its context is
/// sent back once, naming them; the model computes them and answers again. A second answer
/// is accepted whatever it holds (the check runs once per task), and an answer whose numbers
/// come from the results (allowing rounding) passes at once.
#[test]
fn an_answer_with_numbers_found_nowhere_is_sent_back_once() {
    let (mut a, events) = agent(
        vec![
            answer("It is 240."),
            calc("300 / 2 - 30"),
            answer("It is 120."),
        ],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task(
        "Two rooms total 300 square feet; one is 60 larger. How large is the smaller?",
        None,
    );
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
    assert_eq!(r.answer, "It is 120.");
    assert_eq!(r.rounds, 3);
    let checks: Vec<Vec<String>> = events
        .kinds()
        .iter()
        .filter_map(|k| match k {
            EventKind::EvidenceCheck { unsupported, .. } => Some(unsupported.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(checks, vec![vec!["240".to_string()]]);
    let text = last_prompt_text(a.policy());
    assert!(
        text.contains("[check: 240 in your answer does not appear"),
        "{text}"
    );

    // The round after the check must call a tool (the model had answered the check by
    // repeating its answer), and once per task: the second unsupported answer stands (91, a
    // calculation on a made-up 13: written by the calculator, so the grammar admits it).
    let (mut a, _) = agent(
        vec![answer("7"), calc("7 * 13"), answer("91")],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task("Pick a number.", None);
    assert_eq!(r.answer, "91");
    assert_eq!(r.rounds, 3);
    let finals: Vec<bool> = a
        .policy()
        .schemas
        .iter()
        .map(|s| allowed(s).iter().any(|n| n == "final_answer"))
        .collect();
    assert_eq!(finals, [true, false, true]);
    // Once numbers were sent back, a later answer may write only the evidence's numbers:
    // its schema carries the pattern (4, the calculator's result, and not 8).
    let (mut a, events) = agent(
        vec![answer("7"), calc("2 + 2"), answer("4")],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task("Pick a number.", None);
    assert_eq!((r.answer.as_str(), r.rounds), ("4", 3));
    let patterns: Vec<Option<String>> = a
        .policy()
        .schemas
        .iter()
        .map(|s| {
            s["anyOf"].as_array().unwrap().iter().find_map(|b| {
                b["properties"]["args"]["properties"]["answer"]["pattern"]
                    .as_str()
                    .map(str::to_string)
            })
        })
        .collect();
    assert!(
        patterns[0].is_none() && patterns[1].is_none(),
        "{patterns:?}"
    );
    let re = regex::Regex::new(patterns[2].as_deref().unwrap()).unwrap();
    assert!(re.is_match("It is 4.") && !re.is_match("It is 8."));
    assert!(events
        .kinds()
        .iter()
        .any(|k| matches!(k, EventKind::GroundedAnswer { round: 3, .. })));

    // Supported by a result, with rounding: accepted at once.
    let (mut a, events) = agent(
        vec![calc("289 / 10"), answer("28.90 kg")],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task("What is 289 divided by ten, in kg?", None);
    assert_eq!(r.answer, "28.90 kg");
    assert!(!events
        .kinds()
        .iter()
        .any(|k| matches!(k, EventKind::EvidenceCheck { .. })));

    // Off with the option.
    let (mut a, _) = agent(
        vec![answer("It is 240.")],
        registry(vec![]),
        AgentOptions {
            evidence_check: false,
            ..AgentOptions::default()
        },
    );
    assert_eq!(a.run_task("How large?", None).answer, "It is 240.");
}

/// Regression (issue 19): asked for the oldest member, the model ordered by `dob DESC LIMIT
/// 1`, was told the result put the youngest first, and answered with a child as the oldest
/// member. An answer that names the other end of a limited order than its result shows is
/// sent back once, saying so; the model orders the other way and answers again.
#[test]
fn an_answer_naming_the_other_end_of_a_limited_order_is_sent_back_once() {
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("members.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE members (name TEXT, dob TEXT);
         INSERT INTO members VALUES ('Mia', '2016-01-14'), ('George', '1941-07-30'), ('Ann', '1990-03-02');",
    )
    .unwrap();
    drop(conn);
    let sql = |q: &str| step("sql", json!({ "query": q }));
    let (mut a, events) = agent(
        vec![
            sql("SELECT name, dob FROM members ORDER BY dob DESC LIMIT 1"),
            answer("Mia is the oldest member."),
            sql("SELECT name, dob FROM members ORDER BY dob ASC LIMIT 1"),
            answer("George is the oldest member."),
        ],
        registry(vec![Arc::new(
            SqlTool::open(&db, SqlOptions::default()).unwrap(),
        )]),
        AgentOptions::default(),
    );
    let r = a.run_task("Who is the oldest member?", None);
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("George is the oldest member.", 4)
    );
    let checks: Vec<(String, String)> = events
        .kinds()
        .iter()
        .filter_map(|k| match k {
            EventKind::OrderCheck { said, shown, .. } => Some((said.clone(), shown.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(checks, [("oldest".to_string(), "youngest".to_string())]);
    let text = last_prompt_text(a.policy());
    assert!(
        text.contains("[check: your answer names the oldest, but the result it rests on lists the youngest first"),
        "{text}"
    );
}

/// Regression (issue 19): "Which title has been borrowed most often?" counted the titles of
/// `books` (each once), got 1 for every title, and the 1.5B model answered with the first;
/// with the result's note under it (the loans are in `loans`), it answered the same. The
/// answer is sent back with the note, to a round that may only query.
#[test]
fn an_answer_from_a_count_of_one_for_every_group_is_sent_back_to_query() {
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("books.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT);
         CREATE TABLE loans (loan_id INTEGER PRIMARY KEY,
                             book_id INTEGER REFERENCES books(book_id));
         INSERT INTO books VALUES (1, 'Winter at Vardo'), (2, 'The Polder Detective');
         INSERT INTO loans VALUES (1, 2), (2, 2), (3, 1);",
    )
    .unwrap();
    drop(conn);
    let sql = |q: &str| step("sql", json!({ "query": q }));
    let joined = "SELECT title, COUNT(*) FROM books JOIN loans ON loans.book_id = books.book_id \
                  GROUP BY title ORDER BY COUNT(*) DESC LIMIT 1";
    let (mut a, events) = agent(
        vec![
            sql("SELECT title, COUNT(*) FROM books GROUP BY title ORDER BY COUNT(*) DESC LIMIT 1"),
            answer("Winter at Vardo has been borrowed most often."),
            sql(joined),
            answer("The Polder Detective has been borrowed most often."),
        ],
        registry(vec![Arc::new(
            SqlTool::open(&db, SqlOptions::default()).unwrap(),
        )]),
        AgentOptions::default(),
    );
    let r = a.run_task("Which title has been borrowed most often?", None);
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("The Polder Detective has been borrowed most often.", 4)
    );
    let notes: Vec<String> = events
        .kinds()
        .iter()
        .filter_map(|k| match k {
            EventKind::GroupsCheck { note, .. } => Some(note.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains(joined), "{}", notes[0]);
    let p = a.policy();
    assert_eq!(
        allowed(&p.schemas[2]),
        ["sql"],
        "the round after may only query"
    );
    let said = &p.prompts[2].last().unwrap().content;
    assert!(
        said.contains("[check: your answer rests on a count that is 1 for every group"),
        "{said}"
    );
}

/// Regression (issue 19): "How much in consultation fees is still unpaid?" was answered from
/// one visit's fee among the three sample rows shown before the first round; sent back, the
/// model confirmed the sampled number with the calculator and answered the same again. The
/// round after an answer that rests on sample rows may only query the database.
#[test]
fn an_answer_from_sample_rows_is_sent_back_to_a_round_that_may_only_query() {
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fees.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE fees (visit INTEGER PRIMARY KEY, fee INTEGER, paid TEXT);
         INSERT INTO fees VALUES (1, 48, '2025-01-08'), (2, 62, NULL), (3, 55, '2025-01-21'),
           (4, 75, NULL), (5, 48, NULL), (6, 90, '2025-02-02'), (7, 30, NULL),
           (8, 62, '2025-02-10'), (9, 41, NULL), (10, 48, '2025-03-01');",
    )
    .unwrap();
    drop(conn);
    // The task run with `first` as the first step, then a query and the right answer: the
    // result, the checks' unsupported values, each round's actions and the last prompt.
    let run = |first: Value| {
        let (mut a, events) = agent(
            vec![
                first,
                step(
                    "sql",
                    json!({"query": "SELECT SUM(fee) FROM fees WHERE paid IS NULL"}),
                ),
                answer("256 euros of fees are still unpaid."),
            ],
            registry(vec![Arc::new(
                SqlTool::open(&db, SqlOptions::default()).unwrap(),
            )]),
            AgentOptions::default(),
        );
        let r = a.run_task("How much in fees is still unpaid?", None);
        let (mut checked, mut allowed) = (Vec::new(), Vec::new());
        for k in events.kinds() {
            match k {
                EventKind::EvidenceCheck { unsupported, .. } => checked.push(unsupported),
                EventKind::Prompt { allowed: a, .. } => allowed.push(a),
                _ => {}
            }
        }
        (r, checked, allowed, last_prompt_text(a.policy()))
    };
    let (r, checked, allowed, _) = run(answer("62 euros of fees are still unpaid."));
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("256 euros of fees are still unpaid.", 3)
    );
    assert_eq!(checked, [["62"]]);
    assert_eq!(allowed[1], ["sql"], "{allowed:?}");
    let has = |i: usize, n: &str| allowed[i].iter().any(|a| a == n);
    assert!(
        has(2, "final_answer") && has(2, "calculator"),
        "{allowed:?}"
    );

    // Sampled numbers in the thought only, and a sum in the answer found nowhere: the answer
    // goes back for the sum, and the next round may only query.
    let (r, checked, allowed, text) = run(json!({
        "thought": "The fees are 62 and 48 here.", "action": "final_answer",
        "args": {"answer": "110 euros of fees are still unpaid."}
    }));
    assert_eq!((r.rounds, checked), (3, vec![vec!["110".to_string()]]));
    assert_eq!(allowed[1], ["sql"], "{allowed:?}");
    assert!(
        text.contains("62, 48 come from the few sample rows"),
        "{text}"
    );
}

/// Regression (issue 19): asked for the oldest library member, the 1.5B model called
/// `reason` first, reasoned over the three sampled members, and named the oldest of them; the
/// reasoning, which held her name, counted as a result pointing to her row, so the answer
/// stood. A reasoning read the same sample rows: an answer resting on it goes back too, to a
/// round that may only query.
#[test]
fn a_reasoning_over_sample_rows_is_no_result_that_points_to_them() {
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fees.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE fees (visit INTEGER PRIMARY KEY, fee INTEGER, paid TEXT);
             INSERT INTO fees VALUES (1, 48, '2025-01-08'), (2, 62, NULL), (3, 55, '2025-01-21'),
               (4, 75, NULL), (5, 48, NULL), (6, 90, '2025-02-02'), (7, 30, NULL),
               (8, 62, '2025-02-10'), (9, 41, NULL), (10, 48, '2025-03-01');",
        )
        .unwrap();
    let policy = ScriptedPolicy::new(
        vec![
            step("reason", json!({})),
            answer("62 euros of fees are still unpaid."),
            step(
                "sql",
                json!({"query": "SELECT SUM(fee) FROM fees WHERE paid IS NULL"}),
            ),
            answer("256 euros of fees are still unpaid."),
        ],
        4096,
    )
    .with_reasonings(vec![
        "Of the visits shown, visit 2 is unpaid, with a fee of 62.\nAnswer: 62".to_string(),
    ]);
    let mut a = Agent::new(
        policy,
        registry(vec![Arc::new(
            SqlTool::open(&db, SqlOptions::default()).unwrap(),
        )]),
        None,
        AgentOptions {
            reason: Some(true),
            ..AgentOptions::default()
        },
    )
    .unwrap();
    let events = Events::default();
    a.add_sink(Box::new(events.clone()));
    let r = a.run_task("How much in fees is still unpaid?", None);
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("256 euros of fees are still unpaid.", 4)
    );
    let (mut checked, mut allowed) = (Vec::new(), Vec::new());
    for k in events.kinds() {
        match k {
            EventKind::EvidenceCheck { unsupported, .. } => checked.push(unsupported),
            EventKind::Prompt { allowed: a, .. } => allowed.push(a),
            _ => {}
        }
    }
    assert_eq!(checked, [["62"]]);
    assert_eq!(allowed[2], ["sql"], "{allowed:?}");
}

/// Regression: asked which customer spent the most, the 1.5B model took the customer of the
/// first sampled invoice and queried that customer's name (`WHERE CustomerId = 1`), a result
/// the evidence check could not fault. An answer to a task that asks for one end of a
/// comparison, resting on sql results of which none compared rows, goes back once to a round
/// that may only query; one that ordered the rows stands.
#[test]
fn a_superlative_answered_from_rows_no_query_compared_is_sent_back_to_query() {
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("spend.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT);
         CREATE TABLE invoice (id INTEGER PRIMARY KEY, customer_id INTEGER, total REAL);
         INSERT INTO customer VALUES (1, 'Luis'), (2, 'Helena'), (3, 'Bjorn');
         INSERT INTO invoice VALUES (1, 1, 0.99), (2, 2, 12.5), (3, 2, 16.3), (4, 3, 4.0);",
    )
    .unwrap();
    drop(conn);
    let ordered = "SELECT c.name, SUM(i.total) AS s FROM invoice i JOIN customer c ON c.id = i.customer_id GROUP BY c.name ORDER BY s DESC LIMIT 1";
    let run = |first: &str| {
        let (mut a, events) = agent(
            vec![
                step("sql", json!({ "query": first })),
                answer("The customer who spent the most is the one above."),
                step("sql", json!({ "query": ordered })),
                answer("Helena spent the most."),
            ],
            registry(vec![Arc::new(
                SqlTool::open(&db, SqlOptions::default()).unwrap(),
            )]),
            AgentOptions::default(),
        );
        let r = a.run_task("Which customer has spent the most in total?", None);
        let (mut checked, mut allowed) = (Vec::new(), Vec::new());
        for k in events.kinds() {
            match k {
                EventKind::ComparisonCheck { word, .. } => checked.push(word),
                EventKind::Prompt { allowed: a, .. } => allowed.push(a),
                _ => {}
            }
        }
        (r, checked, allowed)
    };
    let (r, checked, allowed) = run("SELECT name FROM customer WHERE id = 1");
    assert_eq!((r.answer.as_str(), r.rounds), ("Helena spent the most.", 4));
    assert_eq!(checked, ["most"]);
    assert_eq!(allowed[2], ["sql"], "{allowed:?}");
    // The rows were compared: the answer stands at once.
    let (r, checked, _) = run(ordered);
    assert_eq!(r.rounds, 2);
    assert!(checked.is_empty());
}

/// Regression (issue 19): asked for the unpaid consultation fees, the 1.5B model queried
/// `reason = 'consultation'` (no visit has that reason: the result said so and listed the
/// reasons there are), got NULL and answered "0 euros"; sent back once by the evidence
/// check, it answered the same again. An answer resting on a result that found nothing
/// through a value no row holds goes back once to a round that may only query; a result
/// that found rows, or a value that exists, lets the answer stand.
#[test]
fn an_answer_from_a_query_that_found_nothing_through_a_missing_value_is_sent_back() {
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("visits.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE visit (id INTEGER PRIMARY KEY, reason TEXT, fee INTEGER, paid TEXT);
         INSERT INTO visit VALUES (1, 'vaccination', 48, NULL), (2, 'dental cleaning', 62, NULL),
           (3, 'vaccination', 48, '2025-01-21');",
    )
    .unwrap();
    drop(conn);
    let run = |task: &str, first: &str| {
        let (mut a, events) = agent(
            vec![
                step("sql", json!({ "query": first })),
                answer("0 euros are still unpaid."),
                step(
                    "sql",
                    json!({"query": "SELECT SUM(fee) FROM visit WHERE paid IS NULL"}),
                ),
                answer("110 euros are still unpaid."),
            ],
            registry(vec![Arc::new(
                SqlTool::open(&db, SqlOptions::default()).unwrap(),
            )]),
            AgentOptions::default(),
        );
        let r = a.run_task(task, None);
        let (mut checked, mut allowed) = (Vec::new(), Vec::new());
        for k in events.kinds() {
            match k {
                EventKind::EmptyResultCheck { conditions, .. } => checked.push(conditions),
                EventKind::Prompt { allowed: a, .. } => allowed.push(a),
                _ => {}
            }
        }
        (r, checked, allowed, last_prompt_text(a.policy()))
    };
    let made_up = "SELECT SUM(fee) FROM visit WHERE reason = 'consultation' AND paid IS NULL";
    // The task's own word put in the wrong column, and a value nobody named: both go back.
    for task in [
        "How much in consultation fees is still unpaid?",
        "How much in fees is still unpaid?",
    ] {
        let (r, checked, allowed, text) = run(task, made_up);
        assert_eq!(
            (r.answer.as_str(), r.rounds),
            ("110 euros are still unpaid.", 4),
            "{task}"
        );
        assert_eq!(checked, [["reason = 'consultation'"]], "{task}");
        assert_eq!(allowed[2], ["sql"], "{task}: {allowed:?}");
        assert!(
            text.contains("found nothing because of reason = 'consultation'"),
            "{text}"
        );
    }
    // A value that exists, or a result with rows: no such check (the other checks of an
    // answer still apply).
    for first in [
        "SELECT SUM(fee) FROM visit WHERE reason = 'dental cleaning' AND paid IS NOT NULL",
        "SELECT SUM(fee) FROM visit WHERE paid IS NULL",
    ] {
        let (_, checked, _, _) = run("How much for dental cleaning is still unpaid?", first);
        assert!(checked.is_empty(), "{first}: {checked:?}");
    }
}

/// A database of five orders with their freight and one product priced per row, for the
/// checks of what an answer's query selected.
fn orders_db(dir: &std::path::Path) -> std::path::PathBuf {
    let db = dir.join("orders.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, placed TEXT, freight REAL);
         INSERT INTO orders VALUES (1, '2025-03-02', 52.45), (2, '2025-03-09', 50.44),
           (3, '2025-03-20', 99.71), (4, '2025-04-01', 70.22);
         CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, price REAL);
         INSERT INTO products VALUES (1, 'Repair Kit', 18.25), (2, 'Helmet', 49.9),
           (3, 'Bell', 21.0);",
    )
    .unwrap();
    db
}

/// What [`run_on_orders`] returns: the result, the check events the test picked, the actions
/// each round allowed, the last prompt's text, and the texts each round was kept from writing.
type OrdersRun<T> = (
    cairn::agent::AgentResult,
    Vec<T>,
    Vec<Vec<String>>,
    String,
    Vec<Vec<String>>,
);

/// Runs `steps` on the orders database for `task`, picking check events with `pick`.
fn run_on_orders<T>(
    task: &str,
    steps: Vec<Value>,
    pick: impl Fn(&EventKind) -> Option<T>,
) -> OrdersRun<T> {
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let db = orders_db(dir.path());
    let (mut a, events) = agent(
        steps,
        registry(vec![Arc::new(
            SqlTool::open(&db, SqlOptions::default()).unwrap(),
        )]),
        AgentOptions::default(),
    );
    let r = a.run_task(task, None);
    let (mut picked, mut allowed) = (Vec::new(), Vec::new());
    for k in events.kinds() {
        if let EventKind::Prompt { allowed: a, .. } = &k {
            allowed.push(a.clone());
        }
        picked.extend(pick(&k));
    }
    let forbidden = a.policy().forbidden.clone();
    (r, picked, allowed, last_prompt_text(a.policy()), forbidden)
}

/// Regression (issue 19): asked for "the total freight charged on orders placed in March
/// 2025", the 1.5B model queried the orders' freight and answered with the amounts one by
/// one. Such an answer is sent back once, to a round that must call a tool; an answer with
/// the sum, or a task asking per row, is not.
#[test]
fn a_total_answered_with_the_amounts_it_is_made_of_is_sent_back_once() {
    let task = "What was the total freight charged on orders placed in March 2025?";
    let query = json!({"query": "SELECT freight FROM orders WHERE placed LIKE '2025-03%'"});
    let pick = |k: &EventKind| match k {
        EventKind::TotalCheck { amounts, .. } => Some(amounts.clone()),
        _ => None,
    };
    let (r, checked, allowed, text, _) = run_on_orders(
        task,
        vec![
            step("sql", query.clone()),
            answer("The total freight was 52.45, 50.44 and 99.71 euros."),
            calc("52.45 + 50.44 + 99.71"),
            answer("The total freight was 202.6 euros."),
        ],
        pick,
    );
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("The total freight was 202.6 euros.", 4)
    );
    assert_eq!(checked, [["52.45", "50.44", "99.71"]]);
    assert!(
        !allowed[2].contains(&"final_answer".to_string()),
        "{allowed:?}"
    );
    assert!(text.contains("asks for one total"), "{text}");
    for (task, said) in [
        (task, "The total freight was 202.6 euros."),
        (
            "What was the freight of each order placed in March 2025?",
            "The freight was 52.45, 50.44 and 99.71 euros.",
        ),
    ] {
        let steps = vec![step("sql", query.clone()), answer(said)];
        let (_, checked, _, _, _) = run_on_orders(task, steps, pick);
        assert!(checked.is_empty(), "{task}: {checked:?}");
    }
}

/// Regression (issue 19, the garage suite): "What is the labour of job 14 worth with VAT
/// added?" was answered 2.7225 euros, the job's 2.25 hours times 1.21, with the rate per hour
/// in the passages shown. A sum of money worked out with no price in the calculation is sent
/// back once, to a round that must call a tool, the message saying which numbers were used;
/// an answer computed from a price is not.
#[test]
fn a_sum_of_money_worked_out_with_no_price_is_sent_back_once() {
    let task = "What does renting the Bell for 3 days cost, with 19% VAT?";
    let query = json!({"query": "SELECT price FROM products WHERE name = 'Bell'"});
    let pick = |k: &EventKind| match k {
        EventKind::PriceCheck {
            amount, expression, ..
        } => Some((amount.clone(), expression.clone())),
        _ => None,
    };
    let (r, checked, allowed, text, _) = run_on_orders(
        task,
        vec![
            calc("3 * 1.19"),
            answer("Renting the Bell for 3 days costs 3.57 euros."),
            step("sql", query.clone()),
            calc("21 * 3 * 1.19"),
            answer("Renting the Bell for 3 days costs 74.97 euros."),
        ],
        pick,
    );
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("Renting the Bell for 3 days costs 74.97 euros.", 5)
    );
    assert_eq!(checked, [("3.57".to_string(), "3 * 1.19".to_string())]);
    assert!(
        !allowed[2].iter().any(|a| a == "final_answer"),
        "the round after must call a tool: {allowed:?}"
    );
    assert!(
        text.contains("worked out as 3 * 1.19, and none of those numbers is a price"),
        "{text}"
    );
    // Worked out from the price the query found: no check.
    let (r, checked, _, _, _) = run_on_orders(
        task,
        vec![
            step("sql", query),
            calc("21 * 3 * 1.19"),
            answer("Renting the Bell for 3 days costs 74.97 euros."),
        ],
        pick,
    );
    assert_eq!(r.rounds, 3);
    assert!(checked.is_empty(), "{checked:?}");
}

/// Regression (issue 19): a made-up value quoted by an earlier check's message ("your
/// answer's 16 is not the days between …") was taken for evidence by the evidence check of
/// the next answer, which gave it again. The messages of answers sent back are no evidence.
#[test]
fn a_value_quoted_by_a_check_message_is_no_evidence_for_the_next_answer() {
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("stays.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE stays (id INTEGER PRIMARY KEY, guest TEXT, arrival TEXT, departure TEXT);
             INSERT INTO stays VALUES (1, 'Ann Lee', '2025-03-02', '2025-03-05');",
        )
        .unwrap();
    let (mut a, events) = agent(
        vec![
            answer("Ann Lee stayed 16 nights."),
            step("sql", json!({"query": "SELECT guest FROM stays"})),
            answer("Ann Lee stayed 16 nights."),
            answer("Ann Lee stayed 16 nights."),
        ],
        registry(vec![Arc::new(
            SqlTool::open(&db, SqlOptions::default()).unwrap(),
        )]),
        AgentOptions::default(),
    );
    a.run_task("How many nights did Ann Lee stay?", None);
    let kinds = events.kinds();
    assert!(
        kinds
            .iter()
            .any(|k| matches!(k, EventKind::DaysCheck { .. })),
        "{kinds:?}"
    );
    let flagged: Vec<Vec<String>> = kinds
        .iter()
        .filter_map(|k| match k {
            EventKind::EvidenceCheck { unsupported, .. } => Some(unsupported.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(flagged, [["16"]]);
}

/// A search index under `dir` over one document, `name` holding `text`.
fn indexed_docs(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join(name), text).unwrap();
    let index = dir.join("idx.sqlite");
    cairn::index::Index::open_or_create(&index)
        .unwrap()
        .update(std::slice::from_ref(&docs))
        .unwrap();
    index
}

/// Regression (issue 19): "Tomás Ruiz brings his dog on his June stay. What will the dog
/// cost?" was answered "20 euros per night", the documents' rate, with the stay's four nights
/// in the rows shown. An answer that gives its amount per day or night, or a value of a column
/// of prices, where the task asks for the whole of a span is sent back once, to a round that
/// must call a tool; the total, or a rate the task asks for, is not.
#[test]
fn a_rate_answered_where_the_task_asks_for_the_whole_is_sent_back_once() {
    let task = "What does renting the Bell for 3 days cost, going by the products table?";
    let query = json!({"query": "SELECT price FROM products WHERE name = 'Bell'"});
    let pick = |k: &EventKind| match k {
        EventKind::RateCheck { rate, .. } => Some(rate.clone()),
        _ => None,
    };
    let (r, checked, allowed, text, _) = run_on_orders(
        task,
        vec![
            step("sql", query.clone()),
            answer("Renting the Bell costs 21 euros a day."),
            calc("21 * 3"),
            answer("Renting the Bell for 3 days costs 63 euros."),
        ],
        pick,
    );
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("Renting the Bell for 3 days costs 63 euros.", 4)
    );
    assert_eq!(checked, ["21 euros a day"]);
    assert!(
        !allowed[2].contains(&"final_answer".to_string()),
        "{allowed:?}"
    );
    assert!(
        text.contains("gives an amount per day (21 euros a day)"),
        "{text}"
    );
    // The price of one day from the products table, with no rate written: its column says.
    let (_, checked, _, text, _) = run_on_orders(
        task,
        vec![
            step("sql", query.clone()),
            answer("Renting the Bell costs 21 euros."),
            calc("21 * 3"),
            answer("Renting the Bell for 3 days costs 63 euros."),
        ],
        pick,
    );
    assert_eq!(checked, ["21 (price)"]);
    assert!(
        text.contains("your answer's 21 is a price of a row above"),
        "{text}"
    );
    for (task, steps) in [
        (
            task,
            vec![
                step("sql", query.clone()),
                calc("21 * 3"),
                answer("At 21 euros a day, renting the Bell for 3 days costs 63 euros."),
            ],
        ),
        (
            "What is the Bell's listed price per day?",
            vec![
                step("sql", query.clone()),
                answer("The Bell costs 21 euros a day."),
            ],
        ),
    ] {
        let said = steps.last().unwrap()["args"]["answer"].clone();
        let (r, checked, _, _, _) = run_on_orders(task, steps, pick);
        assert!(checked.is_empty(), "{task}: {checked:?}");
        assert_eq!(r.answer, said.as_str().unwrap());
    }
}

/// Regression (issue 19): "How many days did order 10277 take to ship?" was answered "12
/// working days", a shipper's delivery time from the documents, with the order's two dates in
/// the rows shown (9 days apart). A count of days that no two dates of a row shown give, when
/// no call worked with dates, is sent back once to a round that must call a tool; the count
/// the dates give is not.
#[test]
fn a_count_of_days_the_dates_shown_do_not_give_is_sent_back_once() {
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ships.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE shipments (id INTEGER PRIMARY KEY, placed TEXT, shipped TEXT);
             INSERT INTO shipments VALUES (1, '2025-03-02', '2025-03-11'), (2, '2025-03-05', '2025-03-07');",
        )
        .unwrap();
    let task = "How many days did shipment 1 take to ship?";
    let query = json!({"query": "SELECT placed, shipped FROM shipments WHERE id = 1"});
    let run = |steps: Vec<Value>| {
        let (mut a, events) = agent(
            steps,
            registry(vec![Arc::new(
                SqlTool::open(&db, SqlOptions::default()).unwrap(),
            )]),
            AgentOptions::default(),
        );
        let r = a.run_task(task, None);
        let checked: Vec<(String, Vec<String>)> = events
            .kinds()
            .into_iter()
            .filter_map(|k| match k {
                EventKind::DaysCheck { count, dates, .. } => Some((count, dates)),
                _ => None,
            })
            .collect();
        (r, checked, last_prompt_text(a.policy()))
    };
    let (r, checked, text) = run(vec![
        step("sql", query.clone()),
        answer("Shipment 1 took 12 working days to ship."),
        calc("2025-03-11 - 2025-03-02"),
        answer("Shipment 1 took 9 days to ship."),
    ]);
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("Shipment 1 took 9 days to ship.", 4)
    );
    assert_eq!(
        checked,
        [(
            "12".to_string(),
            vec!["2025-03-02".to_string(), "2025-03-11".to_string()]
        )]
    );
    assert!(
        text.contains("your answer's 12 is not the days between"),
        "{text}"
    );
    // The days the dates give, worked out in the head: not this check's (the evidence check
    // asks for the calculation).
    let (_, checked, _) = run(vec![
        step("sql", query.clone()),
        answer("Shipment 1 took 9 days to ship."),
    ]);
    assert!(checked.is_empty(), "{checked:?}");
}

/// Regression (issue 19): "Tomás Ruiz brings his dog on his June stay. What will the dog
/// cost?" was answered 120 euros: the documents' 20 euros per night times "6 nights" ("June is
/// 6 months"), with his June booking (2025-06-02 to 2025-06-06, 4 nights) in the rows shown.
/// An answer that is a price per night times a count of nights no row's dates give is sent
/// back once, naming the June row's days, to a round that must call a tool and may not write
/// the count again; the price times the row's nights is not sent back.
#[test]
fn a_price_per_night_times_nights_no_row_gives_is_sent_back_once() {
    use cairn::tools::search::SearchTool;
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let index = indexed_docs(
        dir.path(),
        "facilities.md",
        "Bicycles can be hired at the reception.\nDogs are welcome for 20 euros per night.\n",
    );
    let db = dir.path().join("hotel.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE bookings (id INTEGER PRIMARY KEY, guest TEXT, arrival TEXT, departure TEXT);
             INSERT INTO bookings VALUES (2, 'Tomás Ruiz', '2025-03-04', '2025-03-06'),
                                         (17, 'Tomás Ruiz', '2025-06-02', '2025-06-06');",
        )
        .unwrap();
    let task = "Tomás Ruiz brings his dog on his June stay. What will the dog cost?";
    let guessed = json!({
        "thought": "20 euros per night. June is 6 months, so 6 nights: 20 * 6 = 120.",
        "action": "final_answer",
        "args": {"answer": "The dog will cost 120 euros."}
    });
    let run = |steps: Vec<Value>| {
        let (mut a, events) = agent(
            steps,
            registry(vec![
                Arc::new(SearchTool::new(&index)),
                Arc::new(SqlTool::open(&db, SqlOptions::default()).unwrap()),
            ]),
            AgentOptions::default(),
        );
        let r = a.run_task(task, None);
        let checked: Vec<(String, Vec<String>)> = events
            .kinds()
            .into_iter()
            .filter_map(|k| match k {
                EventKind::DaysCheck { count, dates, .. } => Some((count, dates)),
                _ => None,
            })
            .collect();
        let allowed: Vec<Vec<String>> = events
            .kinds()
            .into_iter()
            .filter_map(|k| match k {
                EventKind::Prompt { allowed, .. } => Some(allowed),
                _ => None,
            })
            .collect();
        (r, checked, allowed, a)
    };
    let lookups = || {
        vec![
            step("search", json!({"query": "dog per night"})),
            step(
                "sql",
                json!({"query": "SELECT arrival, departure FROM bookings WHERE guest = 'Tomás Ruiz'"}),
            ),
        ]
    };
    let mut steps = lookups();
    steps.extend([
        guessed.clone(),
        calc("20 * 4"),
        answer("The dog will cost 80 euros."),
    ]);
    let (r, checked, allowed, a) = run(steps);
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("The dog will cost 80 euros.", 5)
    );
    assert_eq!(
        checked,
        [(
            "6 nights".to_string(),
            vec!["2025-06-02".to_string(), "2025-06-06".to_string()]
        )]
    );
    let text = last_prompt_text(a.policy());
    assert!(
        text.contains(
            "the rows of June above give other ones (2025-06-02 to 2025-06-06: 4 days apart)"
        ),
        "{text}"
    );
    assert!(
        !allowed[3].contains(&"final_answer".to_string()),
        "{allowed:?}"
    );
    assert_eq!(a.policy().forbidden[3], [" 6 ", "20 * 6", "6 * 20"]);
    // The answer's step is shown without the thought that holds the guessed count.
    assert!(!text.contains("June is 6 months"), "{text}");
    assert!(text.contains("The dog will cost 120 euros."), "{text}");
    // The price times the June stay's nights: accepted as it is.
    let mut steps = lookups();
    steps.push(json!({
        "thought": "20 euros per night for the 4 nights of the June stay: 80 euros.",
        "action": "final_answer",
        "args": {"answer": "The dog will cost 80 euros."}
    }));
    let (r, checked, _, _) = run(steps);
    assert!(checked.is_empty(), "{checked:?}");
    assert_eq!(r.rounds, 3);
}

/// Regression (issue 19): asked for Hugo Lambert's email, the 1.5B model searched the
/// documents for "Hugo Lambert email", was told no passage holds "Hugo Lambert", and answered
/// with the library's own address. An answer that gives, for such a name, a value found only
/// in that search's passages is sent back once; the value from his row is not.
#[test]
fn a_value_from_a_passage_that_does_not_name_the_person_is_sent_back_once() {
    use cairn::tools::search::SearchTool;
    use cairn::tools::sql::{SqlOptions, SqlTool};
    let dir = tempfile::tempdir().unwrap();
    let index = indexed_docs(
        dir.path(),
        "membership.md",
        "Membership renews every year.\nQuestions about membership by email: membership@townlibrary.example.\n",
    );
    let db = dir.path().join("members.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE members (member_no INTEGER PRIMARY KEY, name TEXT, email TEXT);
             INSERT INTO members VALUES (1016, 'Hugo Lambert', 'hugo.l@post.example');",
        )
        .unwrap();
    let wrong = "Hugo Lambert's email address is membership@townlibrary.example.";
    let right = "Hugo Lambert's email address is hugo.l@post.example.";
    let (mut a, events) = agent(
        vec![
            step("search", json!({"query": "Hugo Lambert email"})),
            answer(wrong),
            step(
                "sql",
                json!({"query": "SELECT email FROM members WHERE name = 'Hugo Lambert'"}),
            ),
            answer(right),
        ],
        registry(vec![
            Arc::new(SearchTool::new(&index)),
            Arc::new(SqlTool::open(&db, SqlOptions::default()).unwrap()),
        ]),
        AgentOptions::default(),
    );
    let r = a.run_task("What is Hugo Lambert's email address?", None);
    assert_eq!((r.answer.as_str(), r.rounds), (right, 4));
    let checked: Vec<(String, String)> = events
        .kinds()
        .into_iter()
        .filter_map(|k| match k {
            EventKind::AnotherCheck { value, name, .. } => Some((value, name)),
            _ => None,
        })
        .collect();
    assert_eq!(
        checked,
        [(
            "membership@townlibrary.example".to_string(),
            "Hugo Lambert".to_string()
        )]
    );
    let text = last_prompt_text(a.policy());
    assert!(
        text.contains("passage that does not mention Hugo Lambert"),
        "{text}"
    );
    // Told only, the model searched the same words again: the round after may only query,
    // and may not write the value.
    let allowed: Vec<Vec<String>> = events
        .kinds()
        .into_iter()
        .filter_map(|k| match k {
            EventKind::Prompt { allowed, .. } => Some(allowed),
            _ => None,
        })
        .collect();
    assert_eq!(allowed[2], ["sql"], "{allowed:?}");
    assert_eq!(
        a.policy().forbidden[2],
        ["membership@townlibrary.example".to_string()]
    );
}

/// Regression (issue 19): "What is the cheapest product?" was answered "the one with a price
/// of 18.25 euros" from `SELECT MIN(price) FROM products`. A task asking which row is at one
/// end, answered from a query of only the value there, is sent back once to a round that may
/// only query; a task asking for the value itself is not.
#[test]
fn a_question_of_which_one_answered_from_a_bare_minimum_is_sent_back_once() {
    let pick = |k: &EventKind| match k {
        EventKind::ExtremeCheck { word, .. } => Some(word.clone()),
        _ => None,
    };
    let bare = json!({"query": "SELECT MIN(price) FROM products"});
    let (r, checked, allowed, text, _) = run_on_orders(
        "What is the cheapest product?",
        vec![
            step("sql", bare.clone()),
            answer("The cheapest product costs 18.25 euros."),
            step(
                "sql",
                json!({"query": "SELECT name, price FROM products ORDER BY price LIMIT 1"}),
            ),
            answer("The cheapest product is the Repair Kit, at 18.25 euros."),
        ],
        pick,
    );
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("The cheapest product is the Repair Kit, at 18.25 euros.", 4)
    );
    assert_eq!(checked, ["cheapest"]);
    assert_eq!(allowed[2], ["sql"], "{allowed:?}");
    assert!(text.contains("not the row that has it"), "{text}");
    let (r, checked, _, _, _) = run_on_orders(
        "What is the lowest price of a product?",
        vec![
            step("sql", bare),
            answer("The lowest price is 18.25 euros."),
        ],
        pick,
    );
    assert!(checked.is_empty(), "{checked:?}");
    assert_eq!(r.rounds, 2);
}

/// Regression (issue 19): "Who is the oldest library member?" was answered from a sample row,
/// sent back, queried right (George Ellis, "the oldest first"), and then answered with the
/// first, rejected answer word for word. An answer giving again values the evidence check
/// sent back, still in no result, goes back once more with the last result quoted, and the
/// next round may not write those values again.
#[test]
fn an_answer_given_again_after_it_was_sent_back_is_sent_back_with_the_last_result() {
    let pick = |k: &EventKind| match k {
        EventKind::AgainCheck { values, .. } => Some(values.clone()),
        _ => None,
    };
    // The context shows three of the four orders; the last one placed is not among them.
    let guess = "Order 3 was placed last, on 2025-03-20.";
    let (r, checked, _, text, forbidden) = run_on_orders(
        "Which order was placed last?",
        vec![
            answer(guess),
            step(
                "sql",
                json!({"query": "SELECT id, placed FROM orders ORDER BY placed DESC LIMIT 1"}),
            ),
            answer(guess),
            answer("Order 4 was placed last, on 2025-04-01."),
        ],
        pick,
    );
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("Order 4 was placed last, on 2025-04-01.", 4)
    );
    assert_eq!(checked, [["2025-03-20"]]);
    assert!(text.contains("gives again 2025-03-20"), "{text}");
    assert!(
        text.contains("The last tool result was:\nid | placed\n4 | 2025-04-01"),
        "{text}"
    );
    // The round after may not write the value again; the others are not held to it.
    let none: [&str; 0] = [];
    assert_eq!(forbidden[3], ["2025-03-20"]);
    assert_eq!(forbidden[..3], [none, none, none]);
    let query = json!({"query": "SELECT freight FROM orders WHERE id = 3"});
    // A plain number is not kept out as text ("449.5" came back as "449. 5"): once sent
    // back, the answer after it is decoded under the evidence's numbers, where 64 cannot be
    // written and the queried 99.71 can.
    let (r, checked, _, _, forbidden) = run_on_orders(
        "What was the freight of order 3?",
        vec![
            answer("The freight of order 3 was 64 euros."),
            step("sql", query),
            answer("The freight of order 3 was 99.71 euros."),
        ],
        pick,
    );
    assert_eq!(
        (r.answer.as_str(), r.rounds, checked.len()),
        ("The freight of order 3 was 99.71 euros.", 3, 0)
    );
    assert!(forbidden.iter().all(Vec::is_empty), "{forbidden:?}");
}

/// Regression (issue 19): "The total consultation fees for visits in March 2025 were 381
/// euros", right after a query, was sent back as giving again 48 and 62: sampled fees that
/// only the first answer's calculation had used. Only values the answer itself writes count.
#[test]
fn a_new_answer_is_not_sent_back_for_values_of_an_earlier_calculation() {
    let pick = |k: &EventKind| match k {
        EventKind::EvidenceCheck { unsupported, .. } => Some(("evidence", unsupported.clone())),
        EventKind::AgainCheck { values, .. } => Some(("again", values.clone())),
        _ => None,
    };
    let (r, checked, _, _, _) = run_on_orders(
        "What was the total freight of the orders placed in March 2025?",
        vec![
            calc("52.45 + 50.44"),
            answer("The total freight was 102.89 euros."),
            step(
                "sql",
                json!({"query": "SELECT SUM(freight) FROM orders WHERE placed LIKE '2025-03%'"}),
            ),
            answer("The total freight was 202.6 euros."),
        ],
        pick,
    );
    assert_eq!(
        (r.answer.as_str(), r.rounds),
        ("The total freight was 202.6 euros.", 4)
    );
    assert_eq!(
        checked,
        [("evidence", vec!["52.45".to_string(), "50.44".into()])]
    );
}

/// Regression (issue 19): after a reasoning that ended in `\boxed{273}`, the final answer
/// "Layla earned \boxed{273}\) dollars babysitting." was decoded with the JSON escape `\b`
/// (a backspace) and reached the user as such. The answer the user gets is plain text.
#[test]
fn an_answer_with_latex_from_a_reasoning_reaches_the_user_as_plain_text() {
    let (mut a, _) = agent(
        vec![
            calc("21 * 13"),
            step(
                "final_answer",
                json!({"answer": "Layla earned \u{8}oxed{273}\\) dollars babysitting."}),
            ),
        ],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task(
        "Layla babysat for 21 hours at 13 dollars an hour. How much did she earn?",
        None,
    );
    assert_eq!(r.stop_reason, StopReason::FinalAnswer);
    assert_eq!(r.answer, "Layla earned 273 dollars babysitting.");
}

/// Regression (issue 19): "I lost my copy of The River Oracle. How much do I have to pay?" was
/// answered "The book is in the Blue Hall, but I don't know how many seats it has": the worked
/// example's hall. An answer holding words of the example's own data that the task and its
/// results do not is sent back once, with the task restated.
#[test]
fn an_answer_copied_from_the_worked_example_is_sent_back_once() {
    let task = "Tom has 12 apples and gives 5 of them away. How many apples are left?";
    let (mut a, events) = agent(
        vec![
            answer("The bakery sells 7 rolls."),
            calc("12 - 5"),
            answer("Tom has 7 apples left."),
        ],
        registry(vec![]),
        AgentOptions::default(),
    );
    let r = a.run_task(task, None);
    assert_eq!((r.answer.as_str(), r.rounds), ("Tom has 7 apples left.", 3));
    let checks: Vec<Vec<String>> = events
        .kinds()
        .iter()
        .filter_map(|k| match k {
            EventKind::ExampleCheck { words, .. } => Some(words.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(checks, [vec!["bakery".to_string(), "rolls".to_string()]]);
    // No call is forced after it: the words may be all that was wrong (a right "3 Helmet Pro
    // rolls" was made 43 by the reasoning a forced call chose).
    assert!(a
        .policy()
        .schemas
        .iter()
        .all(|s| allowed(s).iter().any(|n| n == "final_answer")));
    let text = last_prompt_text(a.policy());
    assert!(
        text.contains("[check: \"bakery\", \"rolls\" in your answer come from the worked example")
            && text.contains(&format!("Answer this task: {task}")),
        "{text}"
    );
    // Without the example's words the answer stands at once.
    let (mut a, events) = agent(
        vec![calc("12 - 5"), answer("Tom has 7 apples left.")],
        registry(vec![]),
        AgentOptions::default(),
    );
    assert_eq!(a.run_task(task, None).rounds, 2);
    assert!(!events
        .kinds()
        .iter()
        .any(|k| matches!(k, EventKind::ExampleCheck { .. })));
}

/// Issue 19, item 8: an earlier turn of the session that no longer fits the history budget
/// is summarised once (in a context of its own, under the summary schema), the summary is
/// kept in the memory file and shown in the prompt in its place; without summaries it is
/// left out, as before.
#[test]
fn an_earlier_turn_that_no_longer_fits_is_summarised_once_and_shown_in_short() {
    let long = |what: &str| format!("{what} {}", "and more words about it ".repeat(8));
    let run = |summaries: bool| {
        let policy = ScriptedPolicy::new(
            vec![
                answer(&long("The Zephyr Cap is the blue one, code ZC-7")),
                answer(&long("The Floor Pump is in the shed")),
                answer("The blue one."),
            ],
            8192,
        )
        .with_asides(vec![json!({
            "found": "Zephyr Cap: blue, code ZC-7",
            "answer": "the blue one"
        })]);
        let mut a = Agent::new(
            policy,
            registry(vec![]),
            Some(MemoryStore::open_in_memory().unwrap()),
            AgentOptions {
                history_tokens: 110,
                summaries,
                // "ZC-7" is in no tool result: not what this test is about.
                evidence_check: false,
                ..AgentOptions::default()
            },
        )
        .unwrap();
        let events = Events::default();
        a.add_sink(Box::new(events.clone()));
        a.run_task("Which Zephyr Cap do we sell?", Some("s"));
        a.run_task("Where is the Floor Pump?", Some("s"));
        let r = a.run_task("Which helmet did I ask about first?", Some("s"));
        assert_eq!(r.stop_reason, StopReason::FinalAnswer);
        (a, events)
    };

    let (a, events) = run(true);
    let p = last_prompt_text(a.policy());
    assert!(
        p.contains("In short: Asked: Which Zephyr Cap do we sell? | Found: Zephyr Cap: blue, code ZC-7 | Answer: the blue one"),
        "{p}"
    );
    assert!(
        p.contains("The Floor Pump is in the shed"),
        "the newer turn in full: {p}"
    );
    assert!(!p.contains("The Zephyr Cap is the blue one"), "{p}");
    // The summary was asked for once, from the old turn's task and answer.
    let asked = &a.policy().aside_prompts;
    assert_eq!(asked.len(), 1);
    let text: String = asked[0].iter().map(|m| m.content.as_str()).collect();
    assert!(
        text.contains("Task: Which Zephyr Cap do we sell?"),
        "{text}"
    );
    assert!(text.contains("The Zephyr Cap is the blue one"), "{text}");
    let kinds = events.kinds();
    let summaries: Vec<&EventKind> = kinds
        .iter()
        .filter(|k| matches!(k, EventKind::Summary { .. }))
        .collect();
    assert_eq!(summaries.len(), 1, "{kinds:?}");
    let store = a.memory().unwrap();
    let sid = store.session("s").unwrap();
    let first = store.turns(sid).unwrap()[0].id;
    assert_eq!(
        store.summary(first).unwrap().unwrap().found,
        "Zephyr Cap: blue, code ZC-7"
    );

    let (a, _) = run(false);
    let p = last_prompt_text(a.policy());
    assert!(!p.contains("Zephyr Cap"), "left out without summaries: {p}");
    assert!(a.policy().aside_prompts.is_empty());
}

/// Self-consistency in the `reason` action: sampled reasonings beside the greedy one, no more
/// once the greedy answer can no longer be outvoted; the greedy reasoning is shown unless
/// more than half reached another answer, with the count. With one vote only the greedy
/// reasoning runs.
#[test]
fn reasonings_that_disagree_are_put_to_a_vote_and_the_majority_answer_is_shown() {
    let task = "A crate holds 3 boxes of 4 jars. How many jars are in the crate?";
    let run = |reasonings: &[&str], votes: usize, last: &str| {
        let policy = ScriptedPolicy::new(vec![step("reason", json!({})), answer(last)], 4096)
            .with_reasonings(reasonings.iter().map(|s| s.to_string()).collect());
        let mut a = Agent::new(
            policy,
            registry(vec![]),
            None,
            AgentOptions {
                reason: Some(true),
                reason_votes: votes,
                ..AgentOptions::default()
            },
        )
        .unwrap();
        let events = Events::default();
        a.add_sink(Box::new(events.clone()));
        let r = a.run_task(task, None);
        assert_eq!(r.stop_reason, StopReason::FinalAnswer);
        let votes: Vec<(usize, Option<String>)> = events
            .kinds()
            .into_iter()
            .filter_map(|k| match k {
                EventKind::Reason { vote, answer, .. } => Some((vote, answer)),
                _ => None,
            })
            .collect();
        (a, votes)
    };

    // Two that agree (12 and 12.0): the greedy one stands, no more are sampled.
    let (a, votes) = run(
        &[
            "Greedy: 3 * 4 = 12.\nAnswer: 12",
            "Sampled: 12 jars.\nAnswer: 12.0",
        ],
        4,
        "12 jars.",
    );
    assert_eq!(a.policy().reason_samples, vec![None, Some(1)]);
    assert_eq!(votes, vec![(0, Some("12".into())), (1, Some("12".into()))]);
    let p = last_prompt_text(a.policy());
    assert!(p.contains("Greedy: 3 * 4 = 12."), "{p}");
    assert!(
        p.contains("[2 of 2 independent reasonings reached this answer]"),
        "{p}"
    );

    // The greedy one is outvoted: three of four reasonings reach 12.
    let (a, votes) = run(
        &[
            "Greedy: 3 + 4 = 7.\nAnswer: 7",
            "Sampled: 3 * 4 = 12.\nAnswer: 12",
            "Again: 12 jars.\nAnswer: 12 jars",
            "Once more: Answer: 12",
        ],
        4,
        "12 jars.",
    );
    assert_eq!(
        a.policy().reason_samples,
        vec![None, Some(1), Some(2), Some(3)]
    );
    assert_eq!(votes.len(), 4);
    let p = last_prompt_text(a.policy());
    assert!(p.contains("Sampled: 3 * 4 = 12."), "{p}");
    assert!(!p.contains("Greedy: 3 + 4 = 7."), "{p}");
    assert!(
        p.contains("[3 of 4 independent reasonings reached this answer]"),
        "{p}"
    );

    // Two samples that disagree with each other cannot outvote it: the vote stops at three
    // and the greedy reasoning stands.
    let (a, _) = run(
        &[
            "Greedy: 3 * 4 = 12.\nAnswer: 12",
            "Sampled: Answer: 7",
            "Other: Answer: 9",
            "never asked for",
        ],
        4,
        "12 jars.",
    );
    assert_eq!(a.policy().reason_samples, vec![None, Some(1), Some(2)]);
    let p = last_prompt_text(a.policy());
    assert!(p.contains("Greedy: 3 * 4 = 12."), "{p}");
    assert!(
        p.contains("[1 of 3 independent reasonings reached this answer]"),
        "{p}"
    );

    // One vote: the greedy reasoning alone, shown as it is.
    let (a, votes) = run(&["Greedy: 3 * 4 = 12.\nAnswer: 12"], 1, "12 jars.");
    assert_eq!(a.policy().reason_samples, vec![None]);
    assert_eq!(votes.len(), 1);
    assert!(!last_prompt_text(a.policy()).contains("independent reasonings"));
}
