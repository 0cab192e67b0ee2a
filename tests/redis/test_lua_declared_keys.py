"""Every Lua script names its keys in KEYS (issue 46 item 2, stage 1 audit).

On a Redis Cluster a script runs on the node of its declared keys, and may touch
only keys of that slot: a key name built inside the script (``'queue:' .. name``)
is invisible to the client routing the call and fails on another node. This test
reads every script as Redis receives it (snippets included) and follows each key
argument of ``redis.call``/``redis.pcall`` back to ``KEYS``: directly, through a
local, a function parameter (every call site checked), or a table filled from
such values. The one script the audit cannot follow is pinned below; a new script
building a key name fails here.
"""

from __future__ import annotations

import re

from wurk_django.redis import scripts

#: Scripts that build key names inside today (docs/redis.md#redis-cluster lists why).
BUILDS_KEYS = {
    # Queue caps (issue 47 item 4, merged after stage 1): its keys are in KEYS, read at
    # computed indexes this audit cannot follow, and span several queues (several slots):
    # on a cluster the capped fetch needs a per-queue form (issue 46 stage 3).
    "queue_limits/lua/fetch",
}

#: Commands without a key argument; and those whose second argument is a key too.
KEYLESS = {"time", "echo", "ping", "publish", "info"}
TWO_KEYS = {"lmove", "rpoplpush", "smove", "blmove", "brpoplpush", "rename", "renamenx", "copy", "zrangestore"}
CALL = re.compile(r"redis\.p?call\(")
KEY = re.compile(r"KEYS\[[^\]]+\]")
NAME = re.compile(r"\w+")


def arguments(text: str, start: int) -> list[str]:
    """The top-level arguments of the call whose ``(`` ends just before ``start``."""
    depth, current, found, quote = 0, "", [], None
    for at in range(start, len(text)):
        char = text[at]
        if quote:
            current += char
            if char == quote and text[at - 1] != "\\":
                quote = None
        elif char in "'\"":
            quote = char
            current += char
        elif char in "([{":
            depth += 1
            current += char
        elif char in ")]}":
            if depth == 0:
                found.append(current.strip())
                return found
            depth -= 1
            current += char
        elif char == "," and depth == 0:
            found.append(current.strip())
            current = ""
        else:
            current += char
    return found


def undeclared(text: str) -> list[tuple[str, str]]:
    """The (command, key expression) pairs of the Lua ``text`` whose key is not one of KEYS."""
    text = re.sub(r"--[^\n]*", "", text)
    locals_ = {m.group(1): m.group(2).strip() for m in re.finditer(r"local (\w+)\s*=\s*([^\n]+)", text)}
    functions = {m.group(1): [p.strip() for p in m.group(2).split(",")]
                 for m in re.finditer(r"local function (\w+)\(([^)]*)\)", text)}

    def declared(expr: str, seen: tuple[str, ...] = ()) -> bool:
        expr = expr.strip()
        if KEY.fullmatch(expr):
            return True
        if not NAME.fullmatch(expr) or expr in seen:
            return False
        seen = (*seen, expr)
        if expr in locals_:
            return declared(locals_[expr], seen)
        for name, params in functions.items():
            if expr in params:  # a parameter: every call site must pass a declared key (or nil)
                at = params.index(expr)
                calls = [arguments(text, m.end()) for m in re.finditer(rf"(?<![\w.]){name}\(", text)]
                calls = [c for c in calls if c != params]  # the definition itself
                return all(len(c) > at and (c[at] == "nil" or declared(c[at], seen)) for c in calls)
        loop = re.search(rf"for\s+\w+\s*,\s*{expr}\s+in\s+ipairs\((\w+)\)", text)
        if loop and loop.group(1) == "KEYS":
            return True
        if loop:  # a table's values: whatever was stored into it
            stored = re.findall(rf"{loop.group(1)}\[[^\]]+\]\s*=\s*(\w+)\b(?!\s*[.(\[])", text)
            return bool(stored) and all(declared(value, seen) for value in stored)
        return False

    found = []
    for match in CALL.finditer(text):
        args = arguments(text, match.end())
        if not args:
            continue
        if args[0][:1] not in ("'", '"'):
            found.append(("dynamic command", args[0]))
            continue
        command = args[0].strip("'\"").lower()
        if command in KEYLESS:
            continue
        for at in ([1, 2] if command in TWO_KEYS else [1]):
            if len(args) > at and not declared(args[at]):
                found.append((command, args[at]))
    return found


def test_only_the_pinned_scripts_build_key_names():
    found = {name for name in scripts.all_names() if undeclared(scripts.source(name))}
    assert found == BUILDS_KEYS


def test_the_audit_sees_a_built_key_and_accepts_declared_ones():
    assert undeclared("redis.call('LPUSH', 'queue:' .. ARGV[1], ARGV[2])") == [("lpush", "'queue:' .. ARGV[1]")]
    assert undeclared("local q = ARGV[1]\nredis.call('LMOVE', KEYS[1], q, 'RIGHT', 'LEFT')") == [("lmove", "q")]
    assert undeclared("redis.call(cmd, KEYS[1])") == [("dynamic command", "cmd")]
    declared = (
        "local src = KEYS[1]\n"
        "local function push(key, v) redis.call('LPUSH', key, v) end\n"
        "push(KEYS[2], ARGV[1])\n"
        "for _, k in ipairs(KEYS) do redis.call('DEL', k) end\n"
        "redis.call('RPOPLPUSH', src, KEYS[3])\n"
        "redis.call('TIME')\n"
    )
    assert undeclared(declared) == []
    assert undeclared("local function push(key) redis.call('LPUSH', key, 1) end\npush(KEYS[1])\npush(ARGV[1])") \
        == [("lpush", "key")]
