#!/usr/bin/env python3
"""The repository stands alone: no tracked file reads or names a path outside it.

Usage: python3 scripts/check_standalone.py   (from anywhere; exit 1 and one line per finding)

A user has only the clone. Two kinds of finding, in every tracked text file:
  * a relative path (one or more `..` segments) that leaves the repository from every directory
    it could be relative to: the file's own, its crate's (the nearest Cargo.toml above it, what
    CARGO_MANIFEST_DIR names) and the repository root;
  * a name of the developers' machines (NAMES below: the folder of shared material beside a
    developer's checkout and its subfolders, the workspace and home roots there, spelled so that
    this file, checked like every other, names none of them). The cache scripts/test.sh fills,
    `~/.cache/gguf-dequant`, is outside the repository by design and made by the scripts
    themselves, so it is not a finding.
"""
import os
import re
import subprocess
import sys

ROOT = subprocess.run(
    ["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--show-toplevel"],
    check=True, capture_output=True, text=True,
).stdout.strip()

NAMES = re.compile(r"\.\./shared\b|(?<![\w.-])shared/(spec|peers|gpu|hooks|design)\b|/wor[k]/|/roo[t]/")
RELATIVE = re.compile(r"(?<![\w.])((?:\.\./)+)([\w.-]*)")
SKIP_SUFFIX = (".lock", ".gguf", ".bin", ".png", ".svg")


def crate_dir(rel_dir):
    d = rel_dir
    while True:
        if os.path.exists(os.path.join(ROOT, d, "Cargo.toml")):
            return d
        if d in ("", "."):
            return ""
        d = os.path.dirname(d)


def inside(base, ups):
    depth = 0 if base in ("", ".") else len(base.split("/"))
    return ups <= depth


def main():
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], check=True,
                           capture_output=True).stdout.decode().split("\0")
    findings = []
    for rel in filter(None, files):
        if rel.endswith(SKIP_SUFFIX):
            continue
        try:
            text = open(os.path.join(ROOT, rel), encoding="utf-8").read()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        rel_dir = os.path.dirname(rel)
        bases = {rel_dir, crate_dir(rel_dir), ""}
        for n, line in enumerate(text.splitlines(), 1):
            m = NAMES.search(line)
            if m:
                findings.append(f"{rel}:{n}: names `{m.group(0)}`, outside the repository: {line.strip()[:120]}")
                continue
            for m in RELATIVE.finditer(line):
                ups = m.group(1).count("../")
                if not any(inside(b, ups) for b in bases):
                    findings.append(f"{rel}:{n}: `{m.group(0)}` leaves the repository: {line.strip()[:120]}")
    for f in findings:
        print(f)
    if findings:
        print(f"{len(findings)} references to paths outside the repository (a clone has none of them)",
              file=sys.stderr)
        return 1
    print(f"no tracked file names a path outside the repository ({len(files) - 1} files checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
