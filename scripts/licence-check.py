#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The one licence statement (issue 40): which licence covers which path, kept once, here
(DEFAULT and EXCEPTIONS below), and checked everywhere it is written down.

    scripts/licence-check.py           check; exit 1 naming each file that disagrees
    scripts/licence-check.py --fix     also add the missing SPDX header to each source file
                                       that has none (the licence its path gets), then check

It fails when
- a tracked source file (SOURCE_SUFFIXES, or an executable script with a `#!` line) has no
  `SPDX-License-Identifier:` line in its first HEADER_LINES lines, or has more than one;
- any tracked file's SPDX line there names another licence than the statement gives its path;
- LICENSE, LICENSE-MIT, README.md's licence section or Python/pyproject.toml says otherwise
  (LICENSE and README must name the default licence and every exception's path);
- a Debian copyright file (`debian/copyright`, machine-readable DEP-5) gives a tracked file
  another licence than the statement, or names a licence without its text.
"""
import fnmatch
import os
import re
import subprocess
import sys

# The statement: the default, then the exceptions; the last pattern that matches a path wins
# (as in a DEP-5 copyright file). Why MIT for these: the GJS module is meant to be vendored
# into GNOME Shell extensions, and the Lines example's GTK window and Shell extension to be
# copied into GTK programs and extensions; those are GPL-2.0-or-later and must stay
# distributable under GPL version 2, which Apache-2.0 is not compatible with (only version 3).
DEFAULT = "Apache-2.0"
EXCEPTIONS = [
    ("GJS/", "MIT"),
    ("Examples/Lines/gtk/", "MIT"),
    ("Examples/Lines/shell-extension/", "MIT"),
]
# The licence texts, and the names Debian's copyright format gives them.
TEXTS = {"Apache-2.0": "LICENSE", "MIT": "LICENSE-MIT"}
DEBIAN_NAMES = {"Apache-2.0": "Apache-2.0", "MIT": "Expat"}

# What must carry a header: code in these languages, and executable scripts.
SOURCE_SUFFIXES = (".swift", ".c", ".h", ".cpp", ".rs", ".vala", ".vapi", ".py", ".js", ".sh",
                   ".pc.in", ".map", ".modulemap")
# Where a header may be: the first lines (the first line, or the end of a header comment).
HEADER_LINES = 40
SPDX = re.compile(r"SPDX-License-Identifier:\s*([A-Za-z0-9.+-]+(?:\s+(?:OR|AND|WITH)\s+[A-Za-z0-9.+-]+)*)")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def licence_of(path):
    """The licence the statement gives `path` (relative to the repository, `/`-separated)."""
    licence = DEFAULT
    for prefix, name in EXCEPTIONS:
        if path.startswith(prefix):
            licence = name
    return licence


def tracked():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], check=True, capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p and not os.path.islink(os.path.join(ROOT, p))]


def read(path):
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
        return None


def is_source(path, text):
    return path.endswith(SOURCE_SUFFIXES) or (
        text.startswith("#!") and os.access(os.path.join(ROOT, path), os.X_OK))


def comment_for(path, text, licence):
    """The header line in the file's own comment syntax."""
    line = "SPDX-License-Identifier: " + licence
    if path.endswith((".py", ".sh", ".pc.in")) or text.startswith("#!"):
        return "# " + line
    if path.endswith((".map", ".c", ".h")):
        return "/* " + line + " */"
    return "// " + line


def add_header(path, text, licence):
    lines = text.split("\n")
    # After a `#!` line or Package.swift's tools version, which must come first.
    at = 1 if text.startswith(("#!", "// swift-tools-version")) else 0
    lines.insert(at, comment_for(path, text, licence))
    with open(os.path.join(ROOT, path), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def check_sources(paths, fix):
    problems = []
    for path in paths:
        text = read(path)
        if text is None:
            continue
        expected = licence_of(path)
        found = SPDX.findall("\n".join(text.split("\n")[:HEADER_LINES]))
        if not found and is_source(path, text):
            if fix:
                add_header(path, text, expected)
                print(f"licence-check: {path}: added SPDX-License-Identifier: {expected}")
            else:
                problems.append(f"{path}: no SPDX-License-Identifier header (expected {expected}; "
                                "scripts/licence-check.py --fix adds it)")
            continue
        if len(found) > 1:
            problems.append(f"{path}: {len(found)} SPDX-License-Identifier lines ({', '.join(found)}); one only")
        for licence in found:
            if licence != expected:
                problems.append(f"{path}: SPDX-License-Identifier {licence}, but the statement gives "
                                f"{expected} to this path")
    return problems


def check_texts():
    problems = []
    for licence, path in TEXTS.items():
        text = read(path) or ""
        marker = {"Apache-2.0": "Apache License", "MIT": "MIT License"}[licence]
        if marker not in text:
            problems.append(f"{path}: does not hold the {licence} text ({marker!r} missing)")
    license_file = read("LICENSE") or ""
    preamble = license_file.split("TERMS AND CONDITIONS")[0]
    problems += statement_named("LICENSE (its preamble)", preamble)
    readme = read("README.md") or ""
    section = re.search(r"^## Licen[cs]e.*?(?=^## |\Z)", readme, re.S | re.M)
    if section is None:
        problems.append("README.md: no '## Licence' section")
    else:
        problems += statement_named("README.md (its licence section)", section.group(0))
    pyproject = read("Python/pyproject.toml") or ""
    declared = re.findall(r'^license\s*=\s*\{\s*text\s*=\s*"([^"]*)"\s*\}', pyproject, re.M)
    if declared != [licence_of("Python/pyproject.toml")]:
        problems.append(f"Python/pyproject.toml: license = {declared or 'missing'}, but the statement gives "
                        f'{licence_of("Python/pyproject.toml")} (as license = {{text = "…"}})')
    return problems


def statement_named(where, text):
    """The default licence and every exception's path and licence, named in `text`."""
    problems = []
    flat = " ".join(text.split())
    names = {"Apache-2.0": ("Apache License, Version 2.0", "Apache License 2.0", "Apache-2.0"),
             "MIT": ("MIT License", "MIT")}
    if not any(n in flat for n in names[DEFAULT]):
        problems.append(f"{where}: does not name the default licence, {DEFAULT}")
    for prefix, licence in EXCEPTIONS:
        if not re.search(r"(?<![\w/.-])" + re.escape(prefix.rstrip("/")) + r"(?![\w-])", flat):
            problems.append(f"{where}: does not name {prefix} ({licence})")
        if not any(n in flat for n in names[licence]):
            problems.append(f"{where}: does not name {licence}, the licence of {prefix}")
    return problems


def dep5_stanzas(text):
    """(Files patterns, License short name) of each stanza of a DEP-5 copyright file, and the
    licence names it has a stand-alone text for."""
    stanzas, texts = [], set()
    for block in re.split(r"\n\s*\n", text):
        fields, key = {}, None
        for line in block.split("\n"):
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                key = key.strip().lower()
                fields[key] = value.strip()
        if "license" not in fields:
            continue
        short, _, body = fields["license"].partition("\n")
        if "files" in fields:
            stanzas.append((fields["files"].split(), short.strip()))
            if body.strip():
                texts.add(short.strip())
        elif body.strip():
            texts.add(short.strip())
    return stanzas, texts


def dep5_match(pattern, path):
    # DEP-5: `*` matches any characters including `/`; `?` one character; no brackets.
    return fnmatch.fnmatchcase(path, pattern.replace("[", "[[]"))


def check_debian(paths):
    problems = []
    debian_name = {v: k for k, v in DEBIAN_NAMES.items()}
    for copyright_path in [p for p in paths if re.search(r"(^|/)debian/copyright$", p)]:
        wrong = []
        text = read(copyright_path) or ""
        stanzas, texts = dep5_stanzas(text)
        if not stanzas:
            problems.append(f"{copyright_path}: no Files:/License: stanza (machine-readable format 1.0 expected)")
            continue
        for _, short in stanzas:
            if short not in texts and short not in debian_name:
                problems.append(f"{copyright_path}: License {short} has no text in the file")
        for path in paths:
            if path.startswith("debian/") or "/debian/" in path:
                continue
            given = None
            for patterns, short in stanzas:
                if any(dep5_match(p, path) for p in patterns):
                    given = short
            expected = DEBIAN_NAMES[licence_of(path)]
            if given != expected:
                wrong.append(f"{copyright_path}: gives {path} {given or 'no licence'}, "
                             f"but the statement gives {licence_of(path)} ({expected} in Debian's names)")
        problems += wrong[:20]
        if len(wrong) > 20:
            problems.append(f"{copyright_path}: and {len(wrong) - 20} more files with another licence")
    return problems


def main(argv):
    fix = "--fix" in argv[1:]
    unknown = [a for a in argv[1:] if a != "--fix"]
    if unknown:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    paths = tracked()
    problems = check_sources(paths, fix) + check_texts() + check_debian(paths)
    for problem in problems:
        print(f"licence-check: {problem}", file=sys.stderr)
    if problems:
        print(f"licence-check: {len(problems)} disagreement(s) with the licence statement "
              "(DEFAULT and EXCEPTIONS in scripts/licence-check.py)", file=sys.stderr)
        return 1
    exceptions = ", ".join(f"{p} {licence}" for p, licence in EXCEPTIONS)
    print(f"licence-check: {len(paths)} tracked files agree: {DEFAULT}, except {exceptions}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
