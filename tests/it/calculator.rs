//! The calculator: exact integers, decimals and fractions of any size up to the limit,
//! floating-point results marked with `≈`, huge results refused before they are computed, and
//! every bad input an error with a position (and a short excerpt of the expression) — never a
//! panic, a hang or a stack overflow (property-tested over random strings).

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::tools::calculator::{evaluate, CalculatorTool, Num, MAX_DIGITS};
use cairn::tools::{ErrorClass, RegistryOptions, ToolError, ToolRegistry};
use predicates::prelude::*;
use proptest::prelude::*;
use serde_json::json;

use crate::common::cairn;

fn show(s: &str) -> String {
    match evaluate(s) {
        Ok(v) => v.to_string(),
        Err(e) => format!("error: {e}"),
    }
}

/// The calculator as the agent calls it: through the registry, arguments as JSON.
fn registry() -> ToolRegistry {
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(CalculatorTool)).unwrap();
    reg
}

fn call(expr: &str) -> Result<String, ToolError> {
    registry()
        .call_value("calculator", &json!({ "expression": expr }))
        .map(|o| o.text)
}

#[test]
fn worked_examples() {
    let cases = [
        ("1234*5678", "7006652"),
        ("2^20", "1048576"),
        ("(3 + 4) * 2", "14"),
        ("10 / 4", "2.5"),
        ("10 / 5", "2"),
        ("0.1 + 0.2", "0.3"),
        ("1.1 * 3", "3.3"),
        ("sqrt(2)", "≈ 1.41421356237"),
        ("sqrt(144)", "12"),
        ("abs(-7)", "7"),
        ("floor(2.7) + ceil(2.1)", "5"),
        ("min(3, -2, 8)", "-2"),
        ("max(1.5, 2)", "2"),
        ("round(pi * 100) / 100", "3.14"),
        ("ln(e)", "≈ 1"),
        ("log10(1000)", "3"),
        ("exp(0)", "1"),
        ("sin(0) + cos(0)", "1"),
        ("-3 % 2", "-1"),
        ("2 ^ -2", "0.25"),
        ("-2^2", "-4"),
        ("(-2)^2", "4"),
        ("2^3^2", "512"),
        ("1e3 + 1", "1001"),
        ("12345678901234567890 * 10", "123456789012345678900"),
        ("  7  ", "7"),
        ("989 / 4", "247.25"),
        ("1_000_000 × 3 ÷ 4 − 1", "749999"),
        ("2**0.5 * 2**0.5", "≈ 2"),
        ("round(1/3, 4)", "0.3333"),
        ("6!", "720"),
        ("gcd(84, 36) + lcm(4, 10)", "32"),
    ];
    for (expr, want) in cases {
        assert_eq!(show(expr), want, "{expr}");
    }
}

/// Issue 16: the "exact" calculator went through `i128` then `f64`, so products, powers and
/// sums past 2^127 came back rounded (`1e55`, `1.7014118346e38`, `1e39`), tiny powers were
/// `0` and `1/10^400` was an overflow error. Each answer here is the exact value.
#[test]
fn large_and_small_values_are_exact_through_the_registry() {
    let cases = [
        (
            "99999999999999999999999999999*99999999999999999999999999",
            "9999999999999999999999999899900000000000000000000000001",
        ),
        ("2^127", "170141183460469231731687303715884105728"),
        ("2^128 - 1", "340282366920938463463374607431768211455"),
        ("10^39+1", "1000000000000000000000000000000000000001"),
        ("10^39+1 - 10^39", "1"),
        ("1/10^400", "1e-400"),
        ("1/10^400 * 10^400", "1"),
        ("(10^30 + 1) / 10^30", "1.000000000000000000000000000001"),
        ("0.1 * 3 - 0.3", "0"),
        (
            "123456789123456789 * 987654321987654321",
            "121932631356500531347203169112635269",
        ),
        ("30!", "265252859812191058636308480000000"),
        ("-(2^64)", "-18446744073709551616"),
    ];
    for (expr, want) in cases {
        assert_eq!(call(expr).unwrap(), want, "{expr}");
    }
    // 2^-1075 was 0: now its 752 digits, exactly, in scientific notation.
    let tiny = call("2^-1075").unwrap();
    assert!(tiny.starts_with("2.4703282292062327"), "{tiny}");
    assert!(tiny.ends_with("7667236328125e-324"), "{tiny}");
    assert!(!tiny.contains('≈'), "{tiny}");
}

/// Issue 16: a rational that is not a finite decimal is shown as its exact fraction and a
/// decimal marked as rounded, not as a float that hides which it is.
#[test]
fn fractions_are_exact_and_their_decimals_marked_rounded() {
    assert_eq!(call("1/3").unwrap(), "≈ 0.333333333333 (exactly 1/3)");
    assert_eq!(call("2/6 + 1/6").unwrap(), "0.5");
    assert_eq!(call("1/3 * 3").unwrap(), "1");
    assert_eq!(call("22/7").unwrap(), "≈ 3.14285714286 (exactly 22/7)");
    assert_eq!(call("-1/7").unwrap(), "≈ -0.142857142857 (exactly -1/7)");
}

/// Issue 16: floating-point results looked exactly like exact ones; now they say `≈`.
#[test]
fn irrational_results_say_they_are_floating_point() {
    for expr in [
        "sqrt(2)", "pi", "e", "ln(2)", "sin(1)", "2^0.5", "exp(1)", "10^0.3",
    ] {
        let out = call(expr).unwrap();
        assert!(out.starts_with("≈ "), "{expr}: {out}");
    }
    for expr in [
        "sqrt(49/4)",
        "8^(2/3)",
        "log10(10^50)",
        "cos(0)",
        "round(e, 3)",
    ] {
        let out = call(expr).unwrap();
        assert!(!out.contains('≈'), "{expr}: {out}");
    }
    // The tool says what ≈ means and where exactness ends.
    let info = &registry().list()[0];
    assert!(info.description.contains("≈"), "{}", info.description);
    assert!(
        info.description.contains("1000 digits"),
        "{}",
        info.description
    );
}

/// Issue 16: `10^10^10`, `factorial(100000)` or `2^(2^40)` must be refused at once, with the
/// limit named, not computed (a hang, or memory exhausted).
#[test]
fn huge_results_are_refused_at_once_with_the_limit() {
    for expr in [
        "10^10^10",
        "factorial(100000)",
        "2^(2^40)",
        "99999!",
        "(10^999)^2",
        "10^999 * 10^999 * 10^999",
        "1/2^5000",
        "1e5000",
    ] {
        let start = Instant::now();
        let e = call(expr).unwrap_err();
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{expr}: {:?}",
            start.elapsed()
        );
        assert_eq!(e.class, ErrorClass::InvalidInput, "{expr}");
        assert!(
            e.message.contains(&format!("at most {MAX_DIGITS} digits")),
            "{expr}: {}",
            e.message
        );
        assert!(
            e.hint.as_deref().unwrap_or("").contains("log10"),
            "{expr}: {e:?}"
        );
    }
    // Just under the limit is still exact.
    assert_eq!(call("10^999 - 1").unwrap(), "9".repeat(999));
}

/// Issue 16: an error in an 80 KB expression echoed all 80 KB back to the model; it now cites
/// a short window around the error position.
#[test]
fn an_error_in_a_huge_expression_cites_a_short_excerpt() {
    let expr = format!("{}1 +* 2{}", "1 + ".repeat(10_000), " + 1".repeat(10_000));
    assert!(expr.len() > 80_000);
    let e = call(&expr).unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(
        e.message.len() < 400,
        "{} bytes: {}",
        e.message.len(),
        e.message
    );
    assert!(e.message.contains("1 +* 2"), "{}", e.message);
    assert!(e.message.contains('…'), "{}", e.message);
    assert!(e.message.contains("position 40004"), "{}", e.message);
    // A long unknown name or number is clipped in the message too.
    let name = format!("1 + {}", "x".repeat(80_000));
    let e = call(&name).unwrap_err();
    assert!(e.message.len() < 600, "{} bytes", e.message.len());
}

#[test]
fn the_command_line_prints_exact_results_and_short_errors() {
    let home = tempfile::tempdir().unwrap();
    cairn(home.path())
        .args(["tools", "call", "calculator", r#"{"expression": "2^127"}"#])
        .assert()
        .success()
        .stdout("170141183460469231731687303715884105728\n");
    cairn(home.path())
        .args(["tools", "call", "calculator", r#"{"expression": "1/3"}"#])
        .assert()
        .success()
        .stdout("≈ 0.333333333333 (exactly 1/3)\n");
    cairn(home.path())
        .args([
            "tools",
            "call",
            "calculator",
            r#"{"expression": "10^10^10"}"#,
        ])
        .timeout(Duration::from_secs(20))
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("error (invalid_input)")
                .and(predicate::str::contains("at most 1000 digits"))
                .and(predicate::str::contains("hint:")),
        );
}

#[test]
fn bad_input_is_an_error_with_a_position() {
    let cases: &[(&str, &str, usize)] = &[
        ("1/0", "division by zero", 2),
        ("5 % 0", "division by zero", 3),
        ("2^99999", "at most 1000 digits", 2),
        ("sqrt(-1)", "negative", 1),
        ("ln(0)", "above 0", 1),
        ("((", "ends where a number was expected", 3),
        ("(1+2", "missing `)`", 5),
        ("1+", "ends where a number was expected", 3),
        ("1 2", "unexpected number `2`", 3),
        ("foo(1)", "unknown function `foo`", 1),
        ("x + 1", "unknown name `x`", 1),
        ("2 $ 3", "unexpected character `$`", 3),
        ("", "empty", 1),
        ("max()", "at least one argument", 1),
        ("sqrt(1, 2)", "takes 1 argument", 1),
        (")", "expected a number", 1),
        ("0^-1", "division by zero", 2),
        ("(-4)^0.5", "not a real number", 5),
        ("3!!", "`!!`", 3),
        ("factorial(-1)", "whole number", 1),
        ("round(1, 0.5)", "digits", 1),
        ("exp(10^400)", "too large for floating point", 1),
    ];
    for (expr, needle, pos) in cases {
        let e = evaluate(expr).unwrap_err();
        assert!(e.message.contains(needle), "{expr}: {e}");
        assert_eq!(e.position, *pos, "{expr}: {e}");
    }
}

#[test]
fn ten_thousand_nested_parentheses_are_an_error_not_a_crash() {
    let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
    let e = evaluate(&deep).unwrap_err();
    assert!(e.message.contains("nests deeper"), "{e}");
    let deep_fn = format!("{}1{}", "abs(".repeat(10_000), ")".repeat(10_000));
    assert!(evaluate(&deep_fn).is_err());
    let deep_pow = format!("2{}", "^2".repeat(10_000));
    assert!(evaluate(&deep_pow).is_err());
    let open = "(".repeat(100_000);
    assert!(evaluate(&open).is_err());
    // Within the limit, nesting works.
    let ok = format!("{}1{}", "(".repeat(100), ")".repeat(100));
    assert_eq!(show(&ok), "1");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_strings_never_panic(s in "[0-9+*/%^!()., a-z\\-]{0,40}") {
        let _ = evaluate(&s).map(|v| v.to_string());
    }

    #[test]
    fn random_unicode_never_panics(s in "\\PC{0,30}") {
        let _ = evaluate(&s).map(|v| v.to_string());
    }

    #[test]
    fn integer_arithmetic_is_exact(a in any::<i64>(), b in any::<i64>()) {
        let (a, b) = (a as i128, b as i128);
        prop_assert_eq!(evaluate(&format!("{a} + ({b})")).unwrap(), Num::from(a + b));
        prop_assert_eq!(evaluate(&format!("{a} - ({b})")).unwrap(), Num::from(a - b));
        prop_assert_eq!(evaluate(&format!("{a} * ({b})")).unwrap(), Num::from(a * b));
        if b != 0 {
            prop_assert_eq!(evaluate(&format!("{a} % ({b})")).unwrap(), Num::from(a % b));
            // The quotient times the divisor gives the dividend back, exactly.
            let back = evaluate(&format!("({a} / ({b})) * ({b})")).unwrap();
            prop_assert_eq!(back, Num::from(a));
            let q = evaluate(&format!("{a} / ({b})")).unwrap();
            prop_assert!(q.is_exact());
            if a % b == 0 {
                prop_assert_eq!(q, Num::from(a / b));
            }
        } else {
            let div = format!("{a} / ({b})");
            prop_assert!(evaluate(&div).is_err());
        }
    }

    #[test]
    fn decimals_are_exact(a in 0u64..10_000_000, b in 0u64..10_000_000) {
        // Thousandths add up with no float noise: a/1000 + b/1000 is exactly (a + b)/1000.
        let sum = evaluate(&format!("{}.{:03} + {}.{:03}", a / 1000, a % 1000, b / 1000, b % 1000));
        let want = evaluate(&format!("({a} + {b}) / 1000"));
        prop_assert_eq!(sum.unwrap(), want.unwrap());
    }

    #[test]
    fn powers_are_exact(a in -50i64..50, n in 0u32..60) {
        let want = num_bigint::BigInt::from(a).pow(n);
        prop_assert_eq!(evaluate(&format!("({a})^{n}")).unwrap(), Num::from(want));
    }
}
