//! The search index on any query text: `query_words` yields quoted-safe words, and a search
//! of a small real index is `Ok` for every query with a word (an FTS5 syntax error would mean
//! a word reached `MATCH` unquoted) and `EmptyQuery` for one without.

#![no_main]

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use cairn::index::{query_words, Index, IndexError};
use libfuzzer_sys::fuzz_target;

/// Some words, operators and non-ASCII text to match against, chunked over several lines.
const DOCS: &[(&str, &str)] = &[
    (
        "deploy.md",
        "# Deploying\n\nRun `cargo build --release`, then copy target/release/cairn.\n\
         The deploy NEAR the gateway uses port 8080 AND OR NOT.\n",
    ),
    (
        "notes.txt",
        "Grüße aus Köln: naïve café, ΑΒΓ αβγ, 東京 🙂\nsnake_case and CamelCase words; \"quoted\" text*\n",
    ),
];

fn index() -> &'static Mutex<Index> {
    static INDEX: OnceLock<Mutex<Index>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("cairn-fuzz-fts-{}", std::process::id()));
        let docs = dir.join("docs");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&docs).expect("create the fuzz index folder");
        for (name, text) in DOCS {
            std::fs::write(docs.join(name), text).expect("write a fuzz document");
        }
        let mut index = Index::open_or_create(&dir.join("index.db")).expect("create the index");
        let report = index
            .update(&[PathBuf::from(&docs)])
            .expect("index the documents");
        assert_eq!(report.added, DOCS.len());
        Mutex::new(index)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else {
        return;
    };
    let words = query_words(query);
    assert!(words.len() <= 32);
    for w in &words {
        assert!(!w.is_empty() && !w.contains('"'), "unsafe word {w:?}");
    }
    let index = index().lock().expect("index lock");
    match index.search(query, 5) {
        Ok(hits) => assert!(!words.is_empty() && hits.len() <= 5),
        Err(IndexError::EmptyQuery(_)) => assert!(words.is_empty()),
        Err(e) => panic!("search for {query:?} failed: {e}"),
    }
});
