#!/usr/bin/env python3
"""Checks cairn's function-calling suites (tests/suites/calls.jsonl, held-out/calls.jsonl).

Usage: check_calls.py TUNING.jsonl HELDOUT.jsonl
Prints every problem found and exits 1 if there is any.
"""
import collections
import json
import sys

ALIASES = {"dict": "object", "map": "object", "float": "number", "double": "number",
           "int": "integer", "long": "integer", "tuple": "array", "list": "array",
           "str": "string", "bool": "boolean"}
LOOSE = set(ALIASES)

# expected kinds per file: (single, choose, none), id prefix, min distinct function sets
SPECS = [((45, 60, 45), "c", 25), ((15, 21, 16), "h", 1)]

problems = []


def bad(where, msg):
    problems.append(f"{where}: {msg}")


def norm_type(t):
    return ALIASES.get(t, t)


def check_schema(schema, where, loose_seen):
    """Checks a schema is well formed (types known, defaults valid, required in properties)."""
    if not isinstance(schema, dict):
        bad(where, "schema is not an object")
        return
    t = schema.get("type")
    if t is None and "enum" not in schema:
        bad(where, "no type")
    if t is not None:
        if t in LOOSE:
            loose_seen.append(where)
        if norm_type(t) not in {"object", "array", "string", "number", "integer", "boolean", "null"}:
            bad(where, f"unknown type {t!r}")
    if "description" in schema and not isinstance(schema["description"], str):
        bad(where, "description not a string")
    if "enum" in schema:
        if not isinstance(schema["enum"], list) or not schema["enum"]:
            bad(where, "enum not a non-empty list")
        else:
            for v in schema["enum"]:
                check_value(v, {k: x for k, x in schema.items() if k != "enum"}, where + ".enum")
    if "default" in schema:
        check_value(schema["default"], schema, where + ".default")
    nt = norm_type(t) if t else None
    if nt == "object":
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            bad(where, "properties not an object")
            props = {}
        for k, sub in props.items():
            check_schema(sub, f"{where}.{k}", loose_seen)
        for r in schema.get("required", []):
            if r not in props:
                bad(where, f"required {r!r} not in properties")
            sub = props.get(r, {})
            if isinstance(sub, dict) and "default" in sub:
                bad(where, f"required {r!r} has a default")
    if nt == "array":
        if "items" in schema:
            check_schema(schema["items"], where + "[]", loose_seen)


def type_ok(v, t):
    t = norm_type(t)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "null":
        return v is None
    return False


def check_value(v, schema, where):
    """Checks a value against a schema: type, enum, bounds, object required/extra keys, items."""
    t = schema.get("type")
    if t is not None and not type_ok(v, t):
        bad(where, f"value {v!r} is not of type {t}")
        return
    if "enum" in schema and v not in schema["enum"]:
        bad(where, f"value {v!r} not in enum {schema['enum']}")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in schema and v < schema["minimum"]:
            bad(where, f"{v} < minimum {schema['minimum']}")
        if "maximum" in schema and v > schema["maximum"]:
            bad(where, f"{v} > maximum {schema['maximum']}")
    nt = norm_type(t) if t else None
    if nt == "object":
        props = schema.get("properties", {})
        for r in schema.get("required", []):
            if r not in v:
                bad(where, f"required argument {r!r} missing")
        for k, x in v.items():
            if k not in props:
                bad(where, f"argument {k!r} not in properties")
            else:
                check_value(x, props[k], f"{where}.{k}")
    if nt == "array":
        if not v:
            bad(where, "empty array")
        for i, x in enumerate(v):
            if "items" in schema:
                check_value(x, schema["items"], f"{where}[{i}]")


def check_file(path, counts, prefix, min_sets, all_questions):
    ids = set()
    kinds = collections.Counter()
    sets = set()
    fn_defs = {}
    loose_fns = set()
    prev_sets = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for ln, line in enumerate(lines, 1):
        where = f"{path}:{ln}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            bad(where, f"not JSON: {e}")
            continue
        if set(rec) != {"id", "kind", "question", "functions", "expected"}:
            bad(where, f"keys {sorted(rec)}")
            continue
        rid = rec["id"]
        where = f"{path}:{rid}"
        if rid in ids:
            bad(where, "duplicate id")
        ids.add(rid)
        if rid != f"{prefix}-{ln:03d}":
            bad(where, f"id should be {prefix}-{ln:03d}")
        q = rec["question"]
        if not isinstance(q, str) or not q.strip():
            bad(where, "empty question")
        elif q in all_questions:
            bad(where, f"question also at {all_questions[q]}")
        else:
            all_questions[q] = where
        kind = rec["kind"]
        kinds[kind] += 1
        funcs = rec["functions"]
        if not isinstance(funcs, list):
            bad(where, "functions not a list")
            continue
        sets.add(json.dumps(funcs, sort_keys=False))
        n = len(funcs)
        if kind == "single" and n != 1:
            bad(where, f"single with {n} functions")
        elif kind == "choose" and not 3 <= n <= 5:
            bad(where, f"choose with {n} functions")
        elif kind == "none" and not 1 <= n <= 4:
            bad(where, f"none with {n} functions")
        elif kind not in ("single", "choose", "none"):
            bad(where, f"unknown kind {kind!r}")
        by_name = {}
        for i, tool in enumerate(funcs):
            if tool.get("type") != "function" or set(tool) != {"type", "function"}:
                bad(where, f"function {i}: not in tools format")
                continue
            fd = tool["function"]
            if set(fd) != {"name", "description", "parameters"}:
                bad(where, f"function {i}: keys {sorted(fd)}")
            name = fd.get("name", "")
            if not name or not all(ch.isalnum() or ch == "_" for ch in name) or name != name.lower():
                bad(where, f"function name {name!r} not snake_case")
            if name in by_name:
                bad(where, f"function {name} offered twice")
            if not fd.get("description"):
                bad(where, f"{name}: no description")
            by_name[name] = fd
            params = fd.get("parameters", {})
            if norm_type(params.get("type")) != "object" or params.get("type") != "object":
                bad(where, f"{name}: parameters type is not \"object\"")
            if "required" not in params or "properties" not in params:
                bad(where, f"{name}: parameters lack properties or required")
            loose = []
            check_schema(params, f"{where}:{name}", loose)
            if loose:
                loose_fns.add(name)
            txt = json.dumps(fd, sort_keys=True)
            if name in fn_defs and fn_defs[name] != txt:
                bad(where, f"{name}: defined differently from an earlier line")
            fn_defs[name] = txt
        exp = rec["expected"]
        if not isinstance(exp, list):
            bad(where, "expected not a list")
            continue
        if kind == "none":
            if exp:
                bad(where, "none with expected calls")
            continue
        if len(exp) != 1:
            bad(where, f"{len(exp)} expected calls")
            continue
        call = exp[0]
        if set(call) != {"name", "arguments"}:
            bad(where, f"expected call keys {sorted(call)}")
            continue
        if call["name"] not in by_name:
            bad(where, f"expected {call['name']} is not offered")
            continue
        if not isinstance(call["arguments"], dict):
            bad(where, "arguments not an object")
            continue
        check_value(call["arguments"], by_name[call["name"]]["parameters"], f"{where}:{call['name']}")
    want = dict(zip(("single", "choose", "none"), counts))
    for k, v in want.items():
        if kinds[k] != v:
            bad(path, f"{kinds[k]} {k} questions, want {v}")
    if len(sets) < min_sets:
        bad(path, f"{len(sets)} distinct function sets, want at least {min_sets}")
    share = len(loose_fns) / max(1, len(fn_defs))
    if share > 0.15:
        bad(path, f"{len(loose_fns)} of {len(fn_defs)} functions use loose type names ({share:.0%})")
    print(f"{path}: {dict(kinds)}, {len(sets)} distinct function sets, {len(fn_defs)} functions, "
          f"{len(loose_fns)} with loose types ({share:.0%}): {sorted(loose_fns)}")
    return fn_defs


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    questions = {}
    defs = [check_file(p, *spec, questions) for p, spec in zip(sys.argv[1:], SPECS)]
    tuning, held = defs
    for name in set(tuning) & set(held):
        if tuning[name] != held[name]:
            bad("both files", f"{name} defined differently in the two files")
    new = sorted(set(held) - set(tuning))
    print(f"held-out functions not in the tuning file: {len(new)} of {len(held)}: {new}")
    for p in problems:
        print("FAIL", p)
    print("OK" if not problems else f"{len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
