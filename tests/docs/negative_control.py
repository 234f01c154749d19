#!/usr/bin/python3
"""The doc-example runner's negative control (CTest doc_examples_negative_control_test): doctored
copies of README.md and docs/cli.md must fail run_doc_examples.py, each for the reason doctored.

    negative_control.py RUNNER_ARGS... -- ROOT WORK

1. README.md with one expected output line changed (`released` -> `released!`);
2. README.md with a placeholder made a literal (`<token>` -> `1`, what the README once claimed);
3. docs/cli.md with a line of a transcript's output changed;
4. README.md with the marker of a command block removed.
The untouched README.md must pass, so that each failure is the doctoring's."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(runner_args, work, name, text):
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, name)
    with open(path, "w", encoding="utf-8") as copy:
        copy.write(text)
    done = subprocess.run([sys.executable, "-B", os.path.join(HERE, "run_doc_examples.py"),
                           *runner_args, "--work", os.path.join(work, "runs"), "--root", work,
                           path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return done.returncode, done.stdout


def doctor(text, old, new, count=1):
    if text.count(old) != count:
        raise SystemExit(f"negative_control: {old!r} is no longer in the page: update this test")
    return text.replace(old, new)


def main():
    split = sys.argv.index("--")
    runner_args, (root, work) = sys.argv[1:split], sys.argv[split + 1:]
    readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    cli = open(os.path.join(root, "docs", "cli.md"), encoding="utf-8").read()
    cases = [
        ("untouched README.md", "README.md", readme, None),
        ("a changed output line", "README.md", doctor(readme, "\nreleased\n", "\nreleased!\n"),
         "expected: released!"),
        ("a placeholder made a literal", "README.md",
         doctor(readme, "with token <token>\n", "with token 1\n"),
         "expected: holding payouts/batch-17 with token 1"),
        ("a changed transcript line", "cli.md",
         doctor(cli, "# add it, then send each dlockd SIGHUP:\n",
                "# add it, then restart each dlockd:\n"),
         "expected: # add it, then restart each dlockd:"),
        ("a command block without its marker", "README.md",
         doctor(readme, "<!-- doc-test: run -->\n```sh\nS=http", "```sh\nS=http"),
         "a command block without a doc-test marker"),
    ]
    failures = []
    for number, (what, name, text, wanted) in enumerate(cases):
        status, output = run(runner_args, os.path.join(work, str(number)), name, text)
        if wanted is None:
            ok = status == 0
        else:
            ok = status == 1 and wanted in output
        print(f"negative_control: {what}: runner exited {status}: {'ok' if ok else 'WRONG'}")
        if not ok:
            failures.append(what)
            print(output)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
