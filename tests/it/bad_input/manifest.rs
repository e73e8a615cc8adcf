//! Bad inputs: tool manifests.

use super::*;

pub(super) fn cases() -> Vec<Case> {
    vec![
        case(
            "manifest missing",
            2,
            &["cannot read the tools manifest nosuch.toml"],
            |_| run(["--tools", "nosuch.toml", "tools", "list"]),
        ),
        case(
            "manifest not TOML",
            2,
            &["tools.toml is not valid", "line 3"],
            |d| manifest(d, "[[tool]]\nname = \"x\"\nargv = [\n"),
        ),
        case("manifest not UTF-8", 2, &["tools.toml", "UTF-8"], |d| {
            write(d, "tools.toml", b"\xff\xfe[[tool]]\n");
            run(["--tools", "tools.toml", "tools", "list"])
        }),
        case(
            "manifest tool without args",
            2,
            &["missing field `args`"],
            |d| {
                manifest(
                    d,
                    "[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\n",
                )
            },
        ),
        case("manifest empty argv", 2, &["`argv` is empty"], |d| {
            manifest(
                d,
                &format!("[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = []\n{ARGS}"),
            )
        }),
        case(
            "manifest bad tool name",
            2,
            &["tool `x y` in tools.toml", "the name `x y` is not valid"],
            |d| {
                manifest(d, &format!("[[tool]]\nname = \"x y\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\n{ARGS}"))
            },
        ),
        case(
            "manifest duplicate tool",
            2,
            &[
                "tool `x` in tools.toml",
                "`x` is declared twice",
                "its own name",
            ],
            |d| {
                let t = format!(
                    "[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\n{ARGS}"
                );
                manifest(d, &format!("{t}{t}"))
            },
        ),
        case(
            "manifest misspelt schema keyword",
            2,
            &["unsupported keyword `propertys`"],
            |d| {
                manifest(d, "[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\nargs = { type = \"object\", propertys = {} }\n")
            },
        ),
        case(
            "manifest unknown field",
            2,
            &["unknown field `timeout_s`"],
            |d| {
                manifest(d, &format!("[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\n{ARGS}timeout_s = 5\n"))
            },
        ),
        case("manifest zero timeout", 2, &["`timeout_secs` is 0"], |d| {
            manifest(d, &format!("[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\n{ARGS}timeout_secs = 0\n"))
        }),
        case(
            "manifest schema string not JSON",
            2,
            &["`args` is a string but not valid JSON"],
            |d| {
                manifest(d, "[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\nargs = '{not json'\n")
            },
        ),
        // Regression: a missing program was found only when the tool was called, so a batch
        // failed every task on it.
        case(
            "manifest program missing",
            2,
            &["names the program `/no/such/prog`, which does not exist"],
            |d| {
                manifest(d, &format!("[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/no/such/prog\"]\n{ARGS}"))
            },
        ),
        case(
            "manifest program not on PATH",
            2,
            &["`no-such-program-xyz`, which is not in any folder on PATH"],
            |d| {
                manifest(d, &format!("[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"no-such-program-xyz\"]\n{ARGS}"))
            },
        ),
        // Regression (issue 16): a tool named `final_answer` was accepted and could never run.
        case(
            "manifest tool named final_answer",
            2,
            &[
                "tool `final_answer` in tools.toml",
                "rename this tool in the manifest",
            ],
            |d| manifest(d, &named("final_answer")),
        ),
        // Regression (issue 16): a tool named `recall` silently replaced the built-in; it must
        // be refused even with no memory file (the built-in unavailable).
        case(
            "manifest tool named recall",
            2,
            &[
                "tool `recall` in tools.toml",
                "name of a built-in tool",
                "my_recall",
            ],
            |d| manifest(d, &named("recall")),
        ),
        case(
            "manifest tool named sql without --db",
            2,
            &["tool `sql` in tools.toml", "name of a built-in tool"],
            |d| manifest(d, &named("sql")),
        ),
        case(
            "manifest tool named search without an index",
            2,
            &["tool `search` in tools.toml", "name of a built-in tool"],
            |d| manifest(d, &named("search")),
        ),
        case(
            "manifest tool named calculator",
            2,
            &["tool `calculator` in tools.toml", "name of a built-in tool"],
            |d| manifest(d, &named("calculator")),
        ),
        // Regression (issue 16): `cairn run` checks the names before the model runs.
        case(
            "manifest tool named recall refused by run",
            2,
            &["tool `recall` in tools.toml", "name of a built-in tool"],
            |d| {
                write(d, "tools.toml", named("recall"));
                let m = tiny(d);
                run(["--tools", "tools.toml", "run", "--model", &m, "hello"])
            },
        ),
        case(
            "manifest zero memory limit",
            2,
            &[
                "tool `x` in tools.toml",
                "`max_memory_mb` is 0",
                "from 16 to 1048576",
            ],
            |d| manifest(d, &format!("{}max_memory_mb = 0\n", named("x"))),
        ),
        case(
            "manifest negative memory limit",
            2,
            &["`max_memory_mb` is -5", "whole number of megabytes"],
            |d| manifest(d, &format!("{}max_memory_mb = -5\n", named("x"))),
        ),
        case(
            "manifest memory limit too large",
            2,
            &["`max_memory_mb` is 99999999999"],
            |d| manifest(d, &format!("{}max_memory_mb = 99999999999\n", named("x"))),
        ),
        case(
            "manifest memory limit not whole",
            2,
            &[
                "tools.toml is not valid",
                "max_memory_mb = 1.5",
                "floating point",
            ],
            |d| manifest(d, &format!("{}max_memory_mb = 1.5\n", named("x"))),
        ),
        case(
            "manifest timeout too long",
            2,
            &["`timeout_secs` is 3601", "at most 3600"],
            |d| manifest(d, &format!("{}timeout_secs = 3601\n", named("x"))),
        ),
        case(
            "manifest timeout not a number",
            2,
            &["`timeout_secs` is NaN"],
            |d| manifest(d, &format!("{}timeout_secs = nan\n", named("x"))),
        ),
        // Regression (issue 16): a background child holding stdout made the call outlast its
        // timeout (40 s for `timeout_secs = 3`), and a timeout was `transient` (retried).
        case(
            "manifest tool whose child holds stdout past the timeout",
            1,
            &[
                "error (timeout)",
                "tool `bg` did not finish within 1.0 s",
                "killed",
            ],
            |d| {
                call(
                    d,
                    "bg",
                    "argv = [\"sh\", \"-c\", \"sleep 30 & echo started\"]\ntimeout_secs = 1\n",
                )
            },
        ),
        // Regression (issue 16): a manifest tool had no memory limit.
        case(
            "manifest tool over its memory limit",
            1,
            &[
                "error (invalid_input)",
                "MemoryError",
                "at most 32 MB: `max_memory_mb`",
            ],
            |d| {
                call(
                    d,
                    "hog",
                    "argv = [\"python3\", \"-c\", \"x = bytearray(100 << 20)\"]\nmax_memory_mb = 32\n",
                )
            },
        ),
        // Regression (issue 16): a tool's control bytes reached the terminal raw.
        case(
            "manifest tool failing with control bytes",
            1,
            &["error (invalid_input)", "bad \\x1b[31mred\\x07"],
            |d| {
                call(
                    d,
                    "ansi",
                    "argv = [\"sh\", \"-c\", \"printf 'bad \\\\033[31mred\\\\007' >&2; exit 1\"]\n",
                )
            },
        ),
    ]
}

/// A valid tool entry named `name`.
fn named(name: &str) -> String {
    format!("[[tool]]\nname = \"{name}\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\n{ARGS}")
}

/// `cairn tools call NAME {}` on a manifest of one tool called `name` with the fields `rest`
/// (its `argv` among them).
fn call(dir: &Path, name: &str, rest: &str) -> Run {
    write(
        dir,
        "tools.toml",
        format!("[[tool]]\nname = \"{name}\"\ndescription = \"d\"\n{rest}{ARGS}"),
    );
    run(["--tools", "tools.toml", "tools", "call", name, "{}"])
}
