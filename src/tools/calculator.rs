//! The `calculator` tool: arithmetic on one expression, with exact integers.
//!
//! Grammar (design.md): numbers, `+ - * / % ^` (`**` is read as `^`), parentheses, the
//! functions `sqrt ln log10 exp abs round floor ceil min max sin cos tan`, and the constants
//! `pi` and `e`. `^` binds tightest and to the right; unary minus binds looser than `^`, so
//! `-2^2` is `-4`.
//!
//! Values are [`Num::Int`] (an `i128`) while every step stays an exact integer — `1234*5678`
//! prints `7006652` and `2^20` prints `1048576`, never `1048576.0` — and [`Num::Float`]
//! otherwise. An integer result too large for `i128` continues as a float while it is finite.
//! Floats are printed rounded to 12 significant digits so that `0.1+0.2` prints `0.3`.
//! Division by zero, overflow, domain errors (`sqrt(-1)`), unknown names and bad syntax are
//! [`CalcError`]s carrying the 1-based character position they refer to.
//!
//! The parser is recursive descent with a nesting limit ([`MAX_DEPTH`]), so 10 000 nested
//! parentheses are an error, never a stack overflow.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{parse_args, schema_of, Observation, Tool, ToolError};

/// How deeply parentheses and function calls may nest.
pub const MAX_DEPTH: usize = 200;

/// A calculator value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    /// An exact integer.
    Int(i128),
    /// A floating-point number (finite).
    Float(f64),
}

impl Num {
    /// The value as a float.
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Num::Int(i) => write!(f, "{i}"),
            Num::Float(x) => f.write_str(&format_float(*x)),
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

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at position {position}")]
pub struct CalcError {
    /// What went wrong, naming the bad value.
    pub message: String,
    /// The 1-based character position in the expression.
    pub position: usize,
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
        return Err(CalcError {
            message: "the expression is empty".into(),
            position: 1,
        });
    }
    let v = p.expr()?;
    if let Some(t) = p.peek() {
        return Err(CalcError {
            message: format!("unexpected {}", t.kind.describe()),
            position: t.pos,
        });
    }
    Ok(v)
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Int(i128),
    Float(f64),
    Ident(String),
    Op(char),
    LParen,
    RParen,
    Comma,
}

impl Kind {
    fn describe(&self) -> String {
        match self {
            Kind::Int(i) => format!("number `{i}`"),
            Kind::Float(f) => format!("number `{f}`"),
            Kind::Ident(s) => format!("name `{s}`"),
            Kind::Op(c) => format!("`{c}`"),
            Kind::LParen => "`(`".into(),
            Kind::RParen => "`)`".into(),
            Kind::Comma => "`,`".into(),
        }
    }
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    pos: usize,
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
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '_') {
                i += 1;
            }
            let mut is_float = false;
            if i < chars.len() && chars[i] == '.' {
                is_float = true;
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let mut j = i + 1;
                if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    is_float = true;
                    i = j;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text: String = chars[start..i].iter().filter(|c| **c != '_').collect();
            let kind = if is_float {
                match text.parse::<f64>() {
                    Ok(f) if f.is_finite() => Kind::Float(f),
                    _ => {
                        return Err(CalcError {
                            message: format!("the number `{text}` is out of range"),
                            position: pos,
                        })
                    }
                }
            } else {
                match text.parse::<i128>() {
                    Ok(n) => Kind::Int(n),
                    Err(_) => match text.parse::<f64>() {
                        Ok(f) if f.is_finite() => Kind::Float(f),
                        _ => {
                            return Err(CalcError {
                                message: format!("the number `{text}` is out of range"),
                                position: pos,
                            })
                        }
                    },
                }
            };
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
                kind: Kind::Ident(name.to_ascii_lowercase()),
                pos,
            });
            continue;
        }
        let kind = match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                i += 1;
                Kind::Op('^')
            }
            '+' | '-' | '*' | '/' | '%' | '^' => Kind::Op(c),
            '×' => Kind::Op('*'),
            '÷' => Kind::Op('/'),
            '−' => Kind::Op('-'),
            '(' => Kind::LParen,
            ')' => Kind::RParen,
            ',' => Kind::Comma,
            _ => {
                return Err(CalcError {
                    message: format!(
                        "unexpected character `{c}`; use numbers, + - * / % ^, parentheses and functions"
                    ),
                    position: pos,
                })
            }
        };
        out.push(Token { kind, pos });
        i += 1;
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
    end: usize,
}

const FUNCTIONS: &[&str] = &[
    "sqrt", "ln", "log10", "exp", "abs", "round", "floor", "ceil", "min", "max", "sin", "cos",
    "tan",
];

fn err<T>(message: impl Into<String>, position: usize) -> Result<T, CalcError> {
    Err(CalcError {
        message: message.into(),
        position,
    })
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
        let pos = self.next_pos();
        let v = self.power()?;
        if negate {
            return match v {
                Num::Int(i) => i
                    .checked_neg()
                    .map(Num::Int)
                    .map_or_else(|| err("overflow in negation", pos), Ok),
                Num::Float(f) => Ok(Num::Float(-f)),
            };
        }
        Ok(v)
    }

    // power := primary ('^' unary)?   (right-associative; the exponent may carry a sign)
    fn power(&mut self) -> Result<Num, CalcError> {
        let base = self.primary()?;
        if let Some((_, pos)) = self.eat_op(&['^']) {
            self.enter()?;
            let exp = self.unary()?;
            self.depth -= 1;
            return binary('^', base, exp, pos);
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<Num, CalcError> {
        let Some(tok) = self.peek().cloned() else {
            return err("the expression ends where a number was expected", self.end);
        };
        self.pos += 1;
        match tok.kind {
            Kind::Int(i) => Ok(Num::Int(i)),
            Kind::Float(f) => Ok(Num::Float(f)),
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
                        "pi" => Ok(Num::Float(std::f64::consts::PI)),
                        "e" => Ok(Num::Float(std::f64::consts::E)),
                        _ if FUNCTIONS.contains(&name.as_str()) => err(
                            format!("the function `{name}` needs its arguments in parentheses, e.g. {name}(2)"),
                            tok.pos,
                        ),
                        _ => err(
                            format!(
                                "unknown name `{name}`; constants: pi, e; functions: {}",
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
                    "unknown function `{name}`; functions: {}",
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

fn float_result(x: f64, what: &str, pos: usize) -> Result<Num, CalcError> {
    if x.is_finite() {
        Ok(Num::Float(x))
    } else if x.is_nan() {
        err(format!("{what} is not a real number"), pos)
    } else {
        err(format!("overflow: {what} is too large"), pos)
    }
}

/// An integer-valued float back to an exact integer when it fits.
fn to_int_if_whole(x: f64) -> Num {
    if x.fract() == 0.0 && x.abs() < 1e30 {
        Num::Int(x as i128)
    } else {
        Num::Float(x)
    }
}

fn apply(name: &str, args: &[Num], pos: usize) -> Result<Num, CalcError> {
    let arity = |n: usize| -> Result<(), CalcError> {
        if args.len() != n {
            return err(
                format!(
                    "`{name}` takes {n} argument{}, got {}",
                    if n == 1 { "" } else { "s" },
                    args.len()
                ),
                pos,
            );
        }
        Ok(())
    };
    match name {
        "min" | "max" => {
            let Some(first) = args.first() else {
                return err(format!("`{name}` needs at least one argument"), pos);
            };
            let mut best = *first;
            for a in &args[1..] {
                let better = if name == "min" {
                    a.as_f64() < best.as_f64()
                } else {
                    a.as_f64() > best.as_f64()
                };
                if better {
                    best = *a;
                }
            }
            Ok(best)
        }
        _ => {
            arity(1)?;
            let a = args[0];
            let x = a.as_f64();
            match name {
                "abs" => match a {
                    Num::Int(i) => i
                        .checked_abs()
                        .map(Num::Int)
                        .map_or_else(|| err("overflow in abs", pos), Ok),
                    Num::Float(f) => Ok(Num::Float(f.abs())),
                },
                "round" | "floor" | "ceil" => match a {
                    Num::Int(_) => Ok(a),
                    Num::Float(f) => {
                        let r = match name {
                            // Half away from zero, as people round by hand.
                            "round" => f.round(),
                            "floor" => f.floor(),
                            _ => f.ceil(),
                        };
                        Ok(to_int_if_whole(r))
                    }
                },
                "sqrt" => {
                    if x < 0.0 {
                        return err(format!("sqrt of a negative number ({a})"), pos);
                    }
                    let r = x.sqrt();
                    match a {
                        Num::Int(_) if r.fract() == 0.0 => Ok(to_int_if_whole(r)),
                        _ => float_result(r, "sqrt", pos),
                    }
                }
                "ln" | "log10" => {
                    if x <= 0.0 {
                        return err(
                            format!("{name} of {a}: the logarithm needs a number above 0"),
                            pos,
                        );
                    }
                    float_result(if name == "ln" { x.ln() } else { x.log10() }, name, pos)
                }
                "exp" => float_result(x.exp(), &format!("exp({a})"), pos),
                "sin" => float_result(x.sin(), "sin", pos),
                "cos" => float_result(x.cos(), "cos", pos),
                "tan" => float_result(x.tan(), "tan", pos),
                _ => err(format!("unknown function `{name}`"), pos),
            }
        }
    }
}

fn binary(op: char, a: Num, b: Num, pos: usize) -> Result<Num, CalcError> {
    let is_zero = match b {
        Num::Int(0) => true,
        Num::Float(f) => f == 0.0,
        _ => false,
    };
    if (op == '/' || op == '%') && is_zero {
        return err(format!("division by zero ({a} {op} {b})"), pos);
    }
    if let (Num::Int(x), Num::Int(y)) = (a, b) {
        let exact = match op {
            '+' => x.checked_add(y),
            '-' => x.checked_sub(y),
            '*' => x.checked_mul(y),
            '%' => x.checked_rem(y),
            '/' if x.checked_rem(y) == Some(0) => x.checked_div(y),
            '/' => None,
            '^' if y >= 0 => u32::try_from(y).ok().and_then(|e| x.checked_pow(e)),
            _ => None,
        };
        if let Some(v) = exact {
            return Ok(Num::Int(v));
        }
    }
    let (x, y) = (a.as_f64(), b.as_f64());
    let r = match op {
        '+' => x + y,
        '-' => x - y,
        '*' => x * y,
        '/' => x / y,
        '%' => x % y,
        _ => x.powf(y),
    };
    if r.is_nan() {
        return err(format!("{a} {op} {b} is not a real number"), pos);
    }
    if !r.is_finite() {
        return err(format!("overflow: {a} {op} {b} is too large"), pos);
    }
    Ok(Num::Float(r))
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
        "Evaluates one arithmetic expression exactly: + - * / % ^, parentheses, \
         sqrt ln log10 exp abs round floor ceil min max sin cos tan, constants pi and e. \
         Use it for any arithmetic instead of computing in your head."
            .into()
    }

    fn args_schema(&self) -> Value {
        schema_of::<CalculatorArgs>()
    }

    fn run(&self, args: &Value) -> Result<Observation, ToolError> {
        let args: CalculatorArgs = parse_args(args)?;
        match evaluate(&args.expression) {
            Ok(v) => Ok(Observation::new(v.to_string())),
            Err(e) => Err(ToolError::invalid(format!(
                "cannot evaluate `{}`: {e}",
                args.expression
            ))
            .with_hint("write one expression with numbers, + - * / % ^, parentheses and the listed functions")),
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
        assert_eq!(ok("2^200"), "1.60693804426e60");
    }

    #[test]
    fn errors_carry_positions() {
        let e = evaluate("1/0").unwrap_err();
        assert!(e.message.contains("division by zero"), "{e}");
        assert_eq!(e.position, 2);
        assert!(evaluate("2^99999")
            .unwrap_err()
            .message
            .contains("overflow"));
        assert!(evaluate("sqrt(-1)")
            .unwrap_err()
            .message
            .contains("negative"));
        assert!(evaluate("((").is_err());
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(evaluate(&deep)
            .unwrap_err()
            .message
            .contains("nests deeper"));
        let signs = format!("{}1", "-".repeat(100_000));
        assert_eq!(ok(&signs), "1");
    }
}
