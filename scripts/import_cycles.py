#!/usr/bin/env python3
"""List the module-level import cycles of a Rust crate.

Usage: scripts/import_cycles.py [--with-ancestors] CRATE_SRC_DIR...

A node is a source file's module (`sim/host`, `report/job`; a file's inline modules,
such as `mod tests`, count as the file). An edge A -> B is a `use` declaration or a
`crate::`/`super::`/`self::` path in A's code (comments and strings are skipped) that
names B or an item of B; a name that B re-exports (`pub use c::X`) is followed to the
module that defines it. Edges between a module and its own ancestors (a `mod.rs` and
the files below it) are left out unless --with-ancestors is given: a parent declaring
and re-exporting its children is its interface, not a circle of imports.

Prints each cycle (a strongly connected component of two or more modules) on a line,
then `N cycles`; exits 1 when there is one, 0 when there is none.
"""
import os
import re
import sys


def strip_comments_and_strings(src):
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', src[i:i + 8]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]) or (c == "'" and re.match(r"'\\[xu]", src[i:i + 3])):
            j = src.find("'", i + 2)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def modules(src_dir):
    """Map module path tuple -> file, for every .rs file under src_dir."""
    mods = {}
    for root, _, files in os.walk(src_dir):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src_dir)[:-3].split(os.sep)
            if rel == ["main"] and os.path.exists(os.path.join(src_dir, "lib.rs")):
                continue  # the binary beside a library: a crate of its own
            if rel in (["lib"], ["main"]):
                rel = []
            elif rel[-1] == "mod":
                rel = rel[:-1]
            mods[tuple(rel)] = os.path.join(root, f)
    return mods


def use_paths(tree, prefix=()):
    """Expand a `use` tree (`a::{b, c::{d as e}}`) into paths of segments."""
    tree = tree.strip()
    paths, depth, start = [], 0, 0
    # split top-level commas
    parts = []
    for i, ch in enumerate(tree):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(tree[start:i])
            start = i + 1
    parts.append(tree[start:])
    for p in parts:
        p = p.strip()
        if not p:
            continue
        m = re.match(r"^((?:[\w$]+\s*::\s*)*)\{(.*)\}$", p, re.S)
        if m:
            segs = [s for s in re.split(r"\s*::\s*", m.group(1).strip()) if s]
            paths += use_paths(m.group(2), prefix + tuple(segs))
        else:
            p = re.sub(r"\s+as\s+\w+$", "", p)
            segs = tuple(s for s in re.split(r"\s*::\s*", p) if s)
            paths.append(prefix + segs)
    return paths


def resolve(segs, here, mods, crate_names):
    """Absolute segments for a path written in module `here`, or None if external."""
    if not segs:
        return None
    head = segs[0]
    if head == "crate" or head in crate_names:
        return list(segs[1:])
    if head == "self":
        return list(here) + list(segs[1:])
    if head == "super":
        base = list(here)
        rest = list(segs)
        while rest and rest[0] == "super":
            base = base[:-1]
            rest = rest[1:]
        return base + rest
    # a child module of `here` named directly (2018 edition relative path)
    if tuple(here) + (head,) in mods:
        return list(here) + list(segs)
    return None


def main():
    args = sys.argv[1:]
    with_anc = "--with-ancestors" in args
    dirs = [a for a in args if not a.startswith("--")]
    if not dirs:
        print(__doc__)
        return 2
    total = 0
    for src_dir in dirs:
        mods = modules(src_dir)
        crate_toml = os.path.join(os.path.dirname(os.path.abspath(src_dir)), "Cargo.toml")
        names = set()
        if os.path.exists(crate_toml):
            t = open(crate_toml).read()
            m = re.search(r'\[lib\][^\[]*name\s*=\s*"([^"]+)"', t)
            if m:
                names.add(m.group(1))
        code = {k: strip_comments_and_strings(open(f).read()) for k, f in mods.items()}
        # re-exports: module -> {name: absolute segments}
        reexp = {}
        for k, c in code.items():
            for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", c):
                for p in use_paths(m.group(1)):
                    a = resolve(p, k, mods, names)
                    if a:
                        reexp.setdefault(k, {})[p[-1]] = a
                    if a and p[-1] != "*":
                        alias = re.search(r"\b" + re.escape(p[-1]) + r"\s+as\s+(\w+)", m.group(1))
                        if alias:
                            reexp[k][alias.group(1)] = a

        def target(abs_segs, seen=0):
            # longest prefix that is a module, then follow a re-export of the next name
            for cut in range(len(abs_segs), -1, -1):
                mod = tuple(abs_segs[:cut])
                if mod in mods:
                    rest = abs_segs[cut:]
                    if rest and seen < 8 and rest[0] in reexp.get(mod, {}):
                        return target(reexp[mod][rest[0]] + rest[1:], seen + 1)
                    return mod
            return None

        edges = {k: set() for k in mods}
        for k, c in code.items():
            found = []
            for m in re.finditer(r"\buse\s+([^;]+);", c):
                found += use_paths(m.group(1))
            for m in re.finditer(r"(?<![\w:])((?:crate|super|self)(?:\s*::\s*\w+)+)", c):
                found.append(tuple(re.split(r"\s*::\s*", m.group(1))))
            for p in found:
                a = resolve(p, k, mods, names)
                if a is None:
                    continue
                t = target(a)
                if t is None or t == k:
                    continue
                if not with_anc and (t == k[:len(t)] or k == t[:len(k)]):
                    continue
                edges[k].add(t)
        # Tarjan's strongly connected components
        index, low, stack, on, sccs = {}, {}, [], set(), []
        counter = [0]
        sys.setrecursionlimit(10000)

        def strong(v):
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in sorted(edges[v]):
                if w not in index:
                    strong(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    sccs.append(sorted(comp))

        for v in sorted(mods):
            if v not in index:
                strong(v)
        name = lambda m: "/".join(m) or "(root)"
        for comp in sorted(sccs):
            print("%s: {%s}" % (src_dir, ", ".join(name(m) for m in comp)))
        print("%s: %d cycles" % (src_dir, len(sccs)))
        total += len(sccs)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
