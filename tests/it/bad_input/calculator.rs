//! Bad inputs: expressions for the calculator tool, through `cairn tools call calculator` as a
//! user runs it (exit 1, the error and its hint on stderr). Issue 16: results too large to
//! compute, arithmetic with no real answer, and huge expressions whose error must not echo
//! them whole.

use super::*;

/// `cairn tools call calculator` on `expr`.
fn calc(expr: &str) -> Run {
    let args = serde_json::json!({ "expression": expr }).to_string();
    run(["tools", "call", "calculator", args.as_str()])
}

pub(super) fn cases() -> Vec<Case> {
    vec![
        // Issue 16: `10^10^10` went to f64 and came back as an overflow only by luck of the
        // float range; an exact calculator must refuse it before computing 10^10 000 000 000.
        case(
            "calculator power tower over the digit limit",
            1,
            &[
                "10 ^ 10000000000 would need about 10000000001 digits",
                "at most 1000 digits",
                "hint:",
                "log10",
            ],
            |_| calc("10^10^10"),
        ),
        // Issue 16: a factorial is sized by Stirling's formula, not looped up to 100000.
        case(
            "calculator factorial over the digit limit",
            1,
            &[
                "factorial(100000) would need about 456574 digits",
                "at most 1000 digits",
            ],
            |_| calc("factorial(100000)"),
        ),
        // Issue 16: 2^(2^40) would allocate 2^40 bits if computed.
        case(
            "calculator power of a power over the limit",
            1,
            &["2 ^ 1099511627776", "at most 1000 digits"],
            |_| calc("2^(2^40)"),
        ),
        // Issue 16: a 5000-digit number was read as a float (or `out of range`); now it is
        // refused for its size, and the message cites it clipped, not whole.
        case(
            "calculator number literal with too many digits",
            1,
            &["would need about 5000 digits", "99999…", "at position 1"],
            |_| calc(&"9".repeat(5000)),
        ),
        // Issue 16: `1e-5000` underflowed to 0 (and 1/10^400 overflowed); tiny numbers are
        // exact within the limit and refused past it.
        case(
            "calculator number too small to hold exactly",
            1,
            &["the number `1e-5000`", "at most 1000 digits"],
            |_| calc("1e-5000"),
        ),
        // Issue 16: an error in an 80 KB expression echoed all of it; now a window of 40
        // characters each side of the position, with `…` where it is cut.
        case(
            "calculator error in an 80 KB expression",
            1,
            &[
                "cannot evaluate `…",
                "+ 1 +* 2 + 1",
                "(characters 39964-40043 of 80006)",
                "expected a number, found `*` at position 40004",
            ],
            |_| {
                let expr = format!("{}1 +* 2{}", "1 + ".repeat(10_000), " + 1".repeat(10_000));
                calc(&expr)
            },
        ),
        // Issue 16: an unknown name 80 000 characters long was quoted whole in the message.
        case(
            "calculator unknown name of 80 000 characters",
            1,
            &["unknown name `xxxxxxxxxx", "x…`", "at position 5"],
            |_| calc(&format!("1 + {}", "x".repeat(80_000))),
        ),
        // Issue 16: with exact fractions, a divisor that is zero only exactly must still be
        // a division by zero (as a float it could have been a tiny remainder).
        case(
            "calculator division by an exact zero fraction",
            1,
            &["division by zero", "at position 2"],
            |_| calc("1/(1/3 - 1/3)"),
        ),
        case(
            "calculator zero to a negative power",
            1,
            &["division by zero (0 ^ -1)"],
            |_| calc("0^-1"),
        ),
        case(
            "calculator even root of a negative number",
            1,
            &[
                "-8 ^ 0.5 is not a real number",
                "even root of a negative number",
            ],
            |_| calc("(-8)^(1/2)"),
        ),
        // Issue 16: `!` is new; `3!!` would be read as (3!)! by some and as a double
        // factorial by others, so it is refused with what to write instead.
        case(
            "calculator double factorial",
            1,
            &["`!!` is not supported", "(n!)!"],
            |_| calc("3!!"),
        ),
        case(
            "calculator factorial of a fraction",
            1,
            &["factorial needs a whole number 0 or more, got 0.5"],
            |_| calc("(1/2)!"),
        ),
        // Issue 16: an exact value beyond f64 given to a floating-point function must say
        // so, not silently become infinity.
        case(
            "calculator exact value too large for a float function",
            1,
            &["about 1e400 is too large for floating point", "1.8e308"],
            |_| calc("exp(10^400)"),
        ),
        case(
            "calculator rounding digits out of range",
            1,
            &["the digits of `round` must be a whole number from -1000 to 1000"],
            |_| calc("round(2.5, 10^6)"),
        ),
    ]
}
