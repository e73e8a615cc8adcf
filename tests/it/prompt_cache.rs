//! The prompt cache (`decode::prompt_cache`): the state after the agent's system prompt kept in
//! HOME/prompts/, read by the next run instead of computed again; a damaged file is reported
//! and replaced, never used; `--no-prompt-cache` keeps nothing.

use serde_json::Value;

use cairn::model::session::Session;

use crate::common::{cairn, preset_model, preset_path};

/// The trace's events of `kind`.
fn events(trace: &std::path::Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == kind)
        .collect()
}

/// The `.kv` files in `dir`.
fn kv_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "kv"))
        .collect()
}

/// One `cairn run` of a fixed task on the tiny preset in `home`; (stdout, stderr, trace path).
fn run(home: &std::path::Path, n: usize, extra: &[&str]) -> (String, String, std::path::PathBuf) {
    let trace = home.join(format!("trace-{n}.jsonl"));
    let o = cairn(home)
        .args(["run", "--max-rounds", "2", "--model"])
        .arg(preset_path("smollm2-135m"))
        .arg("--trace")
        .arg(&trace)
        .args(extra)
        .arg("What is 6 * 7?")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{stderr}");
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        stderr,
        trace,
    )
}

#[test]
fn the_second_run_reads_the_system_prompt_state_the_first_wrote_and_answers_the_same() {
    let home = tempfile::tempdir().unwrap();
    let prompts = home.path().join("prompts");
    let (first, _, t1) = run(home.path(), 1, &[]);
    // Two parts: the system message whole, then the worked example's own positions.
    let written = events(&t1, "prompt_cache");
    assert_eq!(written.len(), 2, "{written:?}");
    assert!(
        written.iter().all(|w| w["action"] == "written"),
        "{written:?}"
    );
    let tokens: Vec<u64> = written
        .iter()
        .map(|w| w["tokens"].as_u64().unwrap())
        .collect();
    assert!(tokens[0] >= 64 && tokens[1] >= 32, "{written:?}");
    let mut files = kv_files(&prompts);
    files.sort();
    let mut named: Vec<String> = written
        .iter()
        .map(|w| w["file"].as_str().unwrap().to_string())
        .collect();
    named.sort();
    assert_eq!(
        named,
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
    );

    let (second, _, t2) = run(home.path(), 2, &[]);
    let read = events(&t2, "prompt_cache");
    assert_eq!(read.len(), 2, "{read:?}");
    assert!(read.iter().all(|r| r["action"] == "read"), "{read:?}");
    let read_tokens: Vec<u64> = read.iter().map(|r| r["tokens"].as_u64().unwrap()).collect();
    assert_eq!(read_tokens, tokens);
    // The first step's prompt starts from the state read.
    let step = &events(&t2, "step")[0];
    assert!(
        step["reused_tokens"].as_u64().unwrap() >= tokens[0] + tokens[1],
        "{step}"
    );
    assert_eq!(first, second, "the same answer from the state read");
    assert_eq!(kv_files(&prompts).len(), 2);

    // Off: nothing read or written.
    let (third, _, t3) = run(home.path(), 3, &["--no-prompt-cache"]);
    assert!(events(&t3, "prompt_cache").is_empty());
    assert_eq!(first, third);
}

#[test]
fn a_damaged_prompt_cache_file_is_reported_and_written_again_never_used() {
    let home = tempfile::tempdir().unwrap();
    let prompts = home.path().join("prompts");
    let (first, _, _) = run(home.path(), 1, &[]);
    // The larger file: the system message's state.
    let file = kv_files(&prompts)
        .into_iter()
        .max_by_key(|f| std::fs::metadata(f).unwrap().len())
        .expect("a file written");
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() - 1000;
    bytes[at] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();

    let (second, stderr, t2) = run(home.path(), 2, &[]);
    let warnings = events(&t2, "warning");
    assert!(
        warnings.iter().any(|w| w["message"]
            .as_str()
            .unwrap()
            .contains("do not match their checksum")),
        "{warnings:?}"
    );
    assert!(stderr.contains("is not usable"), "{stderr}");
    assert_eq!(first, second);
    // Written again whole: the next run reads it.
    let (_, _, t3) = run(home.path(), 3, &[]);
    assert!(events(&t3, "prompt_cache")
        .iter()
        .all(|e| e["action"] == "read"));

    // Cut short: the same.
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let (fourth, _, t4) = run(home.path(), 4, &[]);
    assert!(events(&t4, "warning")
        .iter()
        .any(|w| w["message"].as_str().unwrap().contains("cut short")));
    assert_eq!(first, fourth);
}

/// The tokens of `text` and the logits after all of them, computed at once in a new session.
fn whole_prompt(lm: &cairn::model::LoadedModel, text: &str) -> (Vec<u32>, Vec<f32>) {
    let ids = lm.tokenizer.encode(text).unwrap();
    let logits = lm.session().feed(&ids).unwrap().to_vec();
    (ids, logits)
}

/// The state of a new session after `ids`, written as the prompt cache writes it.
fn state_after(lm: &cairn::model::LoadedModel, ids: &[u32]) -> Vec<u8> {
    let mut s = lm.session();
    s.feed(ids).unwrap();
    let mut bytes = Vec::new();
    assert!(s.snapshot().unwrap().write_state(&mut bytes).unwrap());
    bytes
}

/// A new session holding the state `bytes` of `ids`, read back as the prompt cache reads it.
fn read_back(lm: &cairn::model::LoadedModel, ids: &[u32], bytes: &[u8]) -> Session {
    let mut s = lm.session();
    let snap = s.read_snapshot(ids.to_vec(), &mut &bytes[..]).unwrap();
    s.restore(&snap).unwrap();
    s
}

/// The bits of `logits`, to compare two runs to the last bit.
fn bits(logits: &[f32]) -> Vec<u32> {
    logits.iter().map(|x| x.to_bits()).collect()
}

/// What the cache relies on: the state after a prefix, computed on its own, saved and read
/// back into a fresh session, gives the same logits to the last bit after the rest of the
/// prompt as the whole prompt computed at once.
#[test]
fn a_prefix_state_read_back_gives_the_logits_of_the_whole_prompt_to_the_last_bit() {
    let lm = preset_model("smollm2-135m");
    let (ids, expected) = whole_prompt(
        lm,
        "The rules of the agent are these, and they are long enough to matter. Then the task: what is six times seven? Answer:",
    );
    let cut = ids.len() / 2;

    let bytes = state_after(lm, &ids[..cut]);
    let mut fresh = read_back(lm, &ids[..cut], &bytes);
    let got = fresh.feed(&ids).unwrap().to_vec();
    assert_eq!(fresh.last_feed().reused, cut);
    assert_eq!(bits(&got), bits(&expected), "logits differ");
    // Counts that are not this model's are refused.
    assert!(fresh
        .read_snapshot(ids[..cut + 1].to_vec(), &mut &bytes[..])
        .is_err());
    assert!(fresh
        .read_snapshot(ids[..cut].to_vec(), &mut &bytes[..bytes.len() / 2])
        .is_err());
}

/// The worked example's part: the positions after the system message's, saved alone and
/// written after that state in a fresh session, give the logits of the whole prompt to the
/// last bit; written after other tokens, they are refused.
#[test]
fn a_later_part_read_back_after_the_first_gives_the_logits_of_the_whole_prompt() {
    let lm = preset_model("smollm2-135m");
    let (ids, expected) = whole_prompt(
        lm,
        "System: the rules are these, and they are long. Example: a task, its steps and its answer, shown as an earlier task. Then the task: what is six times seven? Answer:",
    );
    let (a, b) = (ids.len() / 3, 2 * ids.len() / 3);

    let head = state_after(lm, &ids[..a]);
    // The part computed after the first, as the cache computes it.
    let mut first = lm.session();
    first.feed(&ids[..a]).unwrap();
    first.feed(&ids[..b]).unwrap();
    let delta = first.snapshot_from(a).unwrap();
    assert_eq!(delta.start(), a);
    let mut part = Vec::new();
    assert!(delta.write_state(&mut part).unwrap());

    let mut fresh = read_back(lm, &ids[..a], &head);
    let d = fresh
        .read_snapshot(ids[..b].to_vec(), &mut &part[..])
        .unwrap();
    // A part is not a whole state.
    assert!(lm.session().restore(&d).is_err());
    fresh.restore_delta(&d).unwrap();
    let got = fresh.feed(&ids).unwrap().to_vec();
    assert_eq!(fresh.last_feed().reused, b);
    assert_eq!(bits(&got), bits(&expected), "logits differ");
    // After other tokens than its own first part: refused, the session left as it was.
    let mut other = lm.session();
    other.feed(&ids[1..a + 1]).unwrap();
    assert!(other.restore_delta(&d).is_err());
    assert_eq!(other.tokens(), &ids[1..a + 1]);
}

/// A home where the prompt cache cannot be written (here `prompts` is a file): the run goes
/// on and answers as without the cache, with one warning that says so and how to turn the
/// cache off.
#[test]
fn a_prompt_cache_folder_that_cannot_be_written_is_one_warning_and_the_same_answer() {
    let home = tempfile::tempdir().unwrap();
    let (plain, _, _) = run(home.path(), 1, &["--no-prompt-cache"]);
    std::fs::write(home.path().join("prompts"), "not a folder").unwrap();
    let (answer, stderr, trace) = run(home.path(), 2, &[]);
    assert_eq!(plain, answer);
    // (The tiny model's own warnings, a long answer, are not the cache's.)
    let warnings: Vec<String> = events(&trace, "warning")
        .iter()
        .map(|w| w["message"].as_str().unwrap().to_string())
        .filter(|m| m.contains("prompt cache"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("cannot write the prompt cache file")
            && warnings[0].contains("--no-prompt-cache"),
        "{warnings:?}"
    );
    assert!(
        stderr.contains("cannot write the prompt cache file"),
        "{stderr}"
    );
    assert!(events(&trace, "prompt_cache").is_empty());
}
