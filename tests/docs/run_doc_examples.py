#!/usr/bin/python3
"""Runs the command blocks of the docs against a fresh dlockd and compares their output (issue 41,
"Docs that are tested"; the convention: CONTRIBUTING.md "Doc examples are tests").

    run_doc_examples.py --dlockd PATH --dlock PATH --build DIR --work DIR FILE.md...

A fenced block is marked by an HTML comment on the line before its opening fence (blank lines
between are allowed):

    <!-- doc-test: run [exit=N] [stubs=NAME,...] [match=KIND,...] -->  run it (see below)
    <!-- doc-test: output -->        the expected output of the run block before it
    <!-- doc-test: skip REASON -->   not run; REASON says why (required)

A run block is either a transcript, whose commands start with `$ ` (a line ending in `\\`
continues the command) followed by what they print, or a script (no `$ ` lines), whose expected
output, if the doc shows it, is the next block marked `output`. Each block runs in bash, in a
scratch directory, stdout and stderr together; a transcript's commands run in one shell, each
must exit 0, and each one's output is compared; a script must exit with `exit=N` (default 0).

Expected output lines are matched whole, with placeholders: <token> (a fencing token), <id> (a
session id), <time> (an RFC 3339 UTC time), <n> (an integer), <secret> (a dlk_ bearer token),
<sha256> (64 hex digits) and `…` (any text on that line). `match=secret,sha256` makes literal
values of those kinds in the expected output stand for any such value (an example's token).

Blocks of one file run in order against one dlockd started for that file (embedded store,
default settings), as a reader following the page would. The address `127.0.0.1:7070` in a block
is replaced by that dlockd's, DLOCK_SERVER is set to it, `build/` in the scratch directory is the
build tree, dlock and dlockd are on PATH; `stubs=` puts commands that print nothing and exit 0
in place of the reader's own programs (`./train.sh`, `rsync`).

A fenced block that is not marked fails the run if it looks like a command: language sh, bash,
shell or console, or a line starting with `$ `; tests/docs/skipped-blocks.txt skips, with a
reason, the blocks of pages not yet marked. The run prints how many blocks each file had run
and skipped."""
import argparse
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlockd_launch import Dlockd, sanitizer_options  # noqa: E402

MARKER = re.compile(r"^<!--\s*doc-test:\s*(run|output|skip)\b(.*?)-->\s*$")
FENCE = re.compile(r"^(\s*)(```+)\s*([\w-]*)")
COMMAND_LANGUAGES = {"sh", "bash", "shell", "console", "shell-session"}
PLACEHOLDERS = {
    "<token>": r"[0-9]+",
    "<id>": r"[A-Za-z0-9_-]+",
    "<time>": r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z",
    "<n>": r"-?[0-9]+",
    "<secret>": r"dlk_[A-Za-z0-9_-]{43}",
    "<sha256>": r"[0-9a-f]{64}",
    "…": r".*",
}
DEFAULT_ADDRESS = "127.0.0.1:7070"
BLOCK_TIMEOUT = 60


class Block:
    def __init__(self, path, line, language, lines, marker, options):
        self.path, self.line, self.language, self.lines = path, line, language, lines
        self.marker, self.options = marker, options
        self.output = None  # the expected output block of a script

    def where(self):
        return f"{self.path}:{self.line}"

    def looks_like_command(self):
        return self.language in COMMAND_LANGUAGES or any(l.startswith("$ ") for l in self.lines)

    def is_transcript(self):
        return any(l.startswith("$ ") for l in self.lines)


def parse(path):
    """The fenced blocks of a markdown file, each with the marker before it (or None)."""
    text = open(path, encoding="utf-8").read().split("\n")
    blocks, pending, index = [], None, 0
    while index < len(text):
        line = text[index]
        marker = MARKER.match(line.strip())
        if marker:
            pending = (marker.group(1), marker.group(2).strip(), index + 1)
            index += 1
            continue
        fence = FENCE.match(line)
        if fence:
            indent, ticks, language = fence.groups()
            body, index = [], index + 1
            while index < len(text) and not text[index].strip().startswith(ticks):
                line_text = text[index]
                body.append(line_text[len(indent):] if line_text.startswith(indent) else line_text)
                index += 1
            kind, options = (pending[0], pending[1]) if pending else (None, "")
            blocks.append(Block(path, index - len(body), language, body, kind, options))
            pending = None
            index += 1
            continue
        if line.strip() and pending:
            raise SystemExit(f"{path}:{pending[2]}: doc-test marker not followed by a block")
        index += 1
    return blocks


def options_of(block):
    options = {}
    for word in block.options.split():
        name, _, value = word.partition("=")
        options[name] = value
    return options


def generalize(expected_line, kinds):
    """`match=` kinds: literal values in an expected line become placeholders."""
    for kind in kinds:
        placeholder = f"<{kind}>"
        expected_line = re.sub(PLACEHOLDERS[placeholder], placeholder, expected_line)
    return expected_line


def pattern_of(expected_line):
    parts = re.split("(" + "|".join(re.escape(p) for p in PLACEHOLDERS) + ")", expected_line)
    return re.compile("".join(PLACEHOLDERS.get(part, re.escape(part)) for part in parts))


def compare(where, expected, actual, kinds=()):
    """Failure messages: every expected line must match the actual line at its place, whole."""
    expected = [generalize(line.rstrip(), kinds) for line in expected]
    actual = [line.rstrip() for line in actual]
    while actual and not actual[-1]:
        actual.pop()
    while expected and not expected[-1]:
        expected.pop()
    for number, (want, got) in enumerate(zip(expected, actual), 1):
        if not pattern_of(want).fullmatch(got):
            return [f"{where}: output line {number}:\n  expected: {want}\n  got:      {got}"]
    if len(expected) != len(actual):
        return [f"{where}: expected {len(expected)} output lines, got {len(actual)}:\n"
                + "\n".join("  | " + line for line in actual)]
    return []


def split_transcript(lines):
    """[(command, expected output lines)] of a `$ ` transcript."""
    steps, index = [], 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            raise ValueError(f"output before the first command: {line!r}")
        command = [line[2:]]
        index += 1
        while command[-1].endswith("\\") and index < len(lines):
            command.append(lines[index])
            index += 1
        output = []
        while index < len(lines) and not lines[index].startswith("$ "):
            output.append(lines[index])
            index += 1
        steps.append(("\n".join(command), output))
    return steps


def side_skips(path):
    """[(file, first-line start, reason)] of skipped-blocks.txt."""
    skips = []
    for line in open(path, encoding="utf-8"):
        if line.strip() and not line.startswith("#"):
            file, start, reason = (part.strip() for part in line.split(" | ", 2))
            skips.append((file, start, reason))
    return skips


class Runner:
    def __init__(self, args):
        self.args = args
        self.skips = side_skips(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "skipped-blocks.txt"))
        self.skips_used = set()
        self.failures = []
        self.counts = {}

    def environment(self, scratch, server):
        stub_bin = os.path.join(scratch, ".stubs")
        return {
            "PATH": ":".join([stub_bin, os.path.dirname(self.args.dlock),
                              os.path.dirname(self.args.dlockd), "/usr/local/bin", "/usr/bin",
                              "/bin"]),
            "HOME": scratch, "USER": "doc", "LANG": "C.UTF-8", "TZ": "UTC",
            "DLOCK_SERVER": server.url,
            **sanitizer_options(),
        }

    def make_stubs(self, scratch, block):
        names = [n for n in options_of(block).get("stubs", "").split(",") if n]
        stub_bin = os.path.join(scratch, ".stubs")
        os.makedirs(stub_bin, exist_ok=True)
        for name in names:
            target = os.path.join(scratch, name) if "/" in name else os.path.join(stub_bin, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w") as stub:
                stub.write("#!/bin/sh\nexit 0\n")
            os.chmod(target, 0o755)

    def bash(self, script, scratch, server):
        try:
            done = subprocess.run(["bash", "-c", script], cwd=scratch,
                                  env=self.environment(scratch, server),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired as timeout:
            return None, (timeout.output or b"").decode(errors="replace")
        return done.returncode, done.stdout.decode(errors="replace")

    def run_block(self, block, scratch, server):
        text = "\n".join(block.lines).replace(DEFAULT_ADDRESS, server.address)
        self.make_stubs(scratch, block)
        where = block.where()
        kinds = [k for k in options_of(block).get("match", "").split(",") if k]
        for kind in kinds:
            if f"<{kind}>" not in PLACEHOLDERS:
                self.failures.append(f"{where}: match={kind}: no such placeholder")
                return
        if block.is_transcript():
            try:
                steps = split_transcript(text.split("\n"))
            except ValueError as error:
                self.failures.append(f"{where}: {error}")
                return
            # After each command its status, behind a record separator no doc prints.
            script = "".join(f"{command}\nprintf '\\036%s\\n' \"$?\"\n" for command, _ in steps)
            status, output = self.bash(script, scratch, server)
            if status is None:
                self.failures.append(f"{where}: timed out after {BLOCK_TIMEOUT} s:\n{output}")
                return
            pieces = output.split("\x1e")
            outputs, statuses = [pieces[0]], []
            for piece in pieces[1:]:
                exit_status, _, rest = piece.partition("\n")
                statuses.append(exit_status)
                outputs.append(rest)
            for number, (command, expected) in enumerate(steps):
                if number >= len(statuses):
                    self.failures.append(f"{where}: `{command}` did not finish:\n{output}")
                    return
                if statuses[number] != "0":
                    self.failures.append(
                        f"{where}: `{command}` exited {statuses[number]}:\n{outputs[number]}")
                self.failures += compare(f"{where} `{command}`", expected,
                                         outputs[number].split("\n"), kinds)
            return
        want_status = int(options_of(block).get("exit", "0"))
        status, output = self.bash(text, scratch, server)
        if status is None:
            self.failures.append(f"{where}: timed out after {BLOCK_TIMEOUT} s:\n{output}")
            return
        if status != want_status:
            self.failures.append(f"{where}: exited {status}, not {want_status}:\n{output}")
        if block.output is not None:
            self.failures += compare(where, block.output.lines, output.split("\n"), kinds)

    def side_skip(self, path, block):
        name = os.path.relpath(os.path.abspath(path), self.args.root)
        first = next((line for line in block.lines if line.strip()), "")
        for skip in self.skips:
            if skip[0] == name and first.startswith(skip[1]):
                self.skips_used.add(skip)
                return True
        return False

    def run_file(self, path):
        blocks = parse(path)
        counts = {"run": 0, "skipped": 0, "other": 0}
        runnable, previous = [], None
        for block in blocks:
            if block.marker == "run":
                runnable.append(block)
                counts["run"] += 1
            elif block.marker == "output":
                if previous is None or previous.marker != "run" or previous.is_transcript():
                    self.failures.append(f"{block.where()}: an output block must follow a run "
                                         "block that is a script")
                else:
                    previous.output = block
            elif block.marker == "skip":
                if not block.options:
                    self.failures.append(f"{block.where()}: doc-test: skip needs a reason")
                counts["skipped"] += 1
            elif block.looks_like_command() and self.side_skip(path, block):
                counts["skipped"] += 1
            elif block.looks_like_command():
                self.failures.append(f"{block.where()}: a command block without a doc-test "
                                     "marker (run it, or skip it with a reason)")
            else:
                counts["other"] += 1
            previous = block
        self.counts[path] = counts
        if not runnable:
            return
        name = re.sub(r"[^A-Za-z0-9]+", "_", os.path.relpath(path, self.args.root))
        work = os.path.join(self.args.work, name)
        shutil.rmtree(work, ignore_errors=True)
        scratch = os.path.join(work, "scratch")
        os.makedirs(scratch)
        os.symlink(self.args.build, os.path.join(scratch, "build"))
        server = Dlockd(self.args.dlockd, os.path.join(work, "dlockd"))
        try:
            for block in runnable:
                self.run_block(block, scratch, server)
        finally:
            if server.stop() != 0:
                self.failures.append(f"{path}: dlockd did not stop cleanly: {server.log_path}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dlockd", required=True)
    parser.add_argument("--dlock", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--root", default=os.getcwd(),
                        help="the checkout: names in the report and in skipped-blocks.txt")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    runner = Runner(args)
    for path in args.files:
        runner.run_file(path)
    total = {"run": 0, "skipped": 0}
    for path, counts in runner.counts.items():
        print(f"doc-test: {os.path.relpath(path, args.root)}: {counts['run']} run, "
              f"{counts['skipped']} skipped, {counts['other']} not commands")
        total["run"] += counts["run"]
        total["skipped"] += counts["skipped"]
    if len(args.files) > 1:  # the whole set: a stale line of skipped-blocks.txt is an error
        for skip in set(runner.skips) - runner.skips_used:
            runner.failures.append(f"skipped-blocks.txt: {skip[0]} | {skip[1]}: no such block")
    for failure in runner.failures:
        print(f"doc-test: FAIL: {failure}")
    print(f"doc-test: {total['run']} blocks run, {total['skipped']} skipped, "
          f"{len(runner.failures)} failures")
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
