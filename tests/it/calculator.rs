//! The calculator: exact integers, rounded decimals, and every bad input an error with a
//! position — never a panic or a stack overflow (property-tested over random strings).

use cairn::tools::calculator::{evaluate, Num};
use proptest::prelude::*;

fn show(s: &str) -> String {
    match evaluate(s) {
        Ok(v) => v.to_string(),
        Err(e) => format!("error: {e}"),
    }
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
        ("sqrt(2)", "1.41421356237"),
        ("sqrt(144)", "12"),
        ("abs(-7)", "7"),
        ("floor(2.7) + ceil(2.1)", "5"),
        ("min(3, -2, 8)", "-2"),
        ("max(1.5, 2)", "2"),
        ("round(pi * 100) / 100", "3.14"),
        ("ln(e)", "1"),
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
    ];
    for (expr, want) in cases {
        assert_eq!(show(expr), want, "{expr}");
    }
}

#[test]
fn bad_input_is_an_error_with_a_position() {
    let cases: &[(&str, &str, usize)] = &[
        ("1/0", "division by zero", 2),
        ("5 % 0", "division by zero", 3),
        ("2^99999", "overflow", 2),
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
    fn random_strings_never_panic(s in "[0-9+*/%^()., a-z\\-]{0,40}") {
        let _ = evaluate(&s);
    }

    #[test]
    fn random_unicode_never_panics(s in "\\PC{0,30}") {
        let _ = evaluate(&s);
    }

    #[test]
    fn integer_arithmetic_is_exact(a in -1_000_000_000i64..1_000_000_000, b in -1_000_000_000i64..1_000_000_000) {
        let (a, b) = (a as i128, b as i128);
        prop_assert_eq!(evaluate(&format!("{a} + ({b})")).unwrap(), Num::Int(a + b));
        prop_assert_eq!(evaluate(&format!("{a} - ({b})")).unwrap(), Num::Int(a - b));
        prop_assert_eq!(evaluate(&format!("{a} * ({b})")).unwrap(), Num::Int(a * b));
        if b != 0 {
            prop_assert_eq!(evaluate(&format!("{a} % ({b})")).unwrap(), Num::Int(a % b));
            let q = evaluate(&format!("{a} / ({b})")).unwrap();
            if a % b == 0 {
                prop_assert_eq!(q, Num::Int(a / b));
            } else {
                let diff = (q.as_f64() - a as f64 / b as f64).abs();
                prop_assert!(diff < 1e-6);
            }
        } else {
            let div = format!("{a} / ({b})");
            prop_assert!(evaluate(&div).is_err());
        }
    }

    #[test]
    fn small_powers_are_exact(a in -50i128..50, n in 0u32..20) {
        prop_assert_eq!(evaluate(&format!("({a})^{n}")).unwrap(), Num::Int(a.pow(n)));
    }
}
