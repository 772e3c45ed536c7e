#!/usr/bin/env python3
"""Renders every tests/data/chat_templates/*.jinja template on every sample
conversation of conversations.json with Hugging Face's own renderer
(transformers' render_jinja_template after the message normalization that
apply_chat_template does first: keys whose value is None dropped), with
add_generation_prompt true and false, and writes expected.json: the reference
the C++ ChatTemplate unit test compares against.

  python3 scripts/dump_chat_template_reference.py [--check]

--check renders again and exits 1 when expected.json differs."""
import argparse
import json
import pathlib
import sys

from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "chat_templates"


def render_all():
    spec = json.loads((DATA / "conversations.json").read_text(encoding="utf-8"))
    cases = []
    for path in sorted(DATA.glob("*.jinja")):
        name = path.stem
        template = path.read_text(encoding="utf-8")
        tokens = spec["special_tokens"].get(name, {})
        for conv_name, conv in spec["conversations"].items():
            for add_gen in (False, True):
                case = {"template": name, "conversation": conv_name, "add_generation_prompt": add_gen}
                try:
                    rendered, _ = render_jinja_template(
                        conversations=[_normalize_chat_messages(conv["messages"])], tools=conv.get("tools"), chat_template=template,
                        add_generation_prompt=add_gen, **tokens)
                    case["output"] = rendered[0]
                except Exception as e:  # the template rejects the conversation: C++ must reject it too
                    case["error"] = f"{type(e).__name__}: {e}"
                cases.append(case)
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed expected.json")
    args = ap.parse_args()
    text = json.dumps({"cases": render_all()}, ensure_ascii=False, indent=1) + "\n"
    out = DATA / "expected.json"
    if args.check:
        if out.read_text(encoding="utf-8") != text:
            print("expected.json is stale: rerun scripts/dump_chat_template_reference.py", file=sys.stderr)
            return 1
        print("expected.json is up to date")
        return 0
    out.write_text(text, encoding="utf-8")
    cases = json.loads(text)["cases"]
    n_err = sum("error" in c for c in cases)
    print(f"wrote {out.name}: {len(cases)} cases ({n_err} rejected by their template)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
