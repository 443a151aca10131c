#!/usr/bin/env python3
"""Prints deb-src stanzas (deb822) for the machine's own Debian bookworm `deb` entries, so that
`apt-get source` finds the source of the packages installed: .ci/run writes them to
/etc/apt/sources.list.d/corelane-deb-src.sources. Reads the enabled *.sources files
(deb822) and sources.list / *.list (one-line entries); prints nothing twice."""
import glob
import re
import sys

OURS = "corelane-deb-src.sources"


def bookworm(suites):
    return [s for s in suites if s.split("-")[0] == "bookworm"]


def deb822(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for stanza in re.split(r"\n\s*\n", text):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.split()
        if fields.get("enabled", ["yes"])[0].lower() == "no":
            continue
        if "deb" not in fields.get("types", []):
            continue
        yield (fields.get("uris", []), fields.get("suites", []),
               fields.get("components", []), fields.get("signed-by", []))


def one_line(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if not words or words[0] != "deb":
                continue
            words = words[1:]
            signed = []
            if words and words[0].startswith("["):
                options = []
                while words:
                    word = words.pop(0)
                    options.append(word.strip("[]"))
                    if word.endswith("]"):
                        break
                signed = [o.split("=", 1)[1] for o in options if o.startswith("signed-by=")]
            if len(words) >= 2:
                yield ([words[0]], [words[1]], words[2:], signed)


def main():
    entries = []
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        if not path.endswith(OURS):
            entries += deb822(path)
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
        try:
            entries += one_line(path)
        except FileNotFoundError:
            pass
    seen = set()
    stanzas = []
    for uris, suites, components, signed in entries:
        suites = bookworm(suites)
        key = (tuple(uris), tuple(suites), tuple(components))
        if not uris or not suites or key in seen:
            continue
        seen.add(key)
        stanza = ["Types: deb-src", "URIs: " + " ".join(uris), "Suites: " + " ".join(suites),
                  "Components: " + " ".join(components or ["main"])]
        if signed:
            stanza.append("Signed-By: " + " ".join(signed))
        stanzas.append("\n".join(stanza))
    if not stanzas:
        sys.exit("deb-src: no bookworm deb entry in /etc/apt/sources.list*; apt-get source cannot work")
    print("\n\n".join(stanzas))


main()
