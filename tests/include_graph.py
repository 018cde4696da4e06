"""The tree's dependency graph between modules and its circles, for
tests/test_layout.sh (rule 3) and for a reader: `python3 tests/include_graph.py`
prints every circle with the includes and imports that make it.

A node is a module: a C source file and the headers named for it (core/aug.c,
include/goldminer/aug.h; core/remote/conn.c, core/remote/conn.h), or one Python
module of python/goldminer. A header named for no source file joins the one
module that defines all it declares (sim_stats.h: sim/stats.c; aug_test.h:
core/aug.c), else the module its name starts with (sim_policy.h: sim/sim.c), else
is a node of its own (job.h, msg.h, cmd.h). An edge A -> B says A needs B:
  - a file of A includes a header of B (#include "..." or <goldminer/...>);
  - a header of A declares a function or an extern variable that a source file
    of B defines (core/remote/agent.h declaring the home's functions: agent.c
    calls them), for headers that belong to a source file (cmd.h, declaring every
    command, does not make each command depend on the others);
  - a Python module of A imports B, at the top or inside a function (a lazy
    import is a dependence too: it only moves the circle to run time).
A circle is a strongly connected component of more than one node. The graph reads
the sources only (no compiler, no import): comments are dropped, conditional
compilation is not evaluated (an #include under #if counts).

--check FILE: each line of FILE not starting with "#" names an allowed circle by
its nodes (blank-separated, any order). Exit 1, printing one line per offence,
when a circle is not within one allowed set (a new circle: its path through the
new edge, and the edges that make it), or an allowed set is no longer a circle
(the list and docs/DESIGN.md then say something false: delete it there).
Not done: a call through a function pointer (the remote plugin's ops table) is no
edge, so a circle made only of such calls is not seen.
"""
import ast
import os
import re
import sys
from collections import deque

# a line at column 0 that declares or defines no function or variable
SKIP_LINE = r"(static|typedef|struct [^(]*$|enum|union)\b"
NOT_NAMES = {"__attribute__", "visibility", "sizeof", "alignof", "_Alignas", "__typeof__"}
C_DIRS = ("core", "core/remote", "sim", "cmd", "include/goldminer")
PY_DIR = "python/goldminer"


def strip_comments(text):
    """The C text without its /* */ and // comments (string literals are not
    parsed: no include or declaration line holds a comment marker in a string)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def c_files(root):
    out = []
    for d in C_DIRS:
        p = os.path.join(root, d)
        if os.path.isdir(p):
            out += [d + "/" + f for f in sorted(os.listdir(p)) if f.endswith((".c", ".h"))]
    return out


def c_node(f, files, owner):
    """The module of a C file: a header joins the source file named for it, in its
    folder (core/remote/conn.h) or, for a public header, in core/ or sim/; a header
    named for no source file joins the one module that defines every gm_ function
    it declares (owner: sim_stats.h is sim/stats.c's), else the source file its
    name starts with (sim_policy.h is sim.c's), else is a node of its own."""
    stem, ext = os.path.splitext(f)
    if ext == ".c":
        return stem
    d, name = os.path.split(stem)
    cands = [d + "/" + name + ".c"]
    if d == "include/goldminer":
        cands = ["core/" + name + ".c", "sim/" + name + ".c"]
    for c in cands:
        if c in files:
            return os.path.splitext(c)[0]
    if f in owner:
        return owner[f]
    # a private header named for its module and a role: sim_policy.h is sim.c's
    for c in cands:
        c = c.split("_")[0] + ".c" if "_" in os.path.basename(c) else ""
        if c in files:
            return os.path.splitext(c)[0]
    return f


def c_edges(root):
    """{(A, B): [why, ...]} for the C files."""
    files = c_files(root)
    have = set(files)
    text = {}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text[f] = strip_comments(fh.read())
    edges = {}

    def add(a, b, why):
        if a != b:
            edges.setdefault((a, b), []).append(why)

    inc = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)
    defs, decls, includes = {}, {}, []
    for f in files:
        for m in inc.finditer(text[f]):
            h = m.group(2)
            if h.startswith("goldminer/"):
                r = "include/" + h
            elif m.group(1) == '"':
                r = os.path.normpath(os.path.join(os.path.dirname(f), h))
            else:
                continue
            if r in have:
                includes.append((f, r))
        for line in text[f].splitlines():
            if not re.match(r"[A-Za-z_]", line) or re.match(SKIP_LINE, line):
                continue
            names = [n for n in re.findall(r"\b([A-Za-z_]\w*)[ \t]*\(", line)
                     if n not in NOT_NAMES]
            if f.endswith(".c"):
                m = re.match(r"[^(=]*?\b([A-Za-z_]\w*)[ \t]*(\[[^]]*\])?[ \t]*=", line)
                if m:  # a variable: "const struct sim_policy sim_policies[N] = {"
                    defs.setdefault(m.group(1), set()).add(f)
                elif names and not line.rstrip().endswith(";"):
                    defs.setdefault(names[0], set()).add(f)
            else:
                m = re.match(r".*\bextern\b[^(]*?\b([A-Za-z_]\w*)[ \t]*(\[[^]]*\])?[ \t]*;",
                             line)
                decls.setdefault(f, set()).update([m.group(1)] if m else names[:1])
    owner = {}
    for h, names in decls.items():
        mods = {os.path.splitext(d)[0] for n in names for d in defs.get(n, ())}
        if len(mods) == 1:
            owner[h] = mods.pop()
    for f, r in includes:
        add(c_node(f, have, owner), c_node(r, have, owner), f + " includes " + r)
    for h, names in sorted(decls.items()):
        if c_node(h, have, owner) in (h, owner.get(h)):
            continue
        for name in sorted(names):
            for d in sorted(defs.get(name, ())):
                add(c_node(h, have, owner), c_node(d, have, owner),
                    h + " declares " + name + ", which " + d + " defines")
    return edges


def py_targets(n, mods):
    """The package's modules an import node names: `import goldminer.x`, `from
    goldminer.x import y`, `from .x import y` name x; `from . import x` names x
    when x is a module, else the package (__init__); `import goldminer` the
    package. Imports of other packages name none."""
    if isinstance(n, ast.Import):
        return [a.name.split(".")[1] if a.name.startswith("goldminer.") else "__init__"
                for a in n.names if a.name.split(".")[0] == "goldminer"]
    if not isinstance(n, ast.ImportFrom):
        return []
    parts = (n.module or "").split(".")
    if n.level == 0 and parts[0] == "goldminer":
        parts = parts[1:]
    elif n.level != 1:
        return []
    if parts and parts[0]:
        return [parts[0]]
    return [a.name if a.name in mods else "__init__" for a in n.names]


def py_edges(root):
    """{(A, B): [why, ...]} for the modules of python/goldminer."""
    pdir = os.path.join(root, PY_DIR)
    if not os.path.isdir(pdir):
        return {}
    mods = {f[:-3] for f in os.listdir(pdir) if f.endswith(".py")}
    edges = {}
    for m in sorted(mods):
        path = PY_DIR + "/" + m + ".py"
        with open(os.path.join(root, path), encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        for n in ast.walk(tree):
            for t in py_targets(n, mods):
                if t in mods and t != m:
                    why = "%s:%d imports %s" % (path, n.lineno, t)
                    key = (path, PY_DIR + "/" + t + ".py")
                    edges.setdefault(key, []).append(why)
    return edges


def circles(edges):
    """The strongly connected components of more than one node (Tarjan's, with an
    explicit stack: no recursion limit), each a sorted list."""
    succ = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index, low, on, stack, out = {}, {}, set(), [], []
    for start in sorted(succ):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def path(edges, a, b, within):
    """The shortest path a ... b over nodes of within (breadth first), or None."""
    prev = {a: None}
    q = deque([a])
    while q:
        v = q.popleft()
        if v == b:
            p = []
            while v is not None:
                p.append(v)
                v = prev[v]
            return p[::-1]
        for (x, y) in sorted(edges):
            if x == v and y in within and y not in prev:
                prev[y] = v
                q.append(y)
    return None


def explain(edges, cycle):
    """The edges along a cycle (a list of nodes, first == last), with their causes."""
    lines = []
    for x, y in zip(cycle, cycle[1:]):
        lines += ["    " + w for w in edges[(x, y)]]
    return lines


def check(edges, comps, allowed):
    """The offences: lines to print; none when the circles are the allowed ones."""
    bad = []
    for comp in comps:
        home = [s for s in allowed if set(comp) <= s]
        if home:
            continue
        inside = set(comp)
        # a new edge: one whose ends share no allowed set; its circle is the edge
        # and the shortest way back
        for (x, y) in sorted(edges):
            if x in inside and y in inside and not any(x in s and y in s for s in allowed):
                back = path(edges, y, x, inside)
                cyc = [x] + back
                bad.append("new circle: " + " -> ".join(cyc))
                bad += explain(edges, cyc)
                break
    for s in allowed:
        if not any(set(c) == s for c in comps):
            still = [c for c in comps if set(c) & s]
            now = "; ".join(" ".join(c) for c in still) or "none"
            bad.append("allowed circle %s is no longer one (now: %s): delete it from the list"
                       " in tests/test_layout.sh and from docs/DESIGN.md section 2"
                       % (" ".join(sorted(s)), now))
    return bad


def main(argv):
    root = "."
    allowed = None
    args = argv[1:]
    while args:
        if args[0] == "--check" and len(args) > 1:
            with open(args[1], encoding="utf-8") as fh:
                allowed = [set(ln.split()) for ln in fh if ln.strip() and not ln.startswith("#")]
            args = args[2:]
        elif not args[0].startswith("-"):
            root = args[0]
            args = args[1:]
        else:
            print("usage: include_graph.py [--check ALLOWED] [ROOT]", file=sys.stderr)
            return 2
    edges = c_edges(root)
    edges.update(py_edges(root))
    comps = circles(edges)
    if allowed is None:
        for comp in comps:
            print(" ".join(comp))
            for x, y in sorted(edges):
                if x in comp and y in comp:
                    print("\n".join("    " + w for w in edges[(x, y)]))
        return 0
    bad = check(edges, comps, allowed)
    print("\n".join(bad) if bad else "%d circles, all allowed: %s" % (
        len(comps), "; ".join(" ".join(c) for c in comps)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
