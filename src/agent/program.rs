//! The programs the reasoning writes, run. A coder model working a word problem often writes
//! a short Python program and then its output block (```` ```output ````) itself: the output
//! is made up, and often wrong (`39 - 39 / 3` printed as `13.0`). The `reason` action stops
//! at the output block, and when the program is straight-line arithmetic, runs it here and
//! writes its real output for the model, which goes on from it.
//!
//! What runs: `import math` (and `from math import …`); assignments of arithmetic to names
//! (`a = b * 3`, `a, b = 1, 2`, `a += 1`); `print(…)` of expressions, strings and f-strings
//! (`{x}`, `{x:.2f}`, `{x:,}`). Expressions: numbers, names, `+ - * / // % **`, parentheses,
//! and `round`, `int`, `float`, `abs`, `min`, `max`, `sum` (over a list), `math.floor`,
//! `math.ceil`, `math.sqrt`. The arithmetic is the calculator's (exact, sized before it is
//! computed); `/` gives a float as in Python and a float prints as Python prints it (`13.0`).
//! A name read before it is assigned stops the program with Python's `NameError` (and its
//! "Did you mean" for a name that differs in case or a letter or two), as Python would.
//! Anything else (a loop, a condition, a function, another module) and the program is not
//! run: [`run`] returns `None` and the model writes its output block as before.

use num_traits::Signed;

use crate::tools::calculator::{evaluate, format_float, Num};

/// The most lines of a program that is run.
const MAX_LINES: usize = 200;

/// The most characters of output written back.
const MAX_OUTPUT: usize = 2000;

/// A value: a number, and whether Python would hold it as a float.
#[derive(Debug, Clone)]
struct Val {
    num: Num,
    float: bool,
}

/// What an expression gives: a value, a string (in `print`) or a list (in `sum`, `min`, `max`).
#[derive(Debug, Clone)]
enum Item {
    Val(Val),
    Str(String),
    List(Vec<Val>),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(String),
    Name(String),
    /// A string literal; `true` for an f-string.
    Str(String, bool),
    Op(&'static str),
    Open(char),
    Close(char),
    Comma,
    /// `=`, or `+=` and the like (the operator).
    Assign(Option<&'static str>),
}

/// The output of `code` (what its `print` calls write, one line each), when every line of it
/// is one this module runs and it prints something; else `None`.
pub fn run(code: &str) -> Option<String> {
    let mut env: Vec<(String, Val)> = Vec::new();
    let mut out = String::new();
    let lines = logical_lines(code)?;
    if lines.len() > MAX_LINES {
        return None;
    }
    for (n, line) in lines.iter().enumerate() {
        let toks = lex(line)?;
        if toks.is_empty() {
            continue;
        }
        if statement(&toks, &mut env, &mut out).is_none() {
            // Python stops at a name never assigned, with a NameError; the model reads it and
            // fixes the name. Every later line must at least be made of tokens this module
            // reads, or the program may not be one Python would start.
            let name = undefined_name(&toks, &env)?;
            if lines[n + 1..].iter().any(|l| lex(l).is_none()) {
                return None;
            }
            out.push_str(&name_error(&name, &env));
            return Some(out);
        }
        if out.len() > MAX_OUTPUT {
            return None;
        }
    }
    (!out.is_empty()).then(|| out.trim_end_matches('\n').to_string())
}

/// Python's keywords, and the names this module reads without an assignment (`pi`, as
/// `math.pi`; the module `math`): names it never calls "not defined".
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield", "pi", "math",
];

/// The first name `toks` reads that was never assigned, when that name is all that keeps the
/// statement from running: with every such name given a value, it runs. Names called as
/// functions (`f(…)`), attributes (`np.sum`) and keywords are not such names: a statement
/// with one of them is beyond this module, not a Python error.
fn undefined_name(toks: &[Tok], env: &[(String, Val)]) -> Option<String> {
    let assign = toks.iter().position(|t| matches!(t, Tok::Assign(_)));
    // An augmented assignment reads its target first; a plain one only its right side.
    let read = match assign {
        Some(at) if matches!(toks[at], Tok::Assign(Some(_))) => toks,
        Some(at) => &toks[at + 1..],
        None => toks,
    };
    let mut names: Vec<String> = Vec::new();
    for (i, t) in read.iter().enumerate() {
        let found: Vec<String> = match t {
            Tok::Name(n) if read.get(i + 1) != Some(&Tok::Open('(')) => vec![n.clone()],
            // The names of an f-string's fields: `{total:.2f}`, `{a * b}`.
            Tok::Str(s, true) => s
                .split('{')
                .skip(1)
                .filter_map(|f| lex(f.split([':', '}']).next()?))
                .flatten()
                .filter_map(|t| match t {
                    Tok::Name(n) => Some(n),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        for n in found {
            let missing = !n.contains('.')
                && !KEYWORDS.contains(&n.as_str())
                && lookup(env, &n).is_none()
                && !names.contains(&n);
            if missing {
                names.push(n);
            }
        }
    }
    let first = names.first()?.clone();
    let one = evaluate("1").ok()?;
    let mut trial = env.to_vec();
    trial.extend(names.into_iter().map(|n| {
        let v = Val {
            num: one.clone(),
            float: false,
        };
        (n, v)
    }));
    statement(toks, &mut trial, &mut String::new())?;
    Some(first)
}

/// What Python prints for `name` never assigned, with its suggestion of a name of `env` that
/// differs only in case or by a letter or two (`Reese_cups` for `reese_cups`).
fn name_error(name: &str, env: &[(String, Val)]) -> String {
    let close = env.iter().rev().map(|(n, _)| n).find(|n| {
        n.eq_ignore_ascii_case(name)
            || (name.chars().count() >= 4 && crate::call::tidy::edit_distance(n, name) <= 2)
    });
    match close {
        Some(n) => format!("NameError: name '{name}' is not defined. Did you mean: '{n}'?"),
        None => format!("NameError: name '{name}' is not defined"),
    }
}

/// The lines of `code` without comments, a line whose brackets are still open joined with
/// the next.
fn logical_lines(code: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut open = 0i32;
    for raw in code.lines() {
        let line = strip_comment(raw);
        if line.trim().is_empty() && open == 0 {
            continue;
        }
        // Indented code belongs to a block (a loop, a function): not run.
        if open == 0 && line.starts_with([' ', '\t']) {
            return None;
        }
        for c in line.chars() {
            match c {
                '(' | '[' | '{' => open += 1,
                ')' | ']' | '}' => open -= 1,
                _ => {}
            }
        }
        cur.push_str(line.trim());
        cur.push(' ');
        if open <= 0 {
            out.push(std::mem::take(&mut cur));
            open = 0;
        }
    }
    if open > 0 {
        return None;
    }
    Some(out)
}

/// `line` up to a `#` that is not inside a string.
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '#' => return &line[..i],
            None => {}
        }
    }
    line
}

fn lex(line: &str) -> Option<Vec<Tok>> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == '_')
            {
                i += 1;
            }
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let mut j = i + 1;
                if matches!(chars.get(j), Some('+' | '-')) {
                    j += 1;
                }
                if chars.get(j).is_some_and(char::is_ascii_digit) {
                    i = j;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            out.push(Tok::Num(chars[start..i].iter().collect()));
            continue;
        }
        // A string, or an f-string (`f"…"`, `F'…'`).
        let f = (c == 'f' || c == 'F') && matches!(chars.get(i + 1), Some('"' | '\''));
        if c == '"' || c == '\'' || f {
            if f {
                i += 1;
            }
            let q = chars[i];
            let start = i + 1;
            let end = (start..chars.len()).find(|&j| chars[j] == q)?;
            out.push(Tok::Str(chars[start..end].iter().collect(), f));
            i = end + 1;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            out.push(Tok::Name(chars[start..i].iter().collect()));
            continue;
        }
        let two: String = chars[i..(i + 3).min(chars.len())].iter().collect();
        let (tok, len) = if two.starts_with("//=") {
            (Tok::Assign(Some("//")), 3)
        } else if two.starts_with("**") {
            (Tok::Op("**"), 2)
        } else if two.starts_with("//") {
            (Tok::Op("//"), 2)
        } else if let Some(op) = ["+=", "-=", "*=", "/="]
            .iter()
            .find(|o| two.starts_with(**o))
        {
            (Tok::Assign(Some(&op[..1])), 2)
        } else {
            let t = match c {
                '+' => Tok::Op("+"),
                '-' => Tok::Op("-"),
                '*' => Tok::Op("*"),
                '/' => Tok::Op("/"),
                '%' => Tok::Op("%"),
                '(' | '[' => Tok::Open(c),
                ')' | ']' => Tok::Close(c),
                ',' => Tok::Comma,
                '=' if chars.get(i + 1) != Some(&'=') => Tok::Assign(None),
                _ => return None,
            };
            (t, 1)
        };
        out.push(tok);
        i += len;
    }
    Some(out)
}

fn statement(toks: &[Tok], env: &mut Vec<(String, Val)>, out: &mut String) -> Option<()> {
    // Imports of the math module only.
    if let Some(Tok::Name(first)) = toks.first() {
        match first.as_str() {
            "import" => {
                return (toks == [Tok::Name("import".into()), Tok::Name("math".into())])
                    .then_some(())
            }
            "from" => {
                return (toks.get(1) == Some(&Tok::Name("math".into()))
                    && toks.get(2) == Some(&Tok::Name("import".into())))
                .then_some(());
            }
            _ => {}
        }
    }
    if let Some(at) = toks.iter().position(|t| matches!(t, Tok::Assign(_))) {
        let Tok::Assign(op) = toks[at] else {
            return None;
        };
        let targets: Vec<&str> = split_commas(&toks[..at])
            .into_iter()
            .map(|t| match t {
                [Tok::Name(n)] if !n.contains('.') => Some(n.as_str()),
                _ => None,
            })
            .collect::<Option<_>>()?;
        let values = split_commas(&toks[at + 1..]);
        if values.len() != targets.len() {
            return None;
        }
        let mut vals = Vec::new();
        for (name, v) in targets.iter().zip(values) {
            let Item::Val(mut val) = expr_all(v, env)? else {
                return None;
            };
            if let Some(op) = op {
                let old = lookup(env, name)?;
                val = binary(op, old, val)?;
            }
            vals.push((name.to_string(), val));
        }
        for (name, val) in vals {
            env.retain(|(n, _)| *n != name);
            env.push((name, val));
        }
        return Some(());
    }
    // print(…)
    match toks {
        [Tok::Name(p), Tok::Open('('), args @ .., Tok::Close(')')] if p == "print" => {
            let mut parts = Vec::new();
            if !args.is_empty() {
                for a in split_commas(args) {
                    parts.push(match expr_all(a, env)? {
                        Item::Val(v) => show(&v),
                        Item::Str(s) => s,
                        Item::List(_) => return None,
                    });
                }
            }
            out.push_str(&parts.join(" "));
            out.push('\n');
            Some(())
        }
        _ => None,
    }
}

/// `toks` cut at the commas outside brackets.
fn split_commas(toks: &[Tok]) -> Vec<&[Tok]> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::Open(_) => depth += 1,
            Tok::Close(_) => depth -= 1,
            Tok::Comma if depth == 0 => {
                parts.push(&toks[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&toks[start..]);
    parts
}

fn lookup(env: &[(String, Val)], name: &str) -> Option<Val> {
    env.iter()
        .rev()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
}

/// The whole of `toks` as one expression.
fn expr_all(toks: &[Tok], env: &[(String, Val)]) -> Option<Item> {
    let mut p = Parser {
        toks,
        pos: 0,
        env,
        depth: 0,
    };
    let v = p.sum()?;
    (p.pos == toks.len()).then_some(v)
}

struct Parser<'a> {
    toks: &'a [Tok],
    pos: usize,
    env: &'a [(String, Val)],
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn eat_op(&mut self, ops: &[&str]) -> Option<&'static str> {
        match self.peek() {
            Some(Tok::Op(o)) if ops.contains(o) => {
                let o = *o;
                self.pos += 1;
                Some(o)
            }
            _ => None,
        }
    }

    // sum := term (('+'|'-') term)*
    fn sum(&mut self) -> Option<Item> {
        self.depth += 1;
        if self.depth > 100 {
            return None;
        }
        let mut acc = self.term()?;
        while let Some(op) = self.eat_op(&["+", "-"]) {
            let rhs = self.term()?;
            acc = match (acc, rhs) {
                (Item::Val(a), Item::Val(b)) => Item::Val(binary(op, a, b)?),
                (Item::Str(a), Item::Str(b)) if op == "+" => Item::Str(a + &b),
                _ => return None,
            };
        }
        self.depth -= 1;
        Some(acc)
    }

    // term := unary (('*'|'/'|'//'|'%') unary)*
    fn term(&mut self) -> Option<Item> {
        let mut acc = self.unary()?;
        while let Some(op) = self.eat_op(&["*", "/", "//", "%"]) {
            let (Item::Val(a), Item::Val(b)) = (acc, self.unary()?) else {
                return None;
            };
            acc = Item::Val(binary(op, a, b)?);
        }
        Some(acc)
    }

    // unary := ('-'|'+') unary | power
    fn unary(&mut self) -> Option<Item> {
        if let Some(op) = self.eat_op(&["-", "+"]) {
            self.depth += 1;
            if self.depth > 100 {
                return None;
            }
            let Item::Val(v) = self.unary()? else {
                return None;
            };
            self.depth -= 1;
            return Some(Item::Val(if op == "-" {
                calc(&format!("-({})", literal(&v.num)), v.float)?
            } else {
                v
            }));
        }
        self.power()
    }

    // power := primary ('**' unary)?
    fn power(&mut self) -> Option<Item> {
        let base = self.primary()?;
        if self.eat_op(&["**"]).is_some() {
            let (Item::Val(a), Item::Val(b)) = (base, self.unary()?) else {
                return None;
            };
            return Some(Item::Val(binary("**", a, b)?));
        }
        Some(base)
    }

    fn primary(&mut self) -> Option<Item> {
        let tok = self.peek()?.clone();
        self.pos += 1;
        match tok {
            Tok::Num(text) => {
                let float = text.contains(['.', 'e', 'E']);
                Some(Item::Val(Val {
                    num: evaluate(&text).ok()?,
                    float,
                }))
            }
            Tok::Str(s, false) => Some(Item::Str(s)),
            Tok::Str(s, true) => Some(Item::Str(fstring(&s, self.env)?)),
            Tok::Open('(') => {
                let v = self.sum()?;
                (self.peek() == Some(&Tok::Close(')'))).then_some(())?;
                self.pos += 1;
                Some(v)
            }
            Tok::Open('[') => {
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(&Tok::Close(']')) {
                        self.pos += 1;
                        break;
                    }
                    let Item::Val(v) = self.sum()? else {
                        return None;
                    };
                    items.push(v);
                    match self.peek()? {
                        Tok::Comma => self.pos += 1,
                        Tok::Close(']') => {}
                        _ => return None,
                    }
                }
                Some(Item::List(items))
            }
            Tok::Name(name) if self.peek() == Some(&Tok::Open('(')) => {
                self.pos += 1;
                let mut args = Vec::new();
                loop {
                    if self.peek() == Some(&Tok::Close(')')) {
                        self.pos += 1;
                        break;
                    }
                    args.push(self.sum()?);
                    match self.peek()? {
                        Tok::Comma => self.pos += 1,
                        Tok::Close(')') => {}
                        _ => return None,
                    }
                }
                call(&name, args).map(Item::Val)
            }
            Tok::Name(name) => match name.as_str() {
                "math.pi" | "pi" if lookup(self.env, &name).is_none() => Some(Item::Val(Val {
                    num: evaluate("pi").ok()?,
                    float: true,
                })),
                _ => lookup(self.env, &name).map(Item::Val),
            },
            _ => None,
        }
    }
}

/// A function of the module's list applied to `args`.
fn call(name: &str, args: Vec<Item>) -> Option<Val> {
    let name = name.strip_prefix("math.").unwrap_or(name);
    let vals = |args: Vec<Item>| -> Option<Vec<Val>> {
        match args.as_slice() {
            [Item::List(l)] => Some(l.clone()),
            _ => args
                .into_iter()
                .map(|a| match a {
                    Item::Val(v) => Some(v),
                    _ => None,
                })
                .collect(),
        }
    };
    let vs = vals(args)?;
    let float = vs.iter().any(|v| v.float);
    let lits: Vec<String> = vs.iter().map(|v| literal(&v.num)).collect();
    match (name, vs.as_slice()) {
        ("int", [v]) => {
            let f = if negative(&v.num) { "ceil" } else { "floor" };
            calc(&format!("{f}({})", lits[0]), false)
        }
        ("float", [v]) => Some(Val {
            num: v.num.clone(),
            float: true,
        }),
        ("abs", [v]) => calc(&format!("abs({})", lits[0]), v.float),
        ("round", [_]) => calc(&format!("round({})", lits[0]), false),
        ("round", [v, d]) if !d.float => calc(&format!("round({}, {})", lits[0], lits[1]), v.float),
        ("floor" | "ceil", [_]) => calc(&format!("{name}({})", lits[0]), false),
        ("sqrt", [_]) => calc(&format!("sqrt({})", lits[0]), true),
        // The element itself, as Python gives it (`min([3.5, 1])` is the integer 1).
        ("min" | "max", [first, ..]) => {
            let mut best = first;
            for v in &vs[1..] {
                let (a, b) = (v.num.as_f64(), best.num.as_f64());
                if (name == "min" && a < b) || (name == "max" && a > b) {
                    best = v;
                }
            }
            Some(best.clone())
        }
        ("sum", _) => {
            if vs.is_empty() {
                return calc("0", false);
            }
            calc(&lits.join(" + "), float)
        }
        _ => None,
    }
}

fn negative(n: &Num) -> bool {
    match n {
        Num::Exact(r) => r.is_negative(),
        Num::Approx(f) => *f < 0.0,
    }
}

/// `a op b` with Python's meaning: `/` is true division (a float), `//` floor division, `%`
/// the remainder with the sign of the divisor, `**` the power (a float for a negative or
/// fractional exponent).
fn binary(op: &str, a: Val, b: Val) -> Option<Val> {
    let (x, y) = (literal(&a.num), literal(&b.num));
    let float = a.float || b.float;
    match op {
        "+" | "-" | "*" => calc(&format!("({x}) {op} ({y})"), float),
        "/" => calc(&format!("({x}) / ({y})"), true),
        "//" => calc(&format!("floor(({x}) / ({y}))"), float),
        "%" => calc(&format!("({x}) - ({y}) * floor(({x}) / ({y}))"), float),
        "**" => {
            let whole = matches!(&b.num, Num::Exact(r) if r.is_integer() && !r.is_negative());
            calc(&format!("({x}) ^ ({y})"), float || !whole)
        }
        _ => None,
    }
}

fn calc(expr: &str, float: bool) -> Option<Val> {
    Some(Val {
        num: evaluate(expr).ok()?,
        float,
    })
}

/// The value as the calculator reads it back exactly: `7`, `(-7/3)`, or a float's digits.
fn literal(n: &Num) -> String {
    match n {
        Num::Exact(r) if r.is_integer() => format!("({})", r.numer()),
        Num::Exact(r) => format!("({}/{})", r.numer(), r.denom()),
        Num::Approx(f) => format!("({f:e})"),
    }
}

/// The value as Python prints it: an integer as one, a float with a `.0` when whole (and
/// without the float noise Python would show: `0.3`, not `0.30000000000000004`).
fn show(v: &Val) -> String {
    if !v.float {
        if let Some(i) = v.num.to_integer() {
            return i.to_string();
        }
    }
    let s = format_float(v.num.as_f64());
    if v.float && !s.contains(['.', 'e', 'i', 'n']) {
        format!("{s}.0")
    } else {
        s
    }
}

/// An f-string's text with each `{expression}` or `{expression:spec}` replaced by its value.
fn fstring(s: &str, env: &[(String, Val)]) -> Option<String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = open + rest[open..].find('}')?;
        let inner = &rest[open + 1..close];
        let (e, spec) = match inner.rsplit_once(':') {
            Some((e, spec)) => (e, Some(spec)),
            None => (inner, None),
        };
        let Item::Val(v) = expr_all(&lex(e)?, env)? else {
            return None;
        };
        out.push_str(&formatted(&v, spec)?);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// `v` under a format spec: none, `.Nf`, `,`, `,.Nf`.
fn formatted(v: &Val, spec: Option<&str>) -> Option<String> {
    let Some(spec) = spec else {
        return Some(show(v));
    };
    let (comma, rest) = match spec.strip_prefix(',') {
        Some(r) => (true, r),
        None => (false, spec),
    };
    let text = if rest.is_empty() {
        show(v)
    } else {
        let digits: usize = rest.strip_prefix('.')?.strip_suffix('f')?.parse().ok()?;
        if digits > 12 {
            return None;
        }
        format!("{:.*}", digits, v.num.as_f64())
    };
    if !comma {
        return Some(text);
    }
    let (int, frac) = text.split_at(text.find('.').unwrap_or(text.len()));
    let (sign, int) = int.strip_prefix('-').map_or(("", int), |i| ("-", i));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    Some(format!("{sign}{grouped}{frac}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the reasoning wrote this program for "One-third of a class of 39 students
    /// took part … How many did not?" and then its output as `13.0`; it prints `26.0`.
    #[test]
    fn a_straight_line_program_prints_what_python_would() {
        let code = "# Total number of students\ntotal_students = 39\n\n# one third took part\nstudents_participated = total_students / 3\n\nstudents_not_participated = total_students - students_participated\n\nprint(students_not_participated)\n";
        assert_eq!(run(code).as_deref(), Some("26.0"));
        let code = "napoleon = 17\nsedrich = napoleon + 4\ntwice_sum = 2 * (napoleon + sedrich)\nmikey = twice_sum // 4\nprint(mikey)";
        assert_eq!(run(code).as_deref(), Some("19"));
        assert_eq!(
            run("a, b = 7, 2\nprint(a % b, -7 % 2, a // b, -7 // 2, a ** b)").as_deref(),
            Some("1 1 3 -4 49")
        );
        assert_eq!(
            run("x = 10\nx += 5\nx *= 2\nprint(x)").as_deref(),
            Some("30")
        );
        assert_eq!(run("print(0.1 + 0.2)").as_deref(), Some("0.3"));
        assert_eq!(run("print(2 ** -1, -2 ** 2)").as_deref(), Some("0.5 -4"));
    }

    #[test]
    fn functions_strings_and_f_strings_print_as_in_python() {
        let code = "import math\nprice = 12.5\nqty = 4\ntotal = round(price * qty * 1.08, 2)\nprint(f\"Total: ${total:.2f}\")\nprint('boxes:', math.ceil(25 / 6), int(7.9), int(-7.9))\nprint(sum([1, 2, 3]), max(4, 9, 2), min([3.5, 1]))\nprint(f\"{1234567:,} people\")";
        assert_eq!(
            run(code).as_deref(),
            Some("Total: $54.00\nboxes: 5 7 -7\n6 9 1\n1,234,567 people")
        );
        // A call spread over lines.
        assert_eq!(
            run("a = 3\nprint(\n  a * 2,\n  a + 1\n)").as_deref(),
            Some("6 4")
        );
    }

    /// Regression (issue 19): a program used `Reese_peanut_butter_cups` for the
    /// `reese_peanut_butter_cups` it had assigned; it was not run, and the model wrote its own
    /// output block (40.0 for 38). Python stops there with a NameError, and so does this.
    #[test]
    fn a_name_never_assigned_stops_the_program_as_python_does() {
        let code = "reese_peanut_butter_cups = 3\nsnickers = 2 * 5\nprint(snickers)\ntotal = snickers + Reese_peanut_butter_cups * 9\nprint(total)";
        assert_eq!(
            run(code).as_deref(),
            Some("10\nNameError: name 'Reese_peanut_butter_cups' is not defined. Did you mean: 'reese_peanut_butter_cups'?")
        );
        assert_eq!(
            run("print(y)").as_deref(),
            Some("NameError: name 'y' is not defined")
        );
        assert_eq!(
            run("price = 4\ncount += 1\nprint(count)").as_deref(),
            Some("NameError: name 'count' is not defined")
        );
        assert_eq!(
            run("total = 12\nprint(f\"{totl:.2f} euros\")").as_deref(),
            Some("NameError: name 'totl' is not defined. Did you mean: 'total'?")
        );
        // The first of two, in the order Python reads them.
        assert_eq!(
            run("x = a + b * 2\nprint(x)").as_deref(),
            Some("NameError: name 'a' is not defined")
        );
        // A name beside what this module does not run is not called undefined.
        assert_eq!(run("x = foo(y)\nprint(x)"), None);
        assert_eq!(run("x = y if True else 4\nprint(x)"), None);
        assert_eq!(run("x = y.count\nprint(x)"), None);
        assert_eq!(run("x = y\nprint(x == 3)"), None);
    }

    #[test]
    fn what_is_not_straight_line_arithmetic_is_not_run() {
        // Loops, conditions, functions, other modules, unknown functions, no output.
        assert_eq!(
            run("total = 0\nfor i in range(3):\n    total += i\nprint(total)"),
            None
        );
        assert_eq!(run("def f(x):\n    return x\nprint(f(2))"), None);
        assert_eq!(run("import numpy as np\nprint(np.sum([1]))"), None);
        assert_eq!(run("x = 3"), None);
        assert_eq!(run("x = 3 if True else 4\nprint(x)"), None);
        assert_eq!(run("print(1 / 0)"), None);
        assert_eq!(run("print(x == 3)"), None);
        // Sizes are the calculator's: a huge power is refused, not computed.
        assert_eq!(run("print(10 ** 10 ** 10)"), None);
    }
}
