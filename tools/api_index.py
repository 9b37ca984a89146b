#!/usr/bin/env python3
# api_index.py - write docs/api.md: every public call of libaco's headers,
# one line each, linked to its declaration, under the header's own sections.
#
# Copyright 2026 the libaco authors.  Apache License 2.0 (see LICENSE).
#
#   python3 tools/api_index.py           write docs/api.md
#   python3 tools/api_index.py --check   exit 1, with a diff, if docs/api.md
#                                        is not what the headers give now
# Exit status 2: a call without a comment (named, with its line).
#
# The headers' conventions it reads:
#  - Sections are the /* ==== */ framed banners; one whose title says
#    "(not API)" holds no calls.
#  - A call is a prototype or static inline function named aco_*, or a
#    function-like #define aco_*(...); names aco__* and *_ are internal.
#  - Its comment is the one right above it (a forward declaration or a
#    one-line enum may stand between), else one after it on its line, else,
#    when it sits directly below other calls (no blank line), the comment
#    above that run if that comment names it or its name and one of the
#    run's extend each other (aco_rt_spawn, aco_rt_spawn2).
#  - Its summary is that comment's first sentence, or the one that begins
#    with its name ("aco_rt_offload runs ...", "aco_free(p, sz) gives ...").
#  - A call of rt/aco_rt_pthread.h that rt/aco_rt_pthread_names.h maps a
#    pthread_ name to reads "As pthread_x", then its own comment if any.
# rt/aco_rt_pthread_names.h itself (renaming macros) is not indexed.
import difflib
import os
import re
import sys

HEADERS = ["aco.h", "rt/aco_rt.h", "rt/aco_rt_tls.h", "rt/aco_rt_pthread.h"]
NAMES_HEADER = "rt/aco_rt_pthread_names.h"
OUT = "docs/api.md"
LIMIT = 150         # characters of a summary before it is cut


def depth_of(c):
    return {"(": 1, "[": 1, ")": -1, "]": -1}.get(c, 0)


def strip_comments(text):
    """The code's lines with its comments blanked, and the comments: first
    and last line, text, whether code precedes it on its line."""
    code, comments = text, []
    for m in re.finditer(r'"(?:\\.|[^"\\\n])*"|/\*.*?\*/', text, re.S):
        if m.group().startswith("/*"):
            line, bol = text.count("\n", 0, m.start()) + 1, text.rfind("\n", 0, m.start()) + 1
            comments.append({"start": line, "end": line + m.group().count("\n"), "text": m.group(),
                             "trailing": code[bol:m.start()].strip() != ""})
            code = code[:m.start()] + re.sub(r"[^\n]", " ", m.group()) + code[m.end():]
    return code.split("\n"), comments


def clean(comment):
    """A comment's words on one line."""
    t = re.sub(r"\n\s*\*(?!/)", "\n", re.sub(r"^/\*+|\*+/$", "", comment.strip()))
    return " ".join(t.split())


def sentences(text):
    """text cut after each '.' that ends a sentence: outside parentheses,
    followed by a space or the end, not "e.g.", "i.e." nor "...")."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += depth_of(c)
        if c == "." and depth <= 0 and text[i + 1:i + 2] in ("", " ") and text[i - 1] != "." \
                and not re.search(r"\b(e\.g|i\.e|etc)$", text[:i]):
            out.append(text[start:i + 1].strip())
            start = i + 1
    return out + [text[start:].strip()] if text[start:].strip() else out


def shorten(s):
    """s, or, past LIMIT, s cut at its last clause boundary before LIMIT
    (, ; : or a " (" outside brackets) and ending with "..."."""
    if len(s) <= LIMIT:
        return s
    depth, cut = 0, s.rfind(" ", 0, LIMIT)
    for i, c in enumerate(s[:LIMIT]):
        depth += depth_of(c)
        if i > 40 and (depth == 0 and c in ",;:" or depth == 1 and s[i - 1:i + 1] == " ("):
            cut = i
    return s[:cut].rstrip(" ,;:") + "..."


def parse(path):
    """A header's sections (first line, title), declarations and comments."""
    lines, comments = strip_comments(open(path).read())
    decls, sections, banner = [], [(0, "")], None
    for c in comments:          # the banners: framed by /* ==== */ lines
        if re.match(r"^/\* =+ \*/$", c["text"]):
            if banner is not None:
                sections.append((c["start"], sentences(" ".join(banner))[0].rstrip(".")))
            banner = [] if banner is None else None
            c["banner"] = True
        elif banner is not None:
            banner.append(clean(c["text"]))
            c["banner"] = True
    i = 0
    while i < len(lines):
        s, first = lines[i].strip(), i + 1
        if s.startswith("#"):
            while lines[i].rstrip().endswith("\\"):
                i += 1
            m = re.match(r"#\s*define\s+(\w+)\(", s)
            if m:
                decls.append({"name": m.group(1), "kind": "macro", "start": first, "end": i + 1,
                              "line": first})
        if not s or s.startswith("#") or s in ('extern "C" {', "}"):
            i += 1
            continue
        stmt, depth = "", 0
        while i < len(lines):       # to its ';', or a function body's '}'
            stmt += lines[i] + "\n"
            depth += lines[i].count("{") - lines[i].count("}")
            body = re.search(r"\)\s*\{", stmt)
            if depth == 0 and (lines[i].rstrip().endswith(";") or body and "}" in lines[i]):
                break
            i += 1
        i += 1
        d = {"start": first, "end": i, "line": first}
        bare = re.sub(r'__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)|__asm__\s*\("[^"]*"\)', " ", stmt)
        tag = re.match(r"(struct|enum) (\w+) \{", stmt)
        call = re.search(r"(\w+)\s*\(", bare.split("{")[0])
        if stmt.startswith("typedef"):
            m = ("}" in bare and re.search(r"(\w+)\s*;\s*$", bare)) \
                or re.search(r"\(\s*\*\s*(\w+)\s*\)", bare) or re.search(r"(\w+)\s*;\s*$", bare)
            d.update(kind="type", name=m.group(1))
        elif tag:
            d.update(kind="type", name=tag.group(2), tag=tag.group(1) + " ")
        elif re.match(r"(struct \w+|enum \{.*\});$", stmt.strip()):
            d.update(kind="aside", name="")     # may stand below a call's comment
        elif call and not re.match(r"(struct|enum|union)\b[^(]*\{", stmt):
            d.update(kind="inline" if "{" in bare else "function", name=call.group(1))
            d["line"] += stmt[:re.search(r"\b%s\s*\(" % d["name"], stmt).start()].count("\n")
        else:
            continue
        decls.append(d)
    return sections, decls, comments


def own_comment(d, comments, asides):
    top = d["start"]
    while top - 1 in asides:
        top -= 1
    for c in comments:
        if c["end"] == top - 1 and not c["trailing"] and not c.get("banner"):
            return c
    return next((c for c in comments if c["start"] == d["end"] and c["trailing"]), None)


def run_comment(d, calls, comments, asides):
    """The comment above the run of calls d sits in, if it covers d."""
    by_end, run, cur = {c["end"]: c for c in calls}, [], d
    while cur["start"] - 1 in by_end and not own_comment(cur, comments, asides):
        cur = by_end[cur["start"] - 1]
        run.append(cur["name"])
    c = own_comment(cur, comments, asides) if run else None
    short = re.sub(r"^aco_(rt_(pthread_)?)?", "", d["name"])
    if c and (re.search(r"\b(%s|%s)\b" % (d["name"], short), clean(c["text"]))
              or any(d["name"].startswith(r) or r.startswith(d["name"]) for r in run)):
        return c
    return None


def summary(name, comment, member):
    """The comment's first sentence, or the one that says what the call
    does: "name does ...", or for a member of a run also "name(...) ..."."""
    ss = sentences(clean(comment["text"]))
    mine = [s for s in ss if re.match(name + (r"\b(?!_)" if member else " [a-z]"), s)]
    return (mine or ss)[0]


def md(s):
    """s as table text: | escaped (in `code` too: it ends a cell there as
    well), and * _ < \\ outside `code` spans."""
    parts = s.split("`")
    for k in range(0, len(parts), 2):
        parts[k] = re.sub(r"(?<!\w)_", r"\\_", re.sub(r"([*<\\])", r"\\\1", parts[k]))
    return "`".join(parts).replace("|", "\\|")


def describe(d, comments, calls, asides, twin):
    """A call's summary, or None when it has no comment."""
    c = own_comment(d, comments, asides)
    if d["name"] in twin:
        s = "As " + twin[d["name"]]
        if c:
            t = summary(d["name"], c, False)
            s += ": " + (t[0].lower() + t[1:] if re.match(r"[A-Z][a-z ]", t) else t)
        return s if s.endswith(".") else s + "."
    run = None if c else run_comment(d, calls, comments, asides)
    return summary(d["name"], c or run, bool(run)) if c or run else None


def generate():
    """docs/api.md's text, and the errors found."""
    errors, seen, out, kinds = [], set(), [], []
    twin = {m.group(2): m.group(1) for m in reversed(list(re.finditer(
        r"^#define\s+(pthread_\w+|sched_yield)\s+(aco_rt_pthread_\w+)", open(NAMES_HEADER).read(), re.M)))}
    for h in HEADERS:
        sections, decls, comments = parse(h)
        calls = [d for d in decls if d["kind"] not in ("type", "aside")]
        asides = {d["end"] for d in decls if d["kind"] == "aside"}
        title = re.sub(r"^\S+ - ", "", sentences(clean(comments[0]["text"]))[0])
        out += ["## " + h, "", "[`%s`](../%s): %s" % (h, h, md(title)), ""]
        for k, (start, stitle) in enumerate(sections):
            end = sections[k + 1][0] if k + 1 < len(sections) else float("inf")
            rows, types = [], []
            for d in decls:
                if not start < d["line"] < end or "(not API)" in stitle \
                        or not re.match(r"aco_(?!_).*[^_]$", d["name"]):
                    continue
                if d["kind"] == "type":
                    types.append("[`%s%s`](../%s#L%d)" % (d.get("tag", ""), d["name"], h, d["start"]))
                    continue
                if d["name"] in seen:   # aco_yield: a prototype, then a macro
                    continue
                seen.add(d["name"])
                s = describe(d, comments, calls, asides, twin)
                if not s:
                    errors.append("%s:%d: %s has no comment (write one above it: its first "
                                  "sentence is its line in %s)" % (h, d["line"], d["name"], OUT))
                    continue
                kinds.append(d["kind"])
                rows.append("| [`%s`](../%s#L%d)%s | %s |" % (
                    d["name"], h, d["line"], "" if d["kind"] == "function" else " (%s)" % d["kind"],
                    md(shorten(s))))
            if (rows or types) and k:
                out += ["### " + stitle, ""]
            if rows:
                out += ["| call | what |", "|---|---|"] + rows + [""]
            if types:
                out += ["Types: " + ", ".join(types) + ".", ""]
    head = """# Every public call

One line per call of the four public headers, under each header's own
sections; the name links to its declaration, where the whole contract is.
Generated by `python3 tools/api_index.py` from the headers' comments (the
first sentence of each) and checked by `tests/check_docs.sh`: it must be
current, and name every function `libaco.so`, `libaco_rt.so` and
`libaco_rt_tls.so` export but the core's internals that aco.h's macros
reach (`acosw`, `aco__*`, `aco_gtls_co`).  Do not edit it: edit the header, then run the tool.  (macro) and (inline)
mark calls that are no symbol of the libraries.  %d calls: %d functions, %d macros,
%d inline functions.
""" % (len(kinds), kinds.count("function"), kinds.count("macro"), kinds.count("inline"))
    return head + "\n" + "\n".join(out).rstrip("\n") + "\n", errors


def main():
    if sys.argv[1:] not in ([], ["--check"]):
        print("usage: python3 tools/api_index.py [--check]", file=sys.stderr)
        return 2
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    text, errors = generate()
    for e in errors:
        print("api_index: " + e, file=sys.stderr)
    if errors:
        return 2
    if sys.argv[1:] == ["--check"]:
        old = open(OUT).read() if os.path.exists(OUT) else ""
        if old == text:
            return 0
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                   OUT, OUT + " (from the headers)") if old else [])
        sys.stdout.flush()
        print("api_index: %s is %s: run python3 tools/api_index.py"
              % (OUT, "stale" if old else "missing"), file=sys.stderr)
        return 1
    open(OUT, "w").write(text)
    print("api_index: wrote " + OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
