//! Bad inputs: documents to index.

use super::*;

pub(super) fn cases() -> Vec<Case> {
    vec![
        case(
            "folder to index missing",
            2,
            &["the folder nodocs does not exist"],
            |_| run(["index", "nodocs", "--index", "idx.sqlite"]),
        ),
        case("binary document", 0, &["skipped", "bin.dat: binary"], |d| {
            write(d, "docs/a.md", "returns within 30 days\n");
            write(d, "docs/bin.dat", b"\x7fELF\0\0\x01binary");
            run(["index", "docs", "--index", "idx.sqlite"])
        }),
        case("document not UTF-8", 0, &["latin1.txt: not UTF-8"], |d| {
            write(d, "docs/latin1.txt", b"caf\xe9 cr\xe8me\n");
            run(["index", "docs", "--index", "idx.sqlite"])
        }),
        case(
            "huge document",
            0,
            &["huge.txt", "over the 8 MiB limit"],
            |d| {
                write(d, "docs/huge.txt", "word ".repeat(2 << 20));
                run(["index", "docs", "--index", "idx.sqlite"])
            },
        ),
        case("symlink loop", 0, &["loop", "a symbolic link"], |d| {
            write(d, "docs/a.md", "text\n");
            std::os::unix::fs::symlink("..", d.join("docs/loop")).unwrap();
            run(["index", "docs", "--index", "idx.sqlite"])
        }),
        case(
            "named pipe among documents",
            0,
            &["pipe.md: not a regular file"],
            |d| {
                write(d, "docs/a.md", "text\n");
                let p = std::ffi::CString::new(d.join("docs/pipe.md").to_str().unwrap()).unwrap();
                // SAFETY: mkfifo(3) on a NUL-terminated path we own.
                assert_eq!(unsafe { libc::mkfifo(p.as_ptr(), 0o644) }, 0);
                run(["index", "docs", "--index", "idx.sqlite"])
            },
        ),
        case("unreadable document", 0, &["cannot be read"], |_| {
            // Unreadable even for root: reading a process's memory file at offset 0 fails.
            run(["index", "/proc/self/mem", "--index", "idx.sqlite"])
        }),
        case(
            "index file not SQLite",
            2,
            &["idx.sqlite is not a cairn index", "left untouched"],
            |d| {
                write(d, "docs/a.md", "text\n");
                write(d, "idx.sqlite", "my notes\n");
                run(["index", "docs", "--index", "idx.sqlite"])
            },
        ),
        // Regression: `--index` naming a database used to add the index's tables to it.
        case(
            "index file is another database",
            2,
            &["is not a cairn index", "other tables (customers"],
            |d| {
                write(d, "docs/a.md", "text\n");
                let db = shop(d, "shop.sqlite");
                run(["index", "docs", "--index", &db])
            },
        ),
        case(
            "search with no index",
            2,
            &["there is no index at none.sqlite"],
            |_| run(["search", "--index", "none.sqlite", "returns"]),
        ),
        case("disk full while indexing", 2, &["idx.sqlite"], |d| {
            for i in 0..40 {
                write(
                    d,
                    &format!("docs/{i}.md"),
                    format!("line {i} of many words\n").repeat(400),
                );
            }
            let _ = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"))
                .args(["index", "docs/0.md", "--index"])
                .arg(d.join("idx.sqlite"))
                .env("CAIRN_HOME", d.join("home"))
                .output()
                .unwrap();
            run(["index", "docs", "--index", "idx.sqlite"]).fsize(64 * 1024)
        }),
        // Regression: a file under /proc reports size 0, so the 8 MiB cap was never applied and
        // indexing /proc/self/pagemap reached 4.2 GB.
        case(
            "document that reports size 0 but is huge",
            0,
            &["pagemap", "over the 8 MiB limit"],
            |_| run(["index", "/proc/self/pagemap", "--index", "idx.sqlite"]),
        ),
    ]
}
