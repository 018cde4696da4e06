"""The README's headline figures against the sections they link to, for
tests/test_readme.sh (case 8): `python3 tests/readme_figures.py README.md`.

Each item of the README's "## Measurements" list ("- " and the lines indented
under it) is a headline:
its links (FILE.md#ANCHOR, relative to the README) must land on a heading of FILE
(GitHub's anchor: lower case, punctuation dropped, blanks as "-", "-1", "-2" for
repeats), and every number in the line outside its links must be in that
section, the text from the heading to the next heading of its level or above, as
a number that rounds to it at its decimals (6.47 holds "6.5", 27,267 "27,267").
Exit 1 with one line per headline that fails, naming the link and the numbers.

Not done: what a number means (a "2" matches any number near 2); the check is that
a reader who follows the link finds the figure, not that the sentence is right.
"""
import os
import re
import sys


def sections(path):
    """{anchor: the section's text} for the headings of a Markdown file."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    heads, seen, fence = [], {}, False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
            continue
        if fence or not line.startswith("#"):
            continue
        level = len(line) - len(line.lstrip("#"))
        a = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        k = seen.get(a, 0)
        seen[a] = k + 1
        heads.append((i, level, a if k == 0 else "%s-%d" % (a, k)))
    out = {}
    for n, (i, level, a) in enumerate(heads):
        end = next((j for j, lv, _ in heads[n + 1:] if lv <= level), len(lines))
        out[a] = "\n".join(lines[i:end])
    return out


def numbers(text):
    return [m.replace(",", "") for m in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


def held(x, pool):
    """Whether a number of pool rounds to x at x's decimals."""
    d = len(x.split(".")[1]) if "." in x else 0
    return any(round(float(y), d) == float(x) for y in pool)


def main(argv):
    readme = argv[1] if len(argv) > 1 else "README.md"
    with open(readme, encoding="utf-8") as fh:
        text = fh.read()
    if "\n## Measurements" not in text:
        print("%s: no \"## Measurements\" section" % readme)
        return 1
    part = text[text.index("\n## Measurements") + 1:]
    part = part[:part.find("\n## ")] if "\n## " in part else part
    bad = 0
    cache = {}
    items = []  # each "- " item with its indented continuation lines
    for line in part.split("\n"):
        if line.startswith("- "):
            items.append(line)
        elif line.startswith("  ") and items:
            items[-1] += " " + line.strip()
    for line in items:
        body = re.sub(r"\[[^\]]*\]\([^)]*\)", "", line)
        for f, a in re.findall(r"\]\(([^)#]+\.md)#([^)]+)\)", line):
            path = os.path.join(os.path.dirname(readme), f)
            if path not in cache:
                cache[path] = sections(path) if os.path.exists(path) else {}
            if a not in cache[path]:
                print("%s#%s: no such heading (%s...)" % (f, a, line[:60]))
                bad += 1
                continue
            pool = numbers(cache[path][a])
            miss = [x for x in numbers(body) if not held(x, pool)]
            if miss:
                print("%s#%s lacks %s (%s...)" % (f, a, ", ".join(miss), line[:60]))
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
