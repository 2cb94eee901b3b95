#!/usr/bin/env python3
"""Writes docs/device-api.md: every public item of the device crate (streamline-device) with the
first line of its documentation, module by module. `--check` fails when the page is stale."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "device" / "src"
PAGE = ROOT / "docs" / "device-api.md"

ITEM = re.compile(r"^\s*pub (?:const )?(?:unsafe )?(fn|struct|enum|trait|const|type|macro_rules!)\s*(\w+)")
MACRO = re.compile(r"^macro_rules! (\w+)")
OP = re.compile(r"^\s*(\w+), \"")


def sentence(docs):
    """The first sentence of a doc comment's first paragraph."""
    para = []
    for d in docs:
        if not d:
            break
        para.append(d)
    text = " ".join(para)
    m = re.search(r"\.(\s|$)", text)
    return text[: m.start() + 1] if m else text


def first_doc(lines, i):
    """The first sentence of the doc comment above line ``i``."""
    j = i - 1
    while j >= 0 and (lines[j].strip().startswith("#[") or lines[j].strip().startswith("///")):
        j -= 1
    return sentence([ln.strip()[3:].strip() for ln in lines[j + 1:i] if ln.strip().startswith("///")])


def items(path):
    lines = path.read_text().splitlines()
    found = []
    exported_macro = False
    in_macro_call = None
    for i, ln in enumerate(lines):
        if ln.startswith("#[macro_export]"):
            exported_macro = True
            continue
        m = MACRO.match(ln)
        if m:
            if exported_macro and not m.group(1).startswith("__"):
                found.append((f"{m.group(1)}!", first_doc(lines, i - 1)))
            exported_macro = False
            continue
        m = re.match(r"^(\w+_op)! \{", ln)
        if m:
            in_macro_call = i
            continue
        if in_macro_call is not None:
            o = OP.match(ln)
            if o:
                docs = [x.strip()[3:].strip() for x in lines[in_macro_call + 1:i] if x.strip().startswith("///")]
                found.append((f"{o.group(1)}()", sentence(docs)))
                in_macro_call = None
            continue
        m = ITEM.match(ln)
        if m and not ln.startswith("    pub fn") or (m and ln.startswith("    pub")):
            kind, name = m.groups()
            if name.startswith("__"):
                continue
            found.append((name if kind != "fn" else f"{name}()", first_doc(lines, i)))
    return found


def render():
    out = [
        "# Device API",
        "",
        "Every public item of `streamline-device`, the crate kernels are written with, and the",
        "first line of its documentation (the full contract, `# Safety` included, is on the item).",
        "Modules other than `params` and `random` exist only when compiling for `nvptx64`; the",
        "tensor-core ones only for the architectures that have their instructions. Regenerate with",
        "`python3 scripts/device_api.py`.",
        "",
    ]
    for path in sorted(SRC.glob("*.rs")):
        lines = path.read_text().splitlines()
        name = "crate root" if path.stem == "lib" else f"`{path.stem}`"
        out.append(f"## {name}")
        out.append("")
        doc = sentence([ln[3:].strip() for ln in lines if ln.startswith("//!")])
        if doc and path.stem != "lib":
            out.append(doc)
            out.append("")
        for item, doc in items(path):
            out.append(f"- `{item}`: {doc}" if doc else f"- `{item}`")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        if not PAGE.exists() or PAGE.read_text() != text:
            sys.exit("docs/device-api.md is stale: run python3 scripts/device_api.py")
    else:
        PAGE.write_text(text)
