//! Bad inputs: gGUF files.

use super::*;

pub(super) fn cases() -> Vec<Case> {
    vec![
        case(
            "empty GGUF",
            2,
            &["only 0 bytes, too short for a GGUF header"],
            |d| {
                write(d, "e.gguf", b"");
                gen("e.gguf")
            },
        ),
        case("wrong magic", 2, &["is not a GGUF file (bad magic"], |d| {
            write(d, "w.gguf", b"GGML\x03\0\0\0 and then some text");
            gen("w.gguf")
        }),
        case(
            "header cut short",
            2,
            &["is truncated", "the header ends early"],
            |d| {
                write(d, "h.gguf", gguf(3, 0, 1, &[]));
                gen("h.gguf")
            },
        ),
        case(
            "tensor data cut short",
            2,
            &["is truncated", "tensor `w` needs bytes up to"],
            |d| {
                write(d, "t.gguf", gguf_tensor(&[64, 4], 0, 100));
                gen("t.gguf")
            },
        ),
        case(
            "unsupported GGUF version",
            2,
            &["unsupported magic/version"],
            |d| {
                write(d, "v.gguf", gguf(7, 0, 0, &[]));
                gen("v.gguf")
            },
        ),
        case(
            "absurd string length",
            2,
            &["string length", "exceeds max"],
            |d| {
                let mut rest = gguf_str("general.architecture");
                rest.extend(8u32.to_le_bytes());
                rest.extend((1u64 << 60).to_le_bytes());
                write(d, "s.gguf", gguf(3, 0, 1, &rest));
                gen("s.gguf")
            },
        ),
        case(
            "absurd metadata count",
            2,
            &["metadata_kv_count", "exceeds max"],
            |d| {
                write(d, "k.gguf", gguf(3, 0, 1 << 40, &[]));
                gen("k.gguf")
            },
        ),
        case(
            "absurd tensor count",
            2,
            &["tensor_count", "exceeds max"],
            |d| {
                write(d, "c.gguf", gguf(3, 1 << 50, 0, &[]));
                gen("c.gguf")
            },
        ),
        case("absurd tensor size", 2, &["tensor `w`"], |d| {
            write(d, "z.gguf", gguf_tensor(&[1 << 40, 1 << 40], 0, 64));
            gen("z.gguf")
        }),
        // Found by fuzzing: candle divided by the alignment, so 0 panicked.
        case(
            "zero alignment",
            2,
            &["general.alignment", "must be greater than 0"],
            |d| {
                let mut rest = gguf_str("general.alignment");
                rest.extend(4u32.to_le_bytes());
                rest.extend(0u32.to_le_bytes());
                write(d, "a.gguf", gguf(3, 0, 1, &rest));
                gen("a.gguf")
            },
        ),
        case(
            "unsupported quant type",
            2,
            &["unknown dtype for tensor 99"],
            |d| {
                write(d, "q.gguf", gguf_tensor(&[32], 99, 64));
                gen("q.gguf")
            },
        ),
        case(
            "too many tensor dimensions",
            2,
            &["has 9 dimensions, max is 4"],
            |d| {
                write(d, "n.gguf", gguf_tensor(&[1; 9], 0, 64));
                gen("n.gguf")
            },
        ),
        case("model path is a folder", 2, &["is not a file"], |d| {
            std::fs::create_dir(d.join("dir.gguf")).unwrap();
            gen("dir.gguf")
        }),
    ]
}
