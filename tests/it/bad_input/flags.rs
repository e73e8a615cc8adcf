//! Bad inputs: flags and environment.

use super::*;

pub(super) fn cases() -> Vec<Case> {
    vec![
        case(
            "unknown subcommand",
            2,
            &["unrecognized subcommand 'frobnicate'"],
            |_| run(["frobnicate"]),
        ),
        case("zero threads", 2, &["--threads must be at least 1"], |_| {
            run(["--threads", "0", "tools", "list"])
        }),
        case(
            "threads not a number",
            2,
            &["invalid value 'abc' for '--threads"],
            |_| run(["--threads", "abc", "tools", "list"]),
        ),
        case(
            "CAIRN_THREADS not a number",
            2,
            &["CAIRN_THREADS is `abc`"],
            |_| run(["tools", "list"]).env("CAIRN_THREADS", "abc"),
        ),
        case(
            "memory decay out of range",
            2,
            &["--memory-decay is 1.5"],
            |_| run(["--memory-decay", "1.5", "memory", "sessions"]),
        ),
        case("empty task", 2, &["the task is empty"], |_| {
            run(["run", ""])
        }),
        case(
            "zero rounds",
            2,
            &["--max-rounds must be at least 1"],
            |_| run(["run", "--max-rounds", "0", "hi"]),
        ),
        case("zero jobs", 2, &["--jobs must be at least 1"], |d| {
            write(d, "t.jsonl", "{\"task\":\"x\"}\n");
            run(["batch", "--jobs", "0", "t.jsonl"])
        }),
        case(
            "shard out of range",
            2,
            &["expected I/N with 0 <= I < N"],
            |_| run(["batch", "--shard", "3/2", "t.jsonl"]),
        ),
        case(
            "unknown --forbid-repeats",
            2,
            &["unknown value `some`: expected `none`, `failed` or `all`"],
            |_| run(["run", "--forbid-repeats", "some", "hi"]),
        ),
        case(
            "bad --stop-when regex",
            2,
            &["is not a valid regular expression"],
            |_| run(["run", "--stop-when", "(", "hi"]),
        ),
        case(
            "reason votes out of range",
            2,
            &["--reason-votes is 9", "1 (the greedy reasoning alone) to 8"],
            |_| run(["run", "--reason-votes", "9", "hi"]),
        ),
        case(
            "unknown device",
            2,
            &[
                "--device: unknown device `tpu`",
                "expected cpu, cuda, cuda:N or metal",
            ],
            |_| run(["--device", "tpu", "tools", "list"]),
        ),
        case(
            "device number not a number",
            2,
            &["CAIRN_DEVICE: device `cuda:first`", "from 0 to 255"],
            |_| run(["tools", "list"]).env("CAIRN_DEVICE", "cuda:first"),
        ),
        case(
            "unknown model name",
            2,
            &["is not a model file, a preset"],
            |_| run(["--model", "nosuchpreset", "run", "hi"]),
        ),
        case(
            "batch --out is the task file",
            2,
            &["is the same file as the task file"],
            |d| {
                write(d, "t.jsonl", "{\"id\":\"a\",\"task\":\"x\"}\n");
                let m = tiny(d);
                run(["batch", "t.jsonl", "--out", "./t.jsonl", "--model", &m])
            },
        ),
        case(
            "eval --report is the suite",
            2,
            &["is the same file as the suite"],
            |d| {
                write(
                    d,
                    "s.jsonl",
                    "{\"id\":\"a\",\"task\":\"x\",\"expect\":[\"1\"]}\n",
                );
                let m = tiny(d);
                run(["eval", "s.jsonl", "--report", "s.jsonl", "--model", &m])
            },
        ),
        // Regression: `--threads 100000` started thousands of threads and never finished.
        case(
            "threads far above the cores",
            2,
            &["--threads is 100000", "at most", "four per core"],
            |_| run(["--threads", "100000", "tools", "list"]),
        ),
        case(
            "CAIRN_THREADS far above the cores",
            2,
            &["CAIRN_THREADS is 100000", "at most"],
            |_| run(["tools", "list"]).env("CAIRN_THREADS", "100000"),
        ),
        case(
            "jobs far above the cores",
            2,
            &["--jobs is 100000", "at most"],
            |d| {
                write(d, "t.jsonl", "{\"task\":\"x\"}\n");
                run(["batch", "--jobs", "100000", "t.jsonl"])
            },
        ),
        case(
            "eval jobs far above the cores",
            2,
            &["--jobs is 5000", "at most"],
            |d| {
                write(d, "s.jsonl", "{\"task\":\"x\",\"expect\":[\"1\"]}\n");
                run(["eval", "--jobs", "5000", "s.jsonl"])
            },
        ),
        // Regression: a huge --timeout panicked ("cannot convert float seconds to Duration").
        case(
            "huge run --timeout",
            2,
            &["--timeout is 1e300", "at most 604800"],
            |_| run(["run", "--timeout", "1e300", "hi"]),
        ),
        case("huge batch --timeout", 2, &["--timeout is 1e300"], |d| {
            write(d, "t.jsonl", "{\"task\":\"x\"}\n");
            let m = tiny(d);
            run(["batch", "t.jsonl", "--timeout", "1e300", "--model", &m])
        }),
        case("huge tools --timeout", 2, &["--timeout is 1e300"], |_| {
            run([
                "tools",
                "--timeout",
                "1e300",
                "call",
                "calculator",
                "{\"expression\": \"1+1\"}",
            ])
        }),
        case("NaN --timeout", 2, &["--timeout is NaN"], |_| {
            run(["run", "--timeout", "NaN", "hi"])
        }),
        // Regression: the doubling retry wait overflowed a Duration and panicked.
        case(
            "huge --retry-base-ms",
            2,
            &["--retry-base-ms is 18446744073709551615", "at most 60000"],
            |_| run(["run", "--retry-base-ms", "18446744073709551615", "hi"]),
        ),
        case(
            "too many --retries",
            2,
            &["--retries is 1000", "at most 10"],
            |_| run(["run", "--retries", "1000", "hi"]),
        ),
        // Regression: an unknown CAIRN_ISA was ignored silently.
        case(
            "unknown CAIRN_ISA",
            2,
            &["CAIRN_ISA is `avx9000`", "scalar, avx2, avx512 or amx"],
            |_| run(["tools", "list"]).env("CAIRN_ISA", "avx9000"),
        ),
        // Regression: `run` printed an empty answer with an error and exited 0.
        case(
            "run that stops without an answer",
            1,
            &["the task stopped without an answer"],
            |d| {
                let m = tiny_agent(d);
                run([
                    "run",
                    "--model",
                    &m,
                    "--no-memory",
                    "--max-rounds",
                    "1",
                    "--max-tokens",
                    "16",
                    "What is 2+2?",
                ])
            },
        ),
        // Regression: a grammar whose rule only refers to itself dumped the parser's state.
        case(
            "Lark grammar that can never finish",
            2,
            &["g.lark: invalid grammar", "no rule can finish"],
            |d| {
                write(d, "g.lark", "start: a\na: a\n");
                let m = tiny(d);
                run(["generate", "--model", &m, "--grammar", "g.lark", "hi"])
            },
        ),
        // Regression: a step allowance larger than the context told the user to shorten the task.
        case(
            "run --max-tokens beyond the context",
            2,
            &["does not fit the model's context", "lower --max-tokens"],
            |d| {
                let m = tiny(d);
                run([
                    "run",
                    "--model",
                    &m,
                    "--no-memory",
                    "--max-tokens",
                    "18446744073709551615",
                    "hi",
                ])
            },
        ),
        case(
            "bench repetitions without end",
            2,
            &["--repetitions is 1000000", "1 to 1000"],
            |d| {
                let m = tiny(d);
                run(["bench", "--model", &m, "-r", "1000000"])
            },
        ),
    ]
}
