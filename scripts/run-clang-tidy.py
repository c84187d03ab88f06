#!/usr/bin/env python3
"""scripts/run-clang-tidy.py BUILD_DIR [JOBS] [FILE_REGEX]

Runs clang-tidy 16 (.clang-tidy) over the project's .cc files in BUILD_DIR/compile_commands.json
(generated protobuf code is under build/ and left out), and over the project's headers they
include. Exits non-zero on any finding, printing each once.

A file found clean is remembered in WEIR_TIDY_CACHE (default ~/.cache/weir-clang-tidy) under a
key made of everything clang-tidy's answer depends on: its version, this script, every
.clang-tidy of the project, the header filter, the file's compile command and the file
preprocessed with its comments and line markers (so a change to any header it includes, ours or a
system one, a NOLINT taken out, or a header moved, checks it again), with the checkout's own path
left out (a clean clone elsewhere finds the same keys). Only clean results are kept: a finding is
reported on every run until it is fixed. A run that selects no file fails.

BUILD_DIR must have been built (or at least have its protobuf headers generated): CI uses
build/tsan, the clang build.
"""

import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRS = "(runtime|operators|collections|protocol|sinks|sources|tools|persist|ingest|control|observe|pubsub|async|base|tests|bench|examples)"
TIDY = "clang-tidy-16"


def usage():
    sys.exit("usage: run-clang-tidy.py BUILD_DIR [JOBS] [FILE_REGEX]")


def command_of(entry):
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def preprocessed(entry):
    """The file as the compiler sees it (None if it does not preprocess: clang-tidy will say why)."""
    args = command_of(entry)
    out = []
    skip = False
    for a in args:  # Drop the output and dependency-file options; preprocess to stdout.
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        out.append(a)
    # -C: comments stay (a NOLINT is one); the line markers name every header it came from.
    result = subprocess.run(out + ["-E", "-C"], cwd=entry["directory"], capture_output=True)
    return result.stdout if result.returncode == 0 else None


def main():
    if len(sys.argv) < 2:
        usage()
    build = os.path.abspath(sys.argv[1])
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    pattern = re.compile(sys.argv[3] if len(sys.argv) > 3 else f"^{re.escape(ROOT)}/{DIRS}/.*\\.cc$")
    cache = os.environ.get("WEIR_TIDY_CACHE", os.path.expanduser("~/.cache/weir-clang-tidy"))
    os.makedirs(cache, exist_ok=True)

    with open(os.path.join(build, "compile_commands.json")) as f:
        # Generated code (protobuf) is under the build folder: not ours to check.
        entries = [e for e in json.load(f)
                   if pattern.search(e["file"]) and not os.path.abspath(e["file"]).startswith(build + os.sep)]
    if not entries:
        sys.exit(f"clang-tidy: no file of {build}/compile_commands.json matches {pattern.pattern}")

    version = subprocess.run([TIDY, "--version"], capture_output=True, text=True, check=True).stdout
    configs = subprocess.run(["git", "ls-files", "*.clang-tidy", ".clang-tidy"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    header_filter = f"^{ROOT}/{DIRS}/"
    common = hashlib.sha256(version.encode())
    with open(os.path.abspath(__file__), "rb") as f:
        common.update(f.read() + b"\0")
    common.update(header_filter.replace(ROOT, "@ROOT@").encode() + b"\0")
    for path in sorted(configs):
        with open(os.path.join(ROOT, path), "rb") as f:
            common.update(path.encode() + b"\0" + f.read() + b"\0")

    def check(entry):
        """(file, findings or None when clean, whether the cache answered)."""
        source = preprocessed(entry)
        key = None
        if source is not None:
            # The checkout's path left out, so that a clone elsewhere (CI's) finds what this one
            # found clean: it is in the command and in the source (__FILE__, include paths).
            h = common.copy()
            command = json.dumps(command_of(entry)).replace(ROOT, "@ROOT@")
            h.update(command.encode() + b"\0" + source.replace(ROOT.encode(), b"@ROOT@"))
            key = os.path.join(cache, h.hexdigest())
            if os.path.exists(key):
                return entry["file"], None, True
        result = subprocess.run([TIDY, "-quiet", f"-header-filter={header_filter}", "-p", build,
                                 entry["file"]], capture_output=True, text=True)
        findings = [line for line in (result.stdout + result.stderr).splitlines()
                    if re.search(r"(warning|error):", line)]
        if result.returncode == 0 and not findings:
            if key is not None:
                open(key, "w").close()
            return entry["file"], None, False
        return entry["file"], findings or [(result.stdout + result.stderr).strip()], False

    found = set()
    cached = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for path, findings, hit in pool.map(check, entries):
            cached += hit
            if findings:
                found.update(findings)
    for line in sorted(found):
        print(line)
    print(f"clang-tidy: {len(entries)} files, {cached} unchanged since found clean ({cache})")
    if found:
        print("clang-tidy: findings above", file=sys.stderr)
        return 1
    print("clang-tidy: clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
