"""Every relative link of README.md and docs/**/*.md resolves: the file exists and, for a
`#fragment` into a Markdown page, one of its headings makes that anchor (GitHub's rule: lower
case, punctuation dropped, spaces to '-'). Links in code blocks and to URLs are not checked.

    python3 tests/docs/check_links.py ROOT
"""
import glob
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#+\s+(.*)")


def lines_outside_code(path):
    fence = False
    with open(path, encoding="utf-8") as text:
        for number, line in enumerate(text, 1):
            if line.lstrip().startswith("```"):
                fence = not fence
                continue
            if not fence:
                yield number, line


def anchors(path):
    found = set()
    for _, line in lines_outside_code(path):
        heading = HEADING.match(line)
        if heading:
            title = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            found.add(title.replace(" ", "-"))
    return found


def main(root):
    pages = [os.path.join(root, "README.md")] + sorted(
        glob.glob(os.path.join(root, "docs/**/*.md"), recursive=True))
    broken = 0
    for page in pages:
        for number, line in lines_outside_code(page):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, fragment = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                where = f"{os.path.relpath(page, root)}:{number}"
                if not os.path.exists(dest):
                    print(f"{where}: no such file: {target}")
                    broken += 1
                elif fragment and dest.endswith(".md") and fragment not in anchors(dest):
                    print(f"{where}: no heading makes the anchor: {target}")
                    broken += 1
    print(f"check_links: {len(pages)} pages, {broken} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
