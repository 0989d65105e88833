#!/usr/bin/env python3
"""Checks that every relative link in the repository's Markdown files
resolves: the file exists and, for a #fragment into a Markdown file, a
heading with that GitHub anchor exists there. Prints each broken link and
exits 1 when there is one. Run by `make lint`."""
import os
import re
import subprocess
import sys

LINK = re.compile(r'(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)|!\[[^\]]*\]\(([^)\s]+)\)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
FENCE = re.compile(r'^\s*(```|~~~)')


def slug(text):
    """GitHub's anchor for a heading: lower case, markup and punctuation
    dropped, spaces to hyphens."""
    text = re.sub(r'`([^`]*)`', r'\1', text)
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)
    text = text.replace('&lt;', '<').replace('&gt;', '>').replace('&amp;', '&')
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def lines_outside_fences(path):
    inside = False
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                inside = not inside
                continue
            if not inside:
                yield n, line


def anchors(path, cache={}):
    if path not in cache:
        seen, out = {}, set()
        for _, line in lines_outside_fences(path):
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else f'{s}-{k}')
        cache[path] = out
    return cache[path]


def main():
    root = subprocess.run(['git', 'rev-parse', '--show-toplevel'], capture_output=True, text=True, check=True).stdout.strip()
    files = subprocess.run(['git', 'ls-files', '--cached', '--others', '--exclude-standard', '*.md'],
                           cwd=root, capture_output=True, text=True, check=True).stdout.split()
    bad = 0
    for rel in files:
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            continue
        for n, line in lines_outside_fences(path):
            line = re.sub(r'`[^`]*`', '', line)
            for m in LINK.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r'^[a-z][a-z0-9+.-]*:', target) or target.startswith('//'):
                    continue
                file_part, _, frag = target.partition('#')
                dest = path if file_part == '' else os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                if not os.path.exists(dest):
                    print(f'{rel}:{n}: {target}: no such file')
                    bad += 1
                    continue
                if frag and dest.endswith('.md') and frag not in anchors(dest):
                    print(f'{rel}:{n}: {target}: no heading with anchor #{frag} in {os.path.relpath(dest, root)}')
                    bad += 1
    if bad:
        print(f'{bad} broken relative link(s)')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
