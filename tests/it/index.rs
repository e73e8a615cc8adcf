//! The document index and search: chunks with line numbers, incremental updates, binary files
//! skipped, any query (FTS5 syntax included) safe, `cairn index` and `cairn search` on the
//! command line.

use std::path::Path;
use std::sync::Arc;

use cairn::index::{chunk_lines, Index, IndexError};
use cairn::tools::search::SearchTool;
use cairn::tools::{ErrorClass, RegistryOptions, ToolRegistry};
use predicates::prelude::*;
use serde_json::json;

use crate::common::cairn;

fn docs(dir: &Path) {
    std::fs::create_dir_all(dir.join("notes/deep")).unwrap();
    std::fs::write(
        dir.join("notes/deploy.md"),
        "# Deploying\n\nSome intro.\n\nThe deploy script copies the build to the staging server.\nThen it restarts nginx.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("notes/deep/recipes.txt"),
        "Pancakes\nflour, eggs, milk\n\nOmelette\neggs, butter, salt\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n\nfn frobnicate_widget() {}\n",
    )
    .unwrap();
    let mut bin = vec![0u8, 1, 2, 3, 255, 0];
    bin.extend_from_slice(b"deploy deploy deploy");
    std::fs::write(dir.join("image.png"), &bin).unwrap();
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    std::fs::write(dir.join(".git/config"), "deploy hidden").unwrap();
}

#[test]
fn index_and_search_report_path_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("docs");
    docs(&root);
    let idx_path = dir.path().join("idx.sqlite");
    let mut idx = Index::open_or_create(&idx_path).unwrap();
    let r = idx.update(std::slice::from_ref(&root)).unwrap();
    assert_eq!((r.added, r.skipped, r.files), (3, 1, 3), "{r:?}");
    let hits = idx.search("deploy script", 5).unwrap();
    assert!(!hits.is_empty());
    assert!(hits[0].path.ends_with("notes/deploy.md"), "{hits:?}");
    assert_eq!(hits[0].line, 5, "{hits:?}");
    assert!(hits[0].snippet.starts_with("The deploy script"), "{hits:?}");
    assert!(hits[0]
        .render()
        .contains("deploy.md:5\n  The deploy script"));
    // Stemming: "deploying" finds "deploy".
    assert!(!idx.search("deploying", 5).unwrap().is_empty());
    let hits = idx.search("frobnicate_widget", 5).unwrap();
    assert!(
        hits[0].path.ends_with("main.rs") && hits[0].line == 5,
        "{hits:?}"
    );
    // Regression: a passage sharing only a common word ("of", "the") is no match; a query of
    // common words only still searches by them.
    assert!(idx.search("opposite of the hot", 5).unwrap().is_empty());
    assert!(!idx.search("then it", 5).unwrap().is_empty());
    // Nothing from the binary or hidden files.
    for h in idx.search("deploy hidden", 10).unwrap() {
        assert!(
            !h.path.contains("image.png") && !h.path.contains(".git"),
            "{h:?}"
        );
    }
}

/// A passage is shown from the lines that hold the rare words of the query: the line "The
/// clinic is closed on Sundays" holds two query words found in every file, the emergency line
/// two found in one; the snippet used to start at the first line with the most query words,
/// counted alike. A plural in the query finds the singular in the line.
#[test]
fn a_snippet_shows_the_lines_with_the_rare_words_of_the_query() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("docs");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("hours.md"),
        "# Opening hours\n\nThe clinic is open Monday to Friday.\nThe clinic is closed on Sundays.\n\
         Book appointments by phone on 030-555-0100.\nWalk-in hours are on Monday.\n\
         Parking is free for clients.\nOutside opening hours, call the emergency line 030-555-0199.\n",
    )
    .unwrap();
    for (name, text) in [
        ("fees.md", "The clinic charges 45 euros for a consultation.\nThe clinic takes cards.\n"),
        ("surgery.md", "Surgery at the clinic starts at 08:00.\nThe clinic is closed for surgery on Saturdays.\n"),
    ] {
        std::fs::write(root.join(name), text).unwrap();
    }
    let idx_path = dir.path().join("idx.sqlite");
    let mut idx = Index::open_or_create(&idx_path).unwrap();
    idx.update(std::slice::from_ref(&root)).unwrap();
    let hits = idx
        .search("number call emergency clinic closed", 3)
        .unwrap();
    let hours = hits.iter().find(|h| h.path.ends_with("hours.md")).unwrap();
    assert!(hours.snippet.contains("030-555-0199"), "{hits:?}");
    // The window is the emergency line's; the line of the common words the window lacks
    // comes before it as a line of its own, and the first line with as many words does not.
    assert_eq!(
        hours.snippet,
        "The clinic is closed on Sundays.\n…\nOutside opening hours, call the emergency line 030-555-0199.",
        "{hits:?}"
    );
    let hits = idx.search("emergencies", 3).unwrap();
    assert!(
        hits[0].snippet.starts_with("Outside opening hours"),
        "{hits:?}"
    );
}

/// Regression (issue 19): a search for "breakfast" showed the three lines naming breakfast
/// and cut off the next, "It is served from 07:00 to 10:30, on Sundays until 11:30.", and the
/// model answered that breakfast is not served on Sundays. A line that opens with a pronoun
/// goes on about the line before it, and is shown with it (two such lines at most); a line
/// after a blank one, or one that opens otherwise, is not.
#[test]
fn a_snippet_keeps_the_lines_that_go_on_about_its_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("docs");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("meals.md"),
        "# Breakfast and the restaurant\nBreakfast is not included in the room rate.\n\
         Breakfast costs 18 euros per adult.\nIt is served from 07:00 to 10:30, on Sundays until 11:30.\n\
         They also serve tea.\nIts menu changes weekly.\nDinner is from 18:00.\n",
    )
    .unwrap();
    std::fs::write(
        root.join("rooms.md"),
        "Rooms have a kettle.\nCheck-out is at 11:00.\nLate check-out costs 20 euros.\n\nIt is free for members.\n",
    )
    .unwrap();
    let mut idx = Index::open_or_create(&dir.path().join("idx.sqlite")).unwrap();
    idx.update(std::slice::from_ref(&root)).unwrap();
    let hits = idx.search("breakfast", 5).unwrap();
    let meals = hits.iter().find(|h| h.path.ends_with("meals.md")).unwrap();
    assert_eq!(
        meals.snippet,
        "# Breakfast and the restaurant\nBreakfast is not included in the room rate.\n\
         Breakfast costs 18 euros per adult.\nIt is served from 07:00 to 10:30, on Sundays until 11:30.\n\
         They also serve tea.",
        "{hits:?}"
    );
    let hits = idx.search("kettle", 5).unwrap();
    assert_eq!(
        hits[0].snippet,
        "Rooms have a kettle.\nCheck-out is at 11:00.\nLate check-out costs 20 euros.",
        "{hits:?}"
    );
}

/// Regression (issue 19): "Which number should I call for an emergency when the clinic is
/// closed?" showed the clinic's opening-hours passage from "The clinic is closed on Sundays"
/// and its two lines after, and left out "Outside opening hours, call the emergency line
/// 030-555-0199."; the model gave the appointments number. A second window of the passage
/// shows the query's words the first lacks when they weigh at least half as much, after `…`
/// when lines are left out between.
#[test]
fn a_snippet_adds_a_window_for_the_query_words_the_first_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/clinic-docs");
    let mut idx = Index::open_or_create(&dir.path().join("idx.sqlite")).unwrap();
    idx.update(std::slice::from_ref(&docs)).unwrap();
    let hits = idx
        .search("number call emergency clinic closed", 2)
        .unwrap();
    let hours = hits
        .iter()
        .find(|h| h.path.ends_with("opening-hours.md"))
        .unwrap();
    assert!(
        hours.snippet.starts_with("The clinic is closed on Sundays")
            && hours
                .snippet
                .contains("call the emergency line 030-555-0199"),
        "{hits:?}"
    );
    assert_eq!(hours.line, 6, "{hits:?}");
    // A query whose words one window holds gets that window alone.
    let hits = idx.search("emergency line", 1).unwrap();
    assert_eq!(
        hits[0].snippet,
        "Outside opening hours, call the emergency line 030-555-0199.\n\
         An emergency surcharge of 45 euros is added to the consultation fee for visits outside opening hours.",
        "{hits:?}"
    );
}

/// Regression (issue 19): "Nora Lindqvist's Corolla comes in for an MOT test. What does she
/// pay, VAT included?" showed the MOT price and the two lines after it, not "VAT of 21% is
/// added to every invoice." a line further on, and the model answered with the price before
/// VAT; "What does the labour on job 12 cost, before VAT?" showed the VAT line and not the
/// labour rate. A line holding a query word the windows left out is added when the word
/// weighs at least a quarter of the first window's words; a word found nowhere adds nothing.
#[test]
fn a_snippet_adds_the_line_of_a_query_word_its_window_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/garage-docs");
    let mut idx = Index::open_or_create(&dir.path().join("idx.sqlite")).unwrap();
    idx.update(std::slice::from_ref(&docs)).unwrap();
    let prices = |query: &str| {
        let hits = idx.search(query, 3).unwrap();
        hits.into_iter()
            .find(|h| h.path.ends_with("prices.md"))
            .unwrap_or_else(|| panic!("no hit in prices.md for {query:?}"))
            .snippet
    };
    let s = prices("Nora Lindqvist Corolla comes MOT test what she pay VAT included");
    assert!(
        s.contains("An MOT test costs 55 euros") && s.contains("VAT of 21% is added"),
        "{s}"
    );
    let s = prices("what labour job cost before VAT");
    assert!(
        s.contains("Labour is charged at 68 euros per hour") && s.contains("VAT of 21%"),
        "{s}"
    );
    // One word, one window: nothing is added.
    let s = prices("diagnosis");
    assert_eq!(s.lines().count(), 3, "{s}");
}

/// Regression (issue 19): "How many days of annual leave is Anouk Smits entitled to in
/// 2025, not counting days carried over?" showed the carry-over rule and, as the line for
/// "annual leave", the heading "# Annual leave" (the first line holding the words) instead of
/// the rule "A full-time employee gets 25 days of annual leave per calendar year." A heading
/// is never the line added for a word the window left out.
#[test]
fn the_line_added_for_a_word_the_window_left_out_is_no_heading() {
    let dir = tempfile::tempdir().unwrap();
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/office-docs");
    let mut idx = Index::open_or_create(&dir.path().join("idx.sqlite")).unwrap();
    idx.update(std::slice::from_ref(&docs)).unwrap();
    let hits = idx
        .search(
            "How many days of annual leave is Anouk Smits entitled to in 2025, not counting days carried over?",
            3,
        )
        .unwrap();
    let s = &hits
        .iter()
        .find(|h| h.path.ends_with("annual-leave.md"))
        .expect("a hit in annual-leave.md")
        .snippet;
    assert!(
        s.contains("A full-time employee gets 25 days of annual leave")
            && s.contains("Up to 5 unused days can be carried over"),
        "{s}"
    );
    assert!(!s.contains("# Annual leave"), "{s}");
}

#[test]
fn updates_are_incremental() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("docs");
    docs(&root);
    let mut idx = Index::open_or_create(&dir.path().join("idx.sqlite")).unwrap();
    idx.update(std::slice::from_ref(&root)).unwrap();
    let r = idx.update(std::slice::from_ref(&root)).unwrap();
    assert_eq!(
        (r.added, r.changed, r.unchanged, r.removed),
        (0, 0, 3, 0),
        "{r:?}"
    );
    std::fs::write(
        root.join("main.rs"),
        "fn main() { zanzibar(); }\n// more bytes\n",
    )
    .unwrap();
    std::fs::remove_file(root.join("notes/deep/recipes.txt")).unwrap();
    std::fs::write(root.join("new.md"), "a new note about quokkas\n").unwrap();
    let r = idx.update(std::slice::from_ref(&root)).unwrap();
    assert_eq!(
        (r.added, r.changed, r.unchanged, r.removed),
        (1, 1, 1, 1),
        "{r:?}"
    );
    assert_eq!(r.files, 3);
    assert!(idx.search("omelette", 5).unwrap().is_empty());
    assert!(idx.search("frobnicate_widget", 5).unwrap().is_empty());
    assert_eq!(idx.search("zanzibar", 5).unwrap().len(), 1);
    assert_eq!(idx.search("quokkas", 5).unwrap().len(), 1);
}

#[test]
fn fts_syntax_in_queries_is_never_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("docs");
    docs(&root);
    let mut idx = Index::open_or_create(&dir.path().join("idx.sqlite")).unwrap();
    idx.update(&[root]).unwrap();
    for q in [
        "\"deploy",
        "deploy*",
        "NOT deploy",
        "deploy AND OR",
        "(eggs",
        "eggs:milk",
        "^eggs",
        "NEAR(eggs milk)",
        "col:eggs -milk +salt",
        "'; DROP TABLE files; --",
        "{eggs}",
        "eggs\u{0}milk",
    ] {
        let r = idx.search(q, 5);
        assert!(r.is_ok(), "{q}: {r:?}");
    }
    assert!(matches!(
        idx.search("\"*():^", 5),
        Err(IndexError::EmptyQuery(_))
    ));
}

#[test]
fn an_empty_index_and_a_missing_folder() {
    let dir = tempfile::tempdir().unwrap();
    let idx_path = dir.path().join("idx.sqlite");
    let mut idx = Index::open_or_create(&idx_path).unwrap();
    assert!(idx.search("anything", 5).unwrap().is_empty());
    let e = idx.update(&[dir.path().join("nope")]).unwrap_err();
    assert!(matches!(e, IndexError::MissingDir(_)));
    assert!(e.to_string().contains("nope"), "{e}");
    // The search tool over an empty index says so instead of failing.
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(SearchTool::new(&idx_path))).unwrap();
    let obs = reg
        .call_value("search", &json!({"query": "anything"}))
        .unwrap();
    assert!(obs.text.contains("holds no documents"), "{}", obs.text);
    let e = reg
        .call_value("search", &json!({"query": "\"*"}))
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    let e = reg
        .call_value("search", &json!({"query": "x", "top_k": 0}))
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    // A search tool whose index is gone is fatal.
    let gone = SearchTool::new(&dir.path().join("gone.sqlite"));
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(gone)).unwrap();
    let e = reg
        .call_value("search", &json!({"query": "x"}))
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Fatal);
}

#[test]
fn chunks_cover_every_line_once() {
    let text: String = (1..=300).map(|i| format!("line {i}\n")).collect();
    let chunks = chunk_lines(&text);
    assert!(chunks.len() > 1);
    let mut next = 1;
    for c in &chunks {
        assert_eq!(c.start_line, next);
        assert!(c.end_line >= c.start_line);
        next = c.end_line + 1;
    }
    assert_eq!(next, 301);
}

#[test]
fn cairn_index_and_search_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("docs");
    docs(&root);
    let idx = dir.path().join("idx.sqlite");
    cairn(dir.path())
        .args(["index", "--index"])
        .arg(&idx)
        .arg(&root)
        .assert()
        .success()
        .stdout(predicate::str::contains("3 files").and(predicate::str::contains("1 skipped")));
    cairn(dir.path())
        .args(["search", "--index"])
        .arg(&idx)
        .args(["deploy", "\"script"])
        .assert()
        .success()
        .stdout(predicate::str::contains("deploy.md:5\n  The deploy script"));
    cairn(dir.path())
        .args(["search", "--index"])
        .arg(&idx)
        .arg("xylophone")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no results"));
    // The search tool is there once the index exists.
    cairn(dir.path())
        .args([
            "tools",
            "call",
            "search",
            r#"{"query": "eggs", "top_k": 1}"#,
            "--index",
        ])
        .arg(&idx)
        .assert()
        .success()
        .stdout(predicate::str::contains("recipes.txt:"));
    cairn(dir.path())
        .args(["index", "--index"])
        .arg(&idx)
        .arg(dir.path().join("missing"))
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("missing").and(predicate::str::contains("does not exist")),
        );
    cairn(dir.path())
        .args(["search", "--index"])
        .arg(dir.path().join("none.sqlite"))
        .arg("x")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cairn index"));
}

#[test]
fn the_default_index_lives_in_cairn_home() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("docs");
    docs(&root);
    cairn(dir.path()).arg("index").arg(&root).assert().success();
    assert!(dir.path().join("index.sqlite").is_file());
    cairn(dir.path())
        .args(["search", "omelette"])
        .assert()
        .success();
}

// Regression (issue 16): a document's escape sequence (`ESC [31m`) reached the terminal raw.
#[test]
fn search_output_shows_control_characters_instead_of_sending_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("docs");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.md"), "the \x1b[31mred\x07 alert\n").unwrap();
    let idx = dir.path().join("idx.sqlite");
    cairn(dir.path())
        .args(["index", "--index"])
        .arg(&idx)
        .arg(&root)
        .assert()
        .success();
    let out = cairn(dir.path())
        .args(["search", "--index"])
        .arg(&idx)
        .arg("alert")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("\\x1b[31mred\\x07 alert"), "{text}");
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
}

/// Issue 19: before a task's first round the search tool offers the best passages for the
/// task's own words (without the words too common to rank by), headed by file:line; a task
/// whose words are all common, or that nothing matches, gets none.
#[test]
fn search_context_shows_the_passages_that_match_the_task() {
    use cairn::tools::Tool;
    let dir = tempfile::tempdir().unwrap();
    docs(dir.path());
    let idx_path = dir.path().join("idx.sqlite");
    let mut idx = Index::open_or_create(&idx_path).unwrap();
    idx.update(&[dir.path().to_path_buf()]).unwrap();
    drop(idx);
    let tool = SearchTool::new(&idx_path);
    let ctx = tool
        .context_for(
            "Which server does the deploy script copy the build to?",
            None,
        )
        .expect("passages for a task about the documents");
    assert!(ctx.contains("deploy.md:5"), "{ctx}");
    assert!(ctx.contains("staging server"), "{ctx}");
    assert!(
        ctx.len() <= cairn::tools::search::CONTEXT_MAX_CHARS + 200,
        "{ctx}"
    );
    assert_eq!(tool.context_for("What is it and how is it?", None), None);
    assert_eq!(tool.context_for("zebra quantum", None), None);
}

/// Regression (issue 19): "Hugo Lambert email" found the library's own address by "email", and
/// the model gave it as Hugo Lambert's (his row, with his email, was in the database). The
/// search says which names of the query no passage shown holds.
#[test]
fn a_search_says_which_names_of_the_query_no_passage_holds() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("docs");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("membership.md"),
        "# Membership\n\nQuestions about membership: membership@townlibrary.example.\n\n\
         Hugo Lambert runs the book club.\n",
    )
    .unwrap();
    let idx_path = dir.path().join("idx.sqlite");
    Index::open_or_create(&idx_path)
        .unwrap()
        .update(std::slice::from_ref(&root))
        .unwrap();
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(SearchTool::new(&idx_path))).unwrap();
    let obs = reg
        .call_value("search", &json!({"query": "Emma Novak membership email"}))
        .unwrap();
    assert!(
        obs.text.contains("membership@townlibrary.example"),
        "{}",
        obs.text
    );
    assert!(
        obs.text.ends_with(
            "(no passage shown holds \"Emma Novak\": these match the query's other words)"
        ),
        "{}",
        obs.text
    );
    // A name a passage holds: no note.
    let obs = reg
        .call_value("search", &json!({"query": "Hugo Lambert book club"}))
        .unwrap();
    assert!(obs.text.contains("Hugo Lambert runs"), "{}", obs.text);
    assert!(!obs.text.contains("no passage shown holds"), "{}", obs.text);
    // One file written again, the index brought up to date, and a search.
    let search_after = |text: &str, query: &str| {
        std::fs::write(root.join("prices.md"), text).unwrap();
        Index::open_or_create(&idx_path)
            .unwrap()
            .update(std::slice::from_ref(&root))
            .unwrap();
        reg.call_value("search", &json!({ "query": query }))
            .unwrap()
    };
    let note = |name: &str| {
        format!("(no passage shown holds \"{name}\": these match the query's other words)")
    };
    // Regression (the garage suite): "Corolla Corolla MOT test" was told no passage held
    // "Corolla Corolla MOT" while one held the MOT test's price, and the model answered that
    // the search found nothing. Only the words no passage holds are named.
    let obs = search_after(
        "# Prices\n\nAn MOT test costs 55 euros, labour included.\n",
        "Corolla Corolla MOT test",
    );
    assert!(obs.text.contains("55 euros"), "{}", obs.text);
    assert!(obs.text.ends_with(&note("Corolla")), "{}", obs.text);
    // A name is held only as a whole word: "MOT" is not in "motor". Before, a passage on the
    // motor was taken to hold the MOT, and no note was given.
    let obs = search_after(
        "# Cars\n\nThe motor of every car is checked yearly.\n",
        "car MOT check",
    );
    assert!(obs.text.contains("The motor of every car"), "{}", obs.text);
    assert!(obs.text.ends_with(&note("MOT")), "{}", obs.text);
}

/// Regression (issue 19, the garage suite): asked what a courtesy car costs for a job of 5
/// hours of labour, the model was shown the passage from "For shorter jobs a courtesy car
/// costs 30 euros per day." on, without the line before it, "A courtesy car is free for any
/// job with more than 4 hours of labour.", and answered 90 euros. A first line that is the
/// other half of a rule ("For shorter …", "Otherwise …") comes with the line before it in its
/// paragraph; a heading or a blank line before it is not added.
#[test]
fn a_snippet_that_opens_with_the_second_half_of_a_rule_shows_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("docs");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("cars.md"),
        "# Courtesy cars\n\nA courtesy car is free for any job with more than 4 hours of labour.\n\
         For shorter jobs a courtesy car costs 30 euros per day.\n\
         Drivers must be at least 23 years old.\nReturn the car with a full tank.\n",
    )
    .unwrap();
    std::fs::write(
        root.join("pets.md"),
        "# Pets\n\nOtherwise pets stay at home.\nKennels cost 12 euros a night.\n",
    )
    .unwrap();
    let mut idx = Index::open_or_create(&dir.path().join("idx.sqlite")).unwrap();
    idx.update(std::slice::from_ref(&root)).unwrap();
    let hits = idx
        .search("shorter jobs courtesy car costs per day", 5)
        .unwrap();
    let cars = hits.iter().find(|h| h.path.ends_with("cars.md")).unwrap();
    assert!(
        cars.snippet
            .starts_with("A courtesy car is free for any job with more than 4 hours of labour.\nFor shorter jobs"),
        "{hits:?}"
    );
    assert_eq!(cars.line, 3, "{hits:?}");
    // The line before is a blank one under a heading: nothing is added.
    let hits = idx.search("otherwise pets", 5).unwrap();
    let pets = hits.iter().find(|h| h.path.ends_with("pets.md")).unwrap();
    assert!(
        pets.snippet.starts_with("Otherwise pets stay at home."),
        "{hits:?}"
    );
}
