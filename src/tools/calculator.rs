//! The `calculator` tool: exact arithmetic on one expression.
//!
//! Grammar: numbers (`42`, `1_000_000`, `0.25`, `.5`, `1.5e-3`), `+ - * / % ^` (`**` is read
//! as `^`; `×`, `÷` and `−` as `*`, `/` and `-`), postfix `!` (factorial), parentheses, the
//! functions in [`FUNCTIONS`] and the constants `pi` and `e`. `!` binds tightest, then `^`
//! (to the right); unary minus binds looser than `^`, so `-2^2` is `-4`. `%` is the remainder
//! with the sign of the dividend (`-3 % 2` is `-1`).
//!
//! Dates: a date written `YYYY-MM-DD` minus another gives the days from the second to the
//! first (`2025-09-11 - 2025-09-08` is `3`), the one thing a date may do; anywhere else it is
//! an error that says so, never the arithmetic `2025 - 9 - 11`. A task's dates come from
//! tables as text, and the days between two of them ("how many days after it was placed was
//! the order shipped?") were answered with the day of the month.
//!
//! Values are [`Num::Exact`], a reduced fraction of big integers (`num-bigint` and
//! `num-rational`), for everything that stays rational: integers of any size (`2^127`),
//! decimals (`0.1+0.2` is exactly `0.3`) and fractions (`1/3`). Irrational operations (the
//! square root of a non-square, logarithms, trigonometry, `pi`, `e`, a fractional power with
//! no exact root) give [`Num::Approx`], an `f64`, and whatever is computed from one stays
//! approximate. The text of a value says which it is (see [`Num`]).
//!
//! Size: the numerator and the denominator of an exact value have at most [`MAX_DIGITS`]
//! digits each. Powers, factorials, number literals and rounding digits are sized from the
//! operands' bit lengths *before* anything is computed, so `10^10^10` or `factorial(100000)`
//! is an error at once, never a long loop or a huge allocation; the other operations can at
//! most double the size of operands within the limit and are checked after.
//!
//! Division by zero, results beyond the limit, domain errors (`sqrt(-1)`), unknown names and
//! bad syntax are [`CalcError`]s carrying the 1-based character position they refer to. The
//! parser is recursive descent with a nesting limit ([`MAX_DEPTH`]), so 10 000 nested
//! parentheses are an error, never a stack overflow.

use std::cmp::Ordering;
use std::fmt;

use num_bigint::{BigInt, Sign};
use num_integer::Integer;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{parse_args, schema_of, Observation, Tool, ToolError};

/// How deeply parentheses and function calls may nest.
pub const MAX_DEPTH: usize = 200;

/// The most decimal digits the numerator or the denominator of an exact value may have.
pub const MAX_DIGITS: u64 = 1000;

/// Significant digits shown for a rounded value (a float, or the decimal beside a fraction).
const SHOWN_DIGITS: usize = 12;

/// How many characters of the expression an error cites on each side of its position.
const EXCERPT_SIDE: usize = 40;

/// The functions the calculator knows.
pub const FUNCTIONS: &[&str] = &[
    "sqrt",
    "ln",
    "log10",
    "exp",
    "abs",
    "round",
    "floor",
    "ceil",
    "min",
    "max",
    "sin",
    "cos",
    "tan",
    "factorial",
    "gcd",
    "lcm",
];

/// The most numbers, names and operators in one expression: the pattern's repetition is
/// counted, so a model that falls into repetition (`2 * 2 * 2 * …`) closes the string there
/// instead of running on to the step's limit.
pub const MAX_EXPRESSION_UNITS: usize = 60;

/// The pattern `expression` is decoded under: the calculator's own lexicon, numbers,
/// operators, parentheses, commas, the [`FUNCTIONS`] and the constants `pi` and `e`, with
/// single spaces between. Units (`ounces/egg`), `=`, `x` for times or a stray word cannot be
/// written, so an expression the model decodes can always be read (though it may still be
/// wrong arithmetic, or divide by zero). Bounded by [`MAX_EXPRESSION_UNITS`].
pub fn expression_pattern() -> String {
    let mut names: Vec<&str> = FUNCTIONS.iter().copied().chain(["pi", "e"]).collect();
    names.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    let number = "[0-9]{1,15}(?:[.][0-9]{1,12})?(?:[eE][-+]?[0-9]{1,3})?|[.][0-9]{1,12}";
    format!(
        "^(?:[ ]{{0,2}}(?:{number}|{}|[*][*]|[-+*/%^!(),×÷−])){{1,{MAX_EXPRESSION_UNITS}}}[ ]{{0,2}}$",
        names.join("|")
    )
}

/// The hint of an error that has none of its own.
const GENERAL_HINT: &str = "write one expression with numbers, + - * / % ^ !, parentheses and \
                            the listed functions";

/// The hint of a date used other than as one end of a difference of two dates.
const DATE_HINT: &str = "a date (YYYY-MM-DD) minus another gives the days between them: \
                         2025-09-11 - 2025-09-08 gives 3; put the difference in parentheses \
                         to compute with it: (2025-09-11 - 2025-09-08) * 24";

/// The hint of a result over the size limit.
const SIZE_HINT: &str = "exact results may have at most 1000 digits (numerator and denominator \
                         each); to learn the size of a huge number use logarithms, e.g. \
                         5000*log10(2) for the digits of 2^5000";

/// The hint of a floating-point overflow.
const FLOAT_HINT: &str = "irrational functions and pi, e work in floating point, which ends \
                          near 1.8e308; whole numbers and fractions stay exact up to 1000 digits";

/// A calculator value.
///
/// Its text (`Display`) is the exact value when there is one: an integer's digits, or a
/// terminating decimal written out (`0.3`, or `1e-400` in scientific notation below 1e-9).
/// Any other fraction is its decimal rounded to 12 significant digits after `≈`, then the
/// exact fraction: `≈ 0.333333333333 (exactly 1/3)`. A floating-point value is `≈` and its 12
/// significant digits alone: `≈ 1.41421356237`.
#[derive(Debug, Clone, PartialEq)]
pub enum Num {
    /// An exact rational number (integer, decimal or fraction), reduced.
    Exact(BigRational),
    /// A floating-point approximation (finite), from an irrational operation.
    Approx(f64),
}

impl Num {
    /// The value as a float (infinite for an exact value beyond `f64`'s range).
    pub fn as_f64(&self) -> f64 {
        match self {
            Num::Exact(r) => r.to_f64().unwrap_or(f64::NAN),
            Num::Approx(f) => *f,
        }
    }

    /// Whether the value is exact.
    pub fn is_exact(&self) -> bool {
        matches!(self, Num::Exact(_))
    }

    /// The value as an integer, when it is exact and whole.
    pub fn to_integer(&self) -> Option<BigInt> {
        match self {
            Num::Exact(r) if r.is_integer() => Some(r.to_integer()),
            _ => None,
        }
    }

    fn is_zero(&self) -> bool {
        match self {
            Num::Exact(r) => r.is_zero(),
            Num::Approx(f) => *f == 0.0,
        }
    }
}

impl From<i64> for Num {
    fn from(i: i64) -> Self {
        Num::Exact(BigRational::from_integer(i.into()))
    }
}

impl From<i128> for Num {
    fn from(i: i128) -> Self {
        Num::Exact(BigRational::from_integer(i.into()))
    }
}

impl From<BigInt> for Num {
    fn from(i: BigInt) -> Self {
        Num::Exact(BigRational::from_integer(i))
    }
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Num::Exact(r) => f.write_str(&exact_text(r)),
            Num::Approx(x) => write!(f, "≈ {}", format_float(*x)),
        }
    }
}

/// Prints a float rounded to 12 significant digits (hiding float noise), without a trailing
/// `.0`, in scientific notation when very large or very small.
pub fn format_float(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let rounded: f64 = format!("{x:.11e}").parse().unwrap_or(x);
    let a = rounded.abs();
    if !(1e-9..1e16).contains(&a) {
        return format!("{rounded:e}");
    }
    if rounded.fract() == 0.0 {
        return format!("{}", rounded as i128);
    }
    format!("{rounded}")
}

/// `10^n`.
fn ten_pow(n: u64) -> BigInt {
    BigInt::from(10u32).pow(n as u32)
}

/// The exact text of `r`: its digits, its terminating decimal, or `≈ decimal (exactly p/q)`
/// (the rounded decimal first, so that an observation cut for length keeps it).
fn exact_text(r: &BigRational) -> String {
    if r.is_integer() {
        return r.numer().to_string();
    }
    if let Some(s) = terminating_text(r) {
        return s;
    }
    format!(
        "≈ {} (exactly {}/{})",
        rounded_text(r, SHOWN_DIGITS),
        r.numer(),
        r.denom()
    )
}

/// The exact decimal of a non-integer `r` when its denominator has no prime factor but 2 and
/// 5 and the text is not much longer than [`MAX_DIGITS`]; in scientific notation below 1e-9.
fn terminating_text(r: &BigRational) -> Option<String> {
    let mut d = r.denom().clone();
    let twos = d.trailing_zeros().unwrap_or(0);
    d >>= twos;
    let five = BigInt::from(5u32);
    let mut fives = 0u64;
    loop {
        let (q, rem) = d.div_rem(&five);
        if !rem.is_zero() {
            break;
        }
        d = q;
        fives += 1;
    }
    if !d.is_one() {
        return None;
    }
    // numer / (2^twos 5^fives) = numer 2^(k-twos) 5^(k-fives) / 10^k.
    let k = twos.max(fives);
    let m =
        r.numer().abs() * BigInt::from(2u32).pow((k - twos) as u32) * five.pow((k - fives) as u32);
    let digits = m.to_string();
    let n = digits.len() as u64;
    let sign = if r.is_negative() { "-" } else { "" };
    let text = if k >= n + 9 {
        let (head, tail) = digits.split_at(1);
        let exp = k - n + 1;
        if tail.is_empty() {
            format!("{sign}{head}e-{exp}")
        } else {
            format!("{sign}{head}.{tail}e-{exp}")
        }
    } else if k >= n {
        format!("{sign}0.{}{digits}", "0".repeat((k - n) as usize))
    } else {
        let (int, frac) = digits.split_at((n - k) as usize);
        format!("{sign}{int}.{frac}")
    };
    (text.len() as u64 <= MAX_DIGITS + 10).then_some(text)
}

/// `|r|` (not zero) rounded half away from zero to `sig` significant digits: the digits as an
/// integer of exactly `sig` digits, and the decimal exponent of the first one.
fn round_sig(r: &BigRational, sig: usize) -> (BigInt, i64) {
    let a = r.abs();
    let (p, q) = (a.numer(), a.denom());
    let lo = ten_pow(sig as u64 - 1);
    let hi = ten_pow(sig as u64);
    // A first guess of floor(log10 a) from the bit lengths, off by at most one.
    let mut e = ((p.bits() as f64 - q.bits() as f64) * std::f64::consts::LOG10_2).floor() as i64;
    loop {
        let shift = sig as i64 - 1 - e;
        let scaled = if shift >= 0 {
            BigRational::new(p * ten_pow(shift as u64), q.clone())
        } else {
            BigRational::new(p.clone(), q * ten_pow(shift.unsigned_abs()))
        };
        let m = scaled.round().to_integer();
        if m >= hi {
            e += 1;
        } else if m < lo {
            e -= 1;
        } else {
            return (m, e);
        }
    }
}

/// `r` rounded to `sig` significant digits, written like [`format_float`] writes floats.
fn rounded_text(r: &BigRational, sig: usize) -> String {
    if r.is_zero() {
        return "0".into();
    }
    let (m, exp) = round_sig(r, sig);
    let mut digits = m.to_string();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    let sign = if r.is_negative() { "-" } else { "" };
    let n = digits.len() as i64;
    if (-9..16).contains(&exp) {
        if exp >= n - 1 {
            format!("{sign}{digits}{}", "0".repeat((exp - (n - 1)) as usize))
        } else if exp >= 0 {
            let (a, b) = digits.split_at((exp + 1) as usize);
            format!("{sign}{a}.{b}")
        } else {
            format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize))
        }
    } else {
        let (head, tail) = digits.split_at(1);
        if tail.is_empty() {
            format!("{sign}{head}e{exp}")
        } else {
            format!("{sign}{head}.{tail}e{exp}")
        }
    }
}

/// A value as cited in an error message: its text when short, else rounded.
fn brief(n: &Num) -> String {
    match n {
        Num::Exact(r) => brief_rat(r),
        Num::Approx(_) => n.to_string(),
    }
}

/// An exact value as cited in an error message: its digits, decimal or fraction when short,
/// else `about` and its value rounded to 6 digits.
fn brief_rat(r: &BigRational) -> String {
    let s = if r.is_integer() {
        r.numer().to_string()
    } else {
        terminating_text(r).unwrap_or_else(|| format!("{}/{}", r.numer(), r.denom()))
    };
    if s.chars().count() <= EXCERPT_SIDE {
        s
    } else {
        format!("about {}", rounded_text(r, 6))
    }
}

/// `s` cut to `max` characters with `…` when longer.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let head: String = s.chars().take(max).collect();
        format!("{head}…")
    }
}

/// The part of `expr` an error at 1-based `position` cites: all of it when short, else up to
/// [`EXCERPT_SIDE`] characters on each side of the position, with `…` where it was cut.
pub fn excerpt(expr: &str, position: usize) -> String {
    let chars: Vec<char> = expr.chars().collect();
    if chars.len() <= 2 * EXCERPT_SIDE {
        return format!("`{expr}`");
    }
    let at = position.saturating_sub(1).min(chars.len());
    let start = at.saturating_sub(EXCERPT_SIDE);
    let end = (at + EXCERPT_SIDE).min(chars.len());
    let window: String = chars[start..end].iter().collect();
    format!(
        "`{}{window}{}` (characters {}-{} of {})",
        if start > 0 { "…" } else { "" },
        if end < chars.len() { "…" } else { "" },
        start + 1,
        end,
        chars.len()
    )
}

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at position {position}")]
pub struct CalcError {
    /// What went wrong, naming the bad value.
    pub message: String,
    /// The 1-based character position in the expression.
    pub position: usize,
    /// How to fix it, when there is more to say than the general hint.
    pub hint: Option<&'static str>,
}

fn err<T>(message: impl Into<String>, position: usize) -> Result<T, CalcError> {
    Err(CalcError {
        message: message.into(),
        position,
        hint: None,
    })
}

/// A number of digits as cited in a size error.
fn digits_text(digits: f64) -> String {
    if digits < 1e15 {
        format!("{}", digits.floor() as u64)
    } else {
        format_float(digits)
    }
}

/// The error of an exact value that would need `digits` digits.
fn too_big(what: &str, digits: f64, position: usize) -> CalcError {
    CalcError {
        message: format!(
            "{what} would need about {} digits (exact results may have at most {MAX_DIGITS} digits)",
            digits_text(digits)
        ),
        position,
        hint: Some(SIZE_HINT),
    }
}

/// Decimal digits of `|n|`: exact near the limit, else estimated from the bit length.
fn digit_count(n: &BigInt) -> u64 {
    let est = n.bits() as f64 * std::f64::consts::LOG10_2;
    if (MAX_DIGITS as f64 - 2.0..MAX_DIGITS as f64 + 2.0).contains(&est) {
        n.magnitude().to_string().len() as u64
    } else {
        est.floor() as u64 + 1
    }
}

/// `r` as a value, or an error when its numerator or denominator is over the limit.
/// (`what` names the value in the error; it is only formatted for one.)
fn exact(r: BigRational, what: impl FnOnce() -> String, position: usize) -> Result<Num, CalcError> {
    let digits = digit_count(r.numer()).max(digit_count(r.denom()));
    if digits > MAX_DIGITS {
        return Err(too_big(&what(), digits as f64, position));
    }
    Ok(Num::Exact(r))
}

/// `log10 |n|` for `n` not zero, for any size.
fn log10_abs(n: &BigInt) -> f64 {
    ln_abs(n) / std::f64::consts::LN_10
}

/// `ln |n|` for `n` not zero, for any size.
fn ln_abs(n: &BigInt) -> f64 {
    let bits = n.bits();
    if bits <= 1000 {
        n.to_f64().unwrap_or(f64::NAN).abs().ln()
    } else {
        let shift = bits - 64;
        let top = n.magnitude() >> shift;
        top.to_f64().unwrap_or(f64::NAN).ln() + shift as f64 * std::f64::consts::LN_2
    }
}

/// `ln r` for `r > 0`, accurate near 1 and beyond `f64`'s range.
fn ln_rat(r: &BigRational) -> f64 {
    if let Some(f) = r.to_f64().filter(|f| f.is_normal()) {
        if (0.5..2.0).contains(&f) {
            let d = r - BigRational::one();
            return d.to_f64().unwrap_or(f - 1.0).ln_1p();
        }
        return f.ln();
    }
    ln_abs(r.numer()) - ln_abs(r.denom())
}

/// The decimal exponent `k` when `|n|` is `10^k`.
fn power_of_ten(n: &BigInt) -> Option<u64> {
    let s = n.magnitude().to_string();
    let (first, rest) = s.split_at(1);
    (first == "1" && rest.bytes().all(|b| b == b'0')).then_some(rest.len() as u64)
}

/// A value as a float for a floating-point operation, or an error when an exact value is
/// beyond `f64`'s range.
fn to_float(n: &Num, position: usize) -> Result<f64, CalcError> {
    let f = n.as_f64();
    if f.is_finite() {
        return Ok(f);
    }
    Err(CalcError {
        message: format!("{} is too large for floating point", brief(n)),
        position,
        hint: Some(FLOAT_HINT),
    })
}

/// A floating-point result, or an error when it is not a real number or overflowed (`what`
/// names the operation in the error; it is only formatted for one).
fn float_result(x: f64, what: impl FnOnce() -> String, position: usize) -> Result<Num, CalcError> {
    if x.is_finite() {
        Ok(Num::Approx(x))
    } else if x.is_nan() {
        err(format!("{} is not a real number", what()), position)
    } else {
        Err(CalcError {
            message: format!("overflow: {} is too large for floating point", what()),
            position,
            hint: Some(FLOAT_HINT),
        })
    }
}

/// Evaluates `expr`.
pub fn evaluate(expr: &str) -> Result<Num, CalcError> {
    let tokens = lex(expr)?;
    let mut p = Parser {
        tokens,
        pos: 0,
        depth: 0,
        end: expr.chars().count() + 1,
    };
    if p.tokens.is_empty() {
        return err("the expression is empty", 1);
    }
    let v = p.expr()?;
    if let Some(t) = p.peek() {
        return err(format!("unexpected {}", t.kind.describe()), t.pos);
    }
    Ok(v)
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// A number and its text as written.
    Number(BigRational, String),
    Ident(String),
    Op(char),
    LParen,
    RParen,
    Comma,
    /// A date `YYYY-MM-DD`, as its day number (days since 1970-01-01), and its text.
    Date(i64, String),
}

impl Kind {
    fn describe(&self) -> String {
        match self {
            Kind::Number(_, text) => format!("number `{}`", clip(text, EXCERPT_SIDE)),
            Kind::Ident(s) => format!("name `{}`", clip(s, EXCERPT_SIDE)),
            Kind::Op(c) => format!("`{c}`"),
            Kind::LParen => "`(`".into(),
            Kind::RParen => "`)`".into(),
            Kind::Comma => "`,`".into(),
            Kind::Date(_, text) => format!("date `{text}`"),
        }
    }
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    pos: usize,
}

/// Reads the number starting at `chars[*i]` exactly, sized before it is built.
fn lex_number(chars: &[char], i: &mut usize) -> Result<Kind, CalcError> {
    let start = *i;
    let pos = start + 1;
    let mut digits = String::new();
    while *i < chars.len() && (chars[*i].is_ascii_digit() || chars[*i] == '_') {
        if chars[*i] != '_' {
            digits.push(chars[*i]);
        }
        *i += 1;
    }
    let mut frac_len = 0u64;
    if *i < chars.len() && chars[*i] == '.' {
        *i += 1;
        while *i < chars.len() && chars[*i].is_ascii_digit() {
            digits.push(chars[*i]);
            frac_len += 1;
            *i += 1;
        }
    }
    // The exponent, saturated: anything past ±10^18 is far over the limit either way.
    let mut exp: i64 = 0;
    if *i < chars.len() && (chars[*i] == 'e' || chars[*i] == 'E') {
        let mut j = *i + 1;
        let negative = chars.get(j) == Some(&'-');
        if matches!(chars.get(j), Some('+' | '-')) {
            j += 1;
        }
        if j < chars.len() && chars[j].is_ascii_digit() {
            while j < chars.len() && chars[j].is_ascii_digit() {
                let d = i64::from(chars[j] as u8 - b'0');
                exp = exp
                    .saturating_mul(10)
                    .saturating_add(d)
                    .min(1_000_000_000_000_000_000);
                j += 1;
            }
            if negative {
                exp = -exp;
            }
            *i = j;
        }
    }
    let text: String = chars[start..*i].iter().collect();
    // The significant digits, without leading or trailing zeros, and the power of ten.
    let sig = digits.trim_start_matches('0');
    let trimmed = sig.trim_end_matches('0');
    let scale = exp - frac_len as i64 + (sig.len() - trimmed.len()) as i64;
    let sig = trimmed;
    if sig.is_empty() {
        return Ok(Kind::Number(BigRational::zero(), text));
    }
    let len = sig.len() as u64;
    let what = || format!("the number `{}`", clip(&text, EXCERPT_SIDE));
    if len > MAX_DIGITS {
        return Err(too_big(&what(), len as f64, pos));
    }
    if scale > 0 && len + scale as u64 > MAX_DIGITS {
        return Err(too_big(&what(), len as f64 + scale as f64, pos));
    }
    // The reduced denominator of sig / 10^s has at least s·log10(2) digits.
    if scale < 0 && (-scale) as f64 * std::f64::consts::LOG10_2 > MAX_DIGITS as f64 + 1.0 {
        return Err(too_big(&what(), (-scale) as f64, pos));
    }
    let n = BigInt::parse_bytes(sig.as_bytes(), 10).unwrap_or_default();
    let value = if scale >= 0 {
        BigRational::from_integer(n * ten_pow(scale as u64))
    } else {
        BigRational::new(n, ten_pow(scale.unsigned_abs()))
    };
    match exact(value, what, pos)? {
        Num::Exact(r) => Ok(Kind::Number(r, text)),
        Num::Approx(_) => unreachable!("exact() returns exact values"),
    }
}

fn lex(expr: &str) -> Result<Vec<Token>, CalcError> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let pos = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if let Some((day, len)) = date_at(&chars[i..]) {
            let text: String = chars[i..i + len].iter().collect();
            let day = day.ok_or_else(|| CalcError {
                message: format!("`{text}` is not a date of the calendar"),
                position: pos,
                hint: Some(DATE_HINT),
            })?;
            out.push(Token {
                kind: Kind::Date(day, text),
                pos,
            });
            i += len;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let kind = lex_number(&chars, &mut i)?;
            out.push(Token { kind, pos });
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            out.push(Token {
                kind: Kind::Ident(name.to_lowercase()),
                pos,
            });
            continue;
        }
        let kind = match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                i += 1;
                Kind::Op('^')
            }
            '+' | '-' | '*' | '/' | '%' | '^' | '!' => Kind::Op(c),
            '×' => Kind::Op('*'),
            '÷' => Kind::Op('/'),
            '−' => Kind::Op('-'),
            '(' => Kind::LParen,
            ')' => Kind::RParen,
            ',' => Kind::Comma,
            _ => {
                return err(
                    format!(
                        "unexpected character `{c}`; use numbers, + - * / % ^ !, parentheses and functions"
                    ),
                    pos,
                )
            }
        };
        out.push(Token { kind, pos });
        i += 1;
    }
    fold_dates(out)
}

/// When `chars` begins with a date `YYYY-MM-DD` (four digits, two, two, not followed by a
/// digit or a decimal point): its day number, `None` when it is no day of the calendar
/// (`2025-02-30`), and its length.
pub(crate) fn date_at(chars: &[char]) -> Option<(Option<i64>, usize)> {
    let digits = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = chars.get(r)?;
        part.iter().all(char::is_ascii_digit).then(|| {
            part.iter()
                .fold(0, |n, c| n * 10 + i64::from(*c as u8 - b'0'))
        })
    };
    let year = digits(0..4)?;
    if chars.get(4) != Some(&'-') || chars.get(7) != Some(&'-') {
        return None;
    }
    let (month, day) = (digits(5..7)?, digits(8..10)?);
    if chars
        .get(10)
        .is_some_and(|c| c.is_ascii_digit() || *c == '.')
    {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    };
    let valid = (1..=days_in_month).contains(&day);
    Some((valid.then(|| day_number(year, month, day)), 10))
}

/// Days from 1970-01-01 to the date (proleptic Gregorian calendar; negative before it).
fn day_number(year: i64, month: i64, day: i64) -> i64 {
    // Years counted from March, so the leap day ends the year (H. Hinnant's `days_from_civil`).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The tokens with each `DATE - DATE` made the number of days between the dates. The
/// difference must stand alone in its sum (after the start, `(`, `,` or `+`; before the end,
/// `)`, `,`, `+` or `-`), so that no operator around it binds to one date alone; any other
/// date is an error.
fn fold_dates(tokens: Vec<Token>) -> Result<Vec<Token>, CalcError> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let Kind::Date(first, text) = &tokens[i].kind else {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        };
        let pos = tokens[i].pos;
        let second = match (tokens.get(i + 1).map(|t| &t.kind), tokens.get(i + 2)) {
            (
                Some(Kind::Op('-')),
                Some(Token {
                    kind: Kind::Date(d, t),
                    ..
                }),
            ) => Some((*d, t)),
            _ => None,
        };
        let before_ok = matches!(
            out.last().map(|t| &t.kind),
            None | Some(Kind::LParen | Kind::Comma | Kind::Op('+'))
        );
        let after_ok = matches!(
            tokens.get(i + 3).map(|t| &t.kind),
            None | Some(Kind::RParen | Kind::Comma | Kind::Op('+' | '-'))
        );
        match second {
            Some((d, t)) if before_ok && after_ok => {
                let days = BigRational::from_integer(BigInt::from(first - d));
                out.push(Token {
                    kind: Kind::Number(days, format!("{text} - {t}")),
                    pos,
                });
                i += 3;
            }
            Some(_) => {
                return Err(CalcError {
                    message: format!(
                        "the difference of dates from `{text}` is next to an operator that \
                         would take one date alone"
                    ),
                    position: pos,
                    hint: Some(DATE_HINT),
                })
            }
            None => {
                return Err(CalcError {
                    message: format!("the date `{text}` can only have another date taken from it"),
                    position: pos,
                    hint: Some(DATE_HINT),
                })
            }
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next_pos(&self) -> usize {
        self.peek().map(|t| t.pos).unwrap_or(self.end)
    }

    fn eat_op(&mut self, ops: &[char]) -> Option<(char, usize)> {
        match self.peek() {
            Some(Token {
                kind: Kind::Op(c),
                pos,
            }) if ops.contains(c) => {
                let r = (*c, *pos);
                self.pos += 1;
                Some(r)
            }
            _ => None,
        }
    }

    fn enter(&mut self) -> Result<(), CalcError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return err(
                format!("the expression nests deeper than {MAX_DEPTH} levels"),
                self.next_pos(),
            );
        }
        Ok(())
    }

    // expr := term (('+'|'-') term)*
    fn expr(&mut self) -> Result<Num, CalcError> {
        self.enter()?;
        let mut acc = self.term()?;
        while let Some((op, pos)) = self.eat_op(&['+', '-']) {
            let rhs = self.term()?;
            acc = binary(op, acc, rhs, pos)?;
        }
        self.depth -= 1;
        Ok(acc)
    }

    // term := unary (('*'|'/'|'%') unary)*
    fn term(&mut self) -> Result<Num, CalcError> {
        let mut acc = self.unary()?;
        while let Some((op, pos)) = self.eat_op(&['*', '/', '%']) {
            let rhs = self.unary()?;
            acc = binary(op, acc, rhs, pos)?;
        }
        Ok(acc)
    }

    // unary := ('-'|'+')* power ; the signs are counted in a loop, not by recursion.
    fn unary(&mut self) -> Result<Num, CalcError> {
        let mut negate = false;
        while let Some((op, _)) = self.eat_op(&['-', '+']) {
            if op == '-' {
                negate = !negate;
            }
        }
        let v = self.power()?;
        if negate {
            return Ok(match v {
                Num::Exact(r) => Num::Exact(-r),
                Num::Approx(f) => Num::Approx(-f),
            });
        }
        Ok(v)
    }

    // power := postfix ('^' unary)?   (right-associative; the exponent may carry a sign)
    fn power(&mut self) -> Result<Num, CalcError> {
        let base = self.postfix()?;
        if let Some((_, pos)) = self.eat_op(&['^']) {
            self.enter()?;
            let exp = self.unary()?;
            self.depth -= 1;
            return power(base, exp, pos);
        }
        Ok(base)
    }

    // postfix := primary '!'?   (`n!!` is refused: it reads as a double factorial)
    fn postfix(&mut self) -> Result<Num, CalcError> {
        let v = self.primary()?;
        if let Some((_, pos)) = self.eat_op(&['!']) {
            if let Some((_, second)) = self.eat_op(&['!']) {
                return Err(CalcError {
                    message: "`!!` is not supported".into(),
                    position: second,
                    hint: Some("write (n!)! for the factorial of a factorial"),
                });
            }
            return factorial(&v, pos);
        }
        Ok(v)
    }

    fn primary(&mut self) -> Result<Num, CalcError> {
        let Some(tok) = self.tokens.get_mut(self.pos) else {
            return err("the expression ends where a number was expected", self.end);
        };
        // Each token is read once: take it rather than copy a big number.
        let tok = std::mem::replace(
            tok,
            Token {
                kind: Kind::Comma,
                pos: tok.pos,
            },
        );
        self.pos += 1;
        match tok.kind {
            Kind::Number(r, _) => Ok(Num::Exact(r)),
            Kind::LParen => {
                let v = self.expr()?;
                self.expect_rparen(tok.pos)?;
                Ok(v)
            }
            Kind::Ident(name) => {
                if self.peek().map(|t| &t.kind) == Some(&Kind::LParen) {
                    self.pos += 1;
                    self.call(&name, tok.pos)
                } else {
                    match name.as_str() {
                        "pi" | "π" => Ok(Num::Approx(std::f64::consts::PI)),
                        "e" => Ok(Num::Approx(std::f64::consts::E)),
                        _ if FUNCTIONS.contains(&name.as_str()) => err(
                            format!("the function `{name}` needs its arguments in parentheses, e.g. {name}(2)"),
                            tok.pos,
                        ),
                        _ => err(
                            format!(
                                "unknown name `{}`; constants: pi, e; functions: {}",
                                clip(&name, EXCERPT_SIDE),
                                FUNCTIONS.join(", ")
                            ),
                            tok.pos,
                        ),
                    }
                }
            }
            other => err(
                format!("expected a number, found {}", other.describe()),
                tok.pos,
            ),
        }
    }

    fn expect_rparen(&mut self, open_pos: usize) -> Result<(), CalcError> {
        match self.peek() {
            Some(Token {
                kind: Kind::RParen, ..
            }) => {
                self.pos += 1;
                Ok(())
            }
            Some(t) => err(
                format!(
                    "expected `)` to close the `(` at position {open_pos}, found {}",
                    t.kind.describe()
                ),
                t.pos,
            ),
            None => err(
                format!("missing `)` to close the `(` at position {open_pos}"),
                self.end,
            ),
        }
    }

    fn call(&mut self, name: &str, pos: usize) -> Result<Num, CalcError> {
        if !FUNCTIONS.contains(&name) {
            return err(
                format!(
                    "unknown function `{}`; functions: {}",
                    clip(name, EXCERPT_SIDE),
                    FUNCTIONS.join(", ")
                ),
                pos,
            );
        }
        let mut args = Vec::new();
        if self.peek().map(|t| &t.kind) != Some(&Kind::RParen) {
            loop {
                args.push(self.expr()?);
                match self.peek().map(|t| &t.kind) {
                    Some(Kind::Comma) => self.pos += 1,
                    _ => break,
                }
            }
        }
        self.expect_rparen(pos + name.chars().count())?;
        apply(name, &args, pos)
    }
}

/// Orders two values: exactly when both are exact.
fn compare(a: &Num, b: &Num) -> Ordering {
    match (a, b) {
        (Num::Exact(x), Num::Exact(y)) => x.cmp(y),
        _ => a
            .as_f64()
            .partial_cmp(&b.as_f64())
            .unwrap_or(Ordering::Equal),
    }
}

fn apply(name: &str, args: &[Num], pos: usize) -> Result<Num, CalcError> {
    let arity = |range: std::ops::RangeInclusive<usize>| -> Result<(), CalcError> {
        if range.contains(&args.len()) {
            return Ok(());
        }
        let (lo, hi) = (*range.start(), *range.end());
        let want = if lo == hi {
            format!("{lo} argument{}", if lo == 1 { "" } else { "s" })
        } else {
            format!("{lo} or {hi} arguments")
        };
        err(format!("`{name}` takes {want}, got {}", args.len()), pos)
    };
    match name {
        "min" | "max" | "gcd" | "lcm" => {
            let Some(first) = args.first() else {
                return err(format!("`{name}` needs at least one argument"), pos);
            };
            if name == "gcd" || name == "lcm" {
                return gcd_lcm(name, args, pos);
            }
            let mut best = first;
            for a in &args[1..] {
                let order = compare(a, best);
                if (name == "min" && order == Ordering::Less)
                    || (name == "max" && order == Ordering::Greater)
                {
                    best = a;
                }
            }
            Ok(best.clone())
        }
        "round" | "floor" | "ceil" => {
            arity(1..=2)?;
            rounding(name, &args[0], args.get(1), pos)
        }
        _ => {
            arity(1..=1)?;
            let a = &args[0];
            match name {
                "abs" => Ok(match a {
                    Num::Exact(r) => Num::Exact(r.abs()),
                    Num::Approx(f) => Num::Approx(f.abs()),
                }),
                "factorial" => factorial(a, pos),
                "sqrt" => sqrt(a, pos),
                "ln" | "log10" => log(name, a, pos),
                "exp" if a.is_zero() => Ok(Num::from(1i64)),
                "exp" => float_result(
                    to_float(a, pos)?.exp(),
                    || format!("exp({})", brief(a)),
                    pos,
                ),
                "sin" | "tan" if a.is_zero() => Ok(Num::from(0i64)),
                "cos" if a.is_zero() => Ok(Num::from(1i64)),
                "sin" => float_result(to_float(a, pos)?.sin(), || "sin".into(), pos),
                "cos" => float_result(to_float(a, pos)?.cos(), || "cos".into(), pos),
                "tan" => float_result(to_float(a, pos)?.tan(), || "tan".into(), pos),
                _ => err(format!("unknown function `{name}`"), pos),
            }
        }
    }
}

/// `gcd(...)` or `lcm(...)` of whole numbers.
fn gcd_lcm(name: &str, args: &[Num], pos: usize) -> Result<Num, CalcError> {
    let mut acc: Option<BigInt> = None;
    for a in args {
        let Some(n) = a.to_integer() else {
            return err(
                format!("`{name}` needs whole numbers, got {}", brief(a)),
                pos,
            );
        };
        acc = Some(match acc {
            None => n.abs(),
            Some(m) if name == "gcd" => m.gcd(&n),
            Some(m) => {
                let l = m.lcm(&n);
                exact(
                    BigRational::from_integer(l.clone()),
                    || "the lcm".into(),
                    pos,
                )?;
                l
            }
        });
    }
    Ok(Num::from(acc.unwrap_or_default()))
}

/// `round`, `floor` or `ceil` of `x`, to `digits` decimal places (0 by default; negative for
/// tens, hundreds...). An exact value stays exact; so does a float rounded to at most 53 bits.
fn rounding(name: &str, x: &Num, digits: Option<&Num>, pos: usize) -> Result<Num, CalcError> {
    let d: i64 = match digits {
        None => 0,
        Some(n) => match n.to_integer().and_then(|i| i.to_i64()) {
            Some(d) if d.unsigned_abs() <= MAX_DIGITS => d,
            _ => {
                return err(
                    format!(
                        "the digits of `{name}` must be a whole number from -{MAX_DIGITS} to {MAX_DIGITS}, got {}",
                        brief(n)
                    ),
                    pos,
                )
            }
        },
    };
    let round = |r: &BigRational| -> BigRational {
        match name {
            // Half away from zero, as people round by hand.
            "round" => r.round(),
            "floor" => r.floor(),
            _ => r.ceil(),
        }
    };
    let scale = BigRational::from_integer(ten_pow(d.unsigned_abs()));
    let (up, down) = if d >= 0 {
        (scale.clone(), scale.recip())
    } else {
        (scale.recip(), scale)
    };
    let (value, from_float) = match x {
        Num::Exact(r) => (r.clone(), false),
        Num::Approx(f) => match BigRational::from_float(*f) {
            Some(r) => (r, true),
            None => {
                return err(
                    format!("`{name}` of {} is not a finite number", brief(x)),
                    pos,
                )
            }
        },
    };
    let whole = round(&(value * up));
    // A float rounded to a whole number of units below 2^53 is exactly that decimal (3.14 for
    // round(pi, 2)); past that its digits are float noise, so it stays a float.
    if from_float && whole.numer().bits() > 53 {
        let f = (whole * down).to_f64().unwrap_or(f64::NAN);
        return float_result(f, || format!("`{name}`"), pos);
    }
    exact(whole * down, || format!("`{name}`"), pos)
}

/// `n!` of a whole `n ≥ 0`, sized by Stirling's formula before it is computed.
fn factorial(a: &Num, pos: usize) -> Result<Num, CalcError> {
    let n = match a.to_integer() {
        Some(n) if !n.is_negative() => n,
        _ => {
            return err(
                format!("factorial needs a whole number 0 or more, got {}", brief(a)),
                pos,
            )
        }
    };
    let what = format!("factorial({})", brief(a));
    let Some(n) = n.to_u64() else {
        return Err(too_big(&what, f64::INFINITY, pos));
    };
    let digits = if n < 2 {
        1.0
    } else {
        let x = n as f64;
        (x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x))
            / std::f64::consts::LN_10
            + 1.0
    };
    if digits > MAX_DIGITS as f64 + 1.0 {
        return Err(too_big(&what, digits, pos));
    }
    let mut acc = BigInt::one();
    for k in 2..=n {
        acc *= k;
    }
    exact(BigRational::from_integer(acc), || what, pos)
}

/// The square root: exact for a square fraction, else a float from a 60-bit integer root.
fn sqrt(a: &Num, pos: usize) -> Result<Num, CalcError> {
    let r = match a {
        Num::Approx(x) if *x < 0.0 => {
            return err(format!("sqrt of a negative number ({})", brief(a)), pos)
        }
        Num::Approx(x) => return float_result(x.sqrt(), || "sqrt".into(), pos),
        Num::Exact(r) => r,
    };
    if r.is_negative() {
        return err(format!("sqrt of a negative number ({})", brief(a)), pos);
    }
    let (p, q) = (r.numer(), r.denom());
    let (sp, sq) = (p.sqrt(), q.sqrt());
    if &(&sp * &sp) == p && &(&sq * &sq) == q {
        return Ok(Num::Exact(BigRational::new(sp, sq)));
    }
    // sqrt(p/q) = isqrt(p·4^j / q) / 2^j, with j chosen for a root of about 60 bits.
    let j = (120 + q.bits() as i64 - p.bits() as i64).div_euclid(2);
    let scaled = if j >= 0 {
        (p << (2 * j as u64)) / q
    } else {
        p / (q << (2 * j.unsigned_abs()))
    };
    let root = scaled.sqrt();
    let two_j = BigInt::one() << j.unsigned_abs();
    let value = if j >= 0 {
        BigRational::new(root, two_j)
    } else {
        BigRational::from_integer(root * two_j)
    };
    float_result(value.to_f64().unwrap_or(f64::NAN), || "sqrt".into(), pos)
}

/// `ln` or `log10`: exact for `ln(1)` and for `log10` of a power of ten.
fn log(name: &str, a: &Num, pos: usize) -> Result<Num, CalcError> {
    let positive = match a {
        Num::Exact(r) => r.is_positive(),
        Num::Approx(x) => *x > 0.0,
    };
    if !positive {
        return err(
            format!(
                "{name} of {}: the logarithm needs a number above 0",
                brief(a)
            ),
            pos,
        );
    }
    let ln = match a {
        Num::Approx(x) if name == "ln" => return float_result(x.ln(), || name.into(), pos),
        Num::Approx(x) => return float_result(x.log10(), || name.into(), pos),
        Num::Exact(r) => {
            if r.is_one() {
                return Ok(Num::from(0i64));
            }
            if name == "log10" {
                if r.denom().is_one() {
                    if let Some(k) = power_of_ten(r.numer()) {
                        return Ok(Num::from(k as i64));
                    }
                } else if r.numer().is_one() {
                    if let Some(k) = power_of_ten(r.denom()) {
                        return Ok(Num::from(-(k as i64)));
                    }
                }
                if let Some(f) = r.to_f64().filter(|f| f.is_normal()) {
                    if !(0.5..2.0).contains(&f) {
                        return float_result(f.log10(), || name.into(), pos);
                    }
                }
            }
            ln_rat(r)
        }
    };
    let v = if name == "ln" {
        ln
    } else {
        ln / std::f64::consts::LN_10
    };
    float_result(v, || name.into(), pos)
}

/// `a ^ b`: exact for an exact base and an integer exponent, or a fractional exponent whose
/// root is exact; a float otherwise.
fn power(a: Num, b: Num, pos: usize) -> Result<Num, CalcError> {
    if let (Num::Exact(x), Num::Exact(y)) = (&a, &b) {
        if y.is_integer() {
            return int_power(x, y.numer(), pos);
        }
        return rational_power(x, y, pos);
    }
    let x = to_float(&a, pos)?;
    let y = to_float(&b, pos)?;
    let what = || format!("{} ^ {}", brief(&a), brief(&b));
    if x == 0.0 && y < 0.0 {
        return err(format!("division by zero ({})", what()), pos);
    }
    float_result(x.powf(y), what, pos)
}

/// `x ^ n` exactly, sized before it is computed.
fn int_power(x: &BigRational, n: &BigInt, pos: usize) -> Result<Num, CalcError> {
    let what = || {
        format!(
            "{} ^ {}",
            brief_rat(x),
            brief_rat(&BigRational::from_integer(n.clone()))
        )
    };
    if x.is_zero() {
        return match n.sign() {
            Sign::Plus => Ok(Num::from(0i64)),
            Sign::NoSign => Ok(Num::from(1i64)),
            Sign::Minus => err(format!("division by zero ({})", what()), pos),
        };
    }
    if n.is_zero() {
        return Ok(Num::from(1i64));
    }
    if x.denom().is_one() && x.numer().magnitude().is_one() {
        let minus = x.is_negative() && n.is_odd();
        return Ok(Num::from(if minus { -1i64 } else { 1 }));
    }
    // The larger of numerator and denominator sets the size: |n| · log10 of it.
    let size = log10_abs(x.numer()).max(log10_abs(x.denom()));
    let times = n.magnitude().to_f64().unwrap_or(f64::INFINITY);
    let digits = times * size + 1.0;
    if digits > MAX_DIGITS as f64 + 1.0 {
        return Err(too_big(&what(), digits, pos));
    }
    let Some(e) = n.magnitude().to_u32() else {
        return Err(too_big(&what(), digits, pos));
    };
    let (p, q) = (x.numer().pow(e), x.denom().pow(e));
    let r = if n.is_positive() {
        BigRational::new(p, q)
    } else {
        BigRational::new(q, p)
    };
    exact(r, what, pos)
}

/// `x ^ (m/k)` for `k ≥ 2`: exact when `x` is a perfect `k`-th power, a float otherwise.
fn rational_power(x: &BigRational, y: &BigRational, pos: usize) -> Result<Num, CalcError> {
    let (m, k) = (y.numer(), y.denom());
    let what = || format!("{} ^ {}", brief_rat(x), brief_rat(y));
    if x.is_zero() {
        return if m.is_positive() {
            Ok(Num::from(0i64))
        } else {
            err(format!("division by zero ({})", what()), pos)
        };
    }
    if x.is_negative() && k.is_even() {
        return err(
            format!(
                "{} is not a real number (an even root of a negative number)",
                what()
            ),
            pos,
        );
    }
    if let Some(k32) = k.to_u32() {
        let p = x.numer().abs();
        let q = x.denom();
        let (rp, rq) = (p.nth_root(k32), q.nth_root(k32));
        // Both roots are at most the numbers themselves, so these powers stay small.
        if rp.pow(k32) == p && &rq.pow(k32) == q {
            let rp = if x.is_negative() { -rp } else { rp };
            return int_power(&BigRational::new(rp, rq), m, pos);
        }
    }
    let yf = y.to_f64().unwrap_or(f64::NAN);
    let ax = x.abs();
    let magnitude = match ax.to_f64().filter(|f| f.is_normal()) {
        Some(f) => f.powf(yf),
        None => (yf * ln_rat(&ax)).exp(),
    };
    // An odd root of a negative number is negative; raised to an even power, positive.
    let sign = if x.is_negative() && m.is_odd() {
        -1.0
    } else {
        1.0
    };
    float_result(sign * magnitude, what, pos)
}

fn binary(op: char, a: Num, b: Num, pos: usize) -> Result<Num, CalcError> {
    if (op == '/' || op == '%') && b.is_zero() {
        return err(
            format!("division by zero ({} {op} {})", brief(&a), brief(&b)),
            pos,
        );
    }
    match (&a, &b) {
        (Num::Exact(x), Num::Exact(y)) => {
            let r = match op {
                '+' => x + y,
                '-' => x - y,
                '*' => x * y,
                '/' => x / y,
                // The remainder keeps the sign of the dividend: x - y·trunc(x/y).
                _ => x - y * (x / y).trunc(),
            };
            exact(r, || format!("{} {op} {}", brief(&a), brief(&b)), pos)
        }
        _ => {
            let (x, y) = (to_float(&a, pos)?, to_float(&b, pos)?);
            let r = match op {
                '+' => x + y,
                '-' => x - y,
                '*' => x * y,
                '/' => x / y,
                _ => x % y,
            };
            float_result(r, || format!("{} {op} {}", brief(&a), brief(&b)), pos)
        }
    }
}

/// The arguments of `calculator`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalculatorArgs {
    /// One arithmetic expression.
    pub expression: String,
}

/// The `calculator` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct CalculatorTool;

impl Tool for CalculatorTool {
    fn name(&self) -> &str {
        "calculator"
    }

    fn description(&self) -> String {
        "Evaluates one arithmetic expression: + - * / % ^ ! (factorial), parentheses, sqrt ln \
         log10 exp abs round floor ceil min max sin cos tan factorial gcd lcm, constants pi and \
         e. Whole numbers, decimals and fractions are exact up to 1000 digits; a fraction shows \
         its decimal rounded to 12 digits, then its exact value: 1/3 gives \
         ≈ 0.333333333333 (exactly 1/3). A result that is only ≈ and a number is floating \
         point (sqrt(2), pi, logs, trig). Use it for any arithmetic instead of computing in \
         your head."
            .into()
    }

    fn args_schema(&self) -> Value {
        let mut schema = schema_of::<CalculatorArgs>();
        if let Some(e) = schema
            .pointer_mut("/properties/expression")
            .and_then(Value::as_object_mut)
        {
            e.insert("pattern".into(), Value::String(expression_pattern()));
        }
        schema
    }

    /// Calls are checked without the pattern: the calculator's own error names the position
    /// of what it cannot read.
    fn call_schema(&self) -> Option<Value> {
        Some(schema_of::<CalculatorArgs>())
    }

    fn run(&self, args: &Value) -> Result<Observation, ToolError> {
        let args: CalculatorArgs = parse_args(args)?;
        match evaluate(&args.expression) {
            Ok(v) => Ok(Observation::new(v.to_string())),
            Err(e) => Err(ToolError::invalid(format!(
                "cannot evaluate {}: {e}",
                excerpt(&args.expression, e.position)
            ))
            .with_hint(e.hint.unwrap_or(GENERAL_HINT))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> String {
        evaluate(s)
            .map(|v| v.to_string())
            .unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn fails(s: &str) -> CalcError {
        match evaluate(s) {
            Ok(v) => panic!("{s} gave {v}"),
            Err(e) => e,
        }
    }

    #[test]
    fn integers_stay_exact() {
        assert_eq!(ok("1234*5678"), "7006652");
        assert_eq!(ok("2^20"), "1048576");
        assert_eq!(ok("2**10"), "1024");
        assert_eq!(ok("-2^2"), "-4");
        assert_eq!(ok("2^3^2"), "512");
        assert_eq!(ok("7/2"), "3.5");
        assert_eq!(ok("8/2"), "4");
        assert_eq!(ok("0.1+0.2"), "0.3");
        assert_eq!(ok("sqrt(16)"), "4");
        assert_eq!(ok("round(2.5)"), "3");
        assert_eq!(ok("max(1, 7, 3)"), "7");
        assert_eq!(ok("2^-1"), "0.5");
        assert_eq!(ok("17 % 5"), "2");
        // Issue 16: 2^200 was the float 1.60693804426e60.
        assert_eq!(
            ok("2^200"),
            "1606938044258990275541962092341162602522202993782792835301376"
        );
    }

    /// Regression: "How many days after it was placed was order 10259 shipped?" (placed
    /// 2025-09-08, shipped 2025-09-11) was answered "11 days", the day of the month, and then
    /// `20 - 12`: the calculator read a date as `2025 - 9 - 11`.
    #[test]
    fn the_days_between_two_dates_are_their_difference() {
        assert_eq!(ok("2025-09-11 - 2025-09-08"), "3");
        assert_eq!(ok("2025-09-08 - 2025-09-11"), "-3");
        // Across months, a leap day, years, and in parentheses to compute with.
        assert_eq!(ok("2025-03-01 - 2025-02-28"), "1");
        assert_eq!(ok("2024-03-01 - 2024-02-28"), "2");
        assert_eq!(ok("2026-01-06 - 2025-12-28"), "9");
        assert_eq!(ok("2000-01-01 - 1970-01-01"), "10957");
        assert_eq!(ok("(2025-09-11 - 2025-09-08) * 24"), "72");
        assert_eq!(ok("2025-09-11 - 2025-09-08 - 1"), "2");
        assert_eq!(ok("10 + 2025-09-11 - 2025-09-08"), "13");
        assert_eq!(ok("max(2025-09-11 - 2025-09-08, 5)"), "5");
        // Not dates: a number with a decimal point or more digits, and plain subtraction.
        assert_eq!(ok("2025-09-110"), "1906");
        assert_eq!(ok("2025 - 9 - 11"), "2005");
    }

    #[test]
    fn a_date_is_only_ever_taken_from_another() {
        for (expr, at) in [
            ("2025-09-11", 1),
            ("2025-09-11 + 2025-09-08", 1),
            ("2025-09-11 - 3", 1),
            ("2 * 2025-09-11 - 2025-09-08", 5),
            ("2025-09-11 - 2025-09-08 * 2", 1),
            ("10 - 2025-09-11 - 2025-09-08", 6),
        ] {
            let e = fails(expr);
            assert_eq!(e.position, at, "{expr}: {e}");
            assert_eq!(e.hint, Some(DATE_HINT), "{expr}");
        }
        let e = fails("2025-02-30 - 2025-02-01");
        assert!(e.message.contains("`2025-02-30` is not a date"), "{e}");
        // The tool's error names the date and says how to use one.
        let err = CalculatorTool
            .run(&serde_json::json!({"expression": "2025-09-11 * 2"}))
            .unwrap_err()
            .to_observation_text();
        assert!(
            err.contains("2025-09-11") && err.contains("days between"),
            "{err}"
        );
    }

    #[test]
    fn big_and_small_values_are_exact() {
        // Issue 16: these were rounded through f64 (1e55, 1.7014118346e38, 1e39, 0).
        assert_eq!(
            ok("99999999999999999999999999999*99999999999999999999999999"),
            "9999999999999999999999999899900000000000000000000000001"
        );
        assert_eq!(ok("2^127"), "170141183460469231731687303715884105728");
        assert_eq!(ok("10^39+1"), "1000000000000000000000000000000000000001");
        assert_eq!(ok("1/10^400"), "1e-400");
        assert_eq!(ok("3/10^20"), "3e-20");
        assert_eq!(ok("-1.25e-12"), "-1.25e-12");
        assert_eq!(ok("0.000001"), "0.000001");
        // 2^-1075 is 752 significant digits, written out exactly in scientific notation.
        let tiny = ok("2^-1075");
        assert!(tiny.starts_with("2.4703282292062327208828439643"), "{tiny}");
        assert!(tiny.ends_with("98591327667236328125e-324"), "{tiny}");
        assert_eq!(tiny.len(), 758);
        // A longer exact decimal is shown as the fraction and its rounding.
        let tinier = ok("2^-3000");
        assert!(
            tinier.starts_with("≈ 8.12854862556e-904 (exactly 1/"),
            "{tinier}"
        );
        assert_eq!(ok("2^-1075 * 2^1075"), "1");
    }

    #[test]
    fn fractions_show_the_exact_value_and_a_rounded_decimal() {
        assert_eq!(ok("1/3"), "≈ 0.333333333333 (exactly 1/3)");
        assert_eq!(ok("-2/3"), "≈ -0.666666666667 (exactly -2/3)");
        assert_eq!(ok("1/3*3"), "1");
        assert_eq!(
            ok("10^20/3"),
            "≈ 3.33333333333e19 (exactly 100000000000000000000/3)"
        );
        assert_eq!(ok("(1/3)^2"), "≈ 0.111111111111 (exactly 1/9)");
        assert_eq!(ok("1/7 % (1/21)"), "0");
        assert_eq!(ok("-7.5 % 2"), "-1.5");
    }

    #[test]
    fn irrational_results_are_marked_approximate() {
        assert_eq!(ok("sqrt(2)"), "≈ 1.41421356237");
        assert_eq!(ok("pi"), "≈ 3.14159265359");
        assert_eq!(ok("2^0.5"), "≈ 1.41421356237");
        assert_eq!(ok("ln(10)"), "≈ 2.30258509299");
        assert_eq!(ok("sqrt(10^600 * 2)"), "≈ 1.41421356237e300");
        assert_eq!(ok("log10(10^500 * 2)"), "≈ 500.301029996");
        assert_eq!(ok("ln(1 + 10^-30)"), "≈ 1e-30");
        // Exact where the answer is rational.
        assert_eq!(ok("sqrt(2.25)"), "1.5");
        assert_eq!(ok("8^(1/3)"), "2");
        assert_eq!(ok("(-8)^(1/3)"), "-2");
        assert_eq!(ok("27^(2/3)"), "9");
        assert_eq!(ok("(-2)^(1/3)"), "≈ -1.25992104989");
        assert_eq!(ok("log10(0.001)"), "-3");
        assert_eq!(ok("ln(1)"), "0");
        assert_eq!(ok("exp(0) + sin(0) + cos(0)"), "2");
        assert_eq!(ok("round(pi * 100) / 100"), "3.14");
        assert_eq!(ok("round(pi, 4)"), "3.1416");
        assert_eq!(ok("floor(-2.5)"), "-3");
        assert_eq!(ok("round(2/3, 3)"), "0.667");
        assert_eq!(ok("round(1234.5, -2)"), "1200");
        // A float rounded past its precision stays a float, never NaN or fake digits.
        assert_eq!(ok("round(pi, 20)"), "≈ 3.14159265359");
        assert_eq!(ok("round(1e-300 * pi, 1000)"), "≈ 3.14159265359e-300");
        assert_eq!(ok("floor(10^20 * pi)"), "≈ 3.14159265359e20");
    }

    #[test]
    fn factorials_gcd_and_lcm() {
        assert_eq!(ok("5!"), "120");
        assert_eq!(ok("factorial(0)"), "1");
        assert_eq!(ok("-3!"), "-6");
        assert_eq!(ok("2^3!"), "64");
        assert_eq!(ok("25!"), "15511210043330985984000000");
        assert_eq!(ok("gcd(12, 18, -30)"), "6");
        assert_eq!(ok("lcm(4, 6)"), "12");
        assert!(fails("3!!").message.contains("`!!`"));
        assert!(fails("2.5!").message.contains("whole number"));
        assert!(fails("(-1)!").message.contains("whole number"));
        assert!(fails("gcd(1.5, 2)").message.contains("whole numbers"));
    }

    #[test]
    fn huge_results_are_refused_before_they_are_computed() {
        for expr in [
            "10^10^10",
            "2^(2^40)",
            "factorial(100000)",
            "100000!",
            "factorial(10^30)",
            "2^99999",
            "(1/3)^99999",
            "7^(10^30 + 1/2)",
            "10^999 * 10^999",
            "1e1001",
            "1e-99999999999999999999999",
            "round(1, 1001)",
        ] {
            let start = std::time::Instant::now();
            let e = fails(expr);
            assert!(
                start.elapsed().as_secs() < 2,
                "{expr} took {:?}",
                start.elapsed()
            );
            assert!(
                e.message.contains("1000 digits")
                    || e.message.contains("floating point")
                    || e.message.contains("from -1000 to 1000"),
                "{expr}: {e}"
            );
        }
        let e = fails("factorial(100000)");
        assert!(e.message.contains("about 456574 digits"), "{e}");
        assert_eq!(e.hint, Some(SIZE_HINT));
        // At the limit itself, still exact.
        assert_eq!(ok("10^999").len(), 1000);
        assert!(fails("10^1000").message.contains("1001 digits"));
        assert_eq!(ok("(-1)^(10^100)"), "1");
        assert_eq!(ok("0^(10^100)"), "0");
    }

    #[test]
    fn errors_carry_positions() {
        let e = evaluate("1/0").unwrap_err();
        assert!(e.message.contains("division by zero"), "{e}");
        assert_eq!(e.position, 2);
        assert!(fails("0^-1").message.contains("division by zero"));
        assert!(fails("sqrt(-1)").message.contains("negative"));
        assert!(fails("(-8)^(1/2)").message.contains("not a real number"));
        assert!(fails("exp(1000)").message.contains("floating point"));
        assert!(evaluate("((").is_err());
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(fails(&deep).message.contains("nests deeper"));
        let signs = format!("{}1", "-".repeat(100_000));
        assert_eq!(ok(&signs), "1");
    }

    #[test]
    fn messages_and_excerpts_stay_short() {
        let long_name = format!("1 + {}", "x".repeat(80_000));
        let e = fails(&long_name);
        assert!(e.message.len() < 400, "{}", e.message.len());
        let long_number = format!("{} +", "9".repeat(900));
        let e = fails(&long_number);
        assert!(e.message.len() < 400, "{}", e.message.len());
        let expr = format!("{}+*{}", "1+".repeat(20_000), "1+".repeat(20_000));
        let e = fails(&expr);
        let cited = excerpt(&expr, e.position);
        assert!(cited.chars().count() < 2 * EXCERPT_SIDE + 60, "{cited}");
        assert!(cited.contains("+*") && cited.contains('…'), "{cited}");
        assert_eq!(excerpt("1 +", 4), "`1 +`");
    }
    #[test]
    fn the_expression_pattern_takes_what_the_calculator_reads_and_nothing_else() {
        let re = regex::RegexBuilder::new(&expression_pattern())
            .size_limit(1 << 30)
            .build()
            .unwrap();
        for ok in [
            "17 * 23",
            "(12 + 8) * 3",
            "sqrt(144)",
            "2^10",
            "2 ** 10",
            "1.5e-3 * 4",
            "max(3, 4) / 2",
            "85 * 0.80 + 52.50",
            "5!",
            "-3 % 2",
            "7 × 6",
            ".5 + pi",
        ] {
            assert!(re.is_match(ok), "{ok}");
            assert!(evaluate(ok).is_ok(), "{ok}");
        }
        let long = vec!["2"; MAX_EXPRESSION_UNITS].join(" * ");
        assert!(!re.is_match(&long));
        for bad in [
            "10 * 10 ounces/egg",
            "840 pounds / 7 days",
            "25 - 5 = 20",
            "7 x 6",
            "$12 + 3",
            "",
        ] {
            assert!(!re.is_match(bad), "{bad}");
        }
    }
}
