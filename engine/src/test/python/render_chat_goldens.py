#!/usr/bin/env python3
"""Renders the golden prompts for the Java GLM-4.7-Flash chat renderer.

For every engine/src/test/resources/chat/golden/NAME.request.json (an OpenAI chat request body)
this writes NAME.prompt.txt: the bundled template (tokenizer.chat_template of the GGUF) rendered
by Jinja2 the way Hugging Face transformers renders chat templates (sandboxed environment,
trim_blocks, lstrip_blocks, tojson = json.dumps(ensure_ascii=False), add_generation_prompt).

The request body is turned into template variables by template_context(), which does what the
Java request parser (ChatRequestParser) does before rendering:
  * a tool call's "arguments" given as a JSON string is parsed into an object (the template
    iterates over arguments.items()),
  * "reasoning" is accepted as another name for "reasoning_content",
  * null content is the empty string (Jinja would print "None"),
  * a tool message whose content is an array of text parts gets the joined text (the template
    would print the Python repr of each part),
  * chat_template_kwargs.enable_thinking / clear_thinking and reasoning_effort "none" become the
    template variables enable_thinking and clear_thinking.

Usage: python3 engine/src/test/python/render_chat_goldens.py   (needs jinja2; python3-jinja2 on Debian)
"""
import json
import pathlib
import sys

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[4]
TEMPLATE = ROOT / "engine/src/main/resources/dev/glimmer/engine/chat/glm-4.7-flash.jinja"
GOLDEN = ROOT / "engine/src/test/resources/chat/golden"


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # The filter Hugging Face installs in place of Jinja's HTML-safe one.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def joined_text(parts):
    return "".join(p["text"] for p in parts)


def template_context(request):
    messages = []
    for source in request["messages"]:
        m = dict(source)
        if "content" in m and m["content"] is None:
            m["content"] = ""
        if m.get("role") == "tool" and isinstance(m.get("content"), list):
            m["content"] = joined_text(m["content"])
        if "reasoning_content" not in m and "reasoning" in m:
            m["reasoning_content"] = m["reasoning"]
        if m.get("tool_calls"):
            calls = []
            for call in m["tool_calls"]:
                call = dict(call)
                function = dict(call["function"])
                if isinstance(function.get("arguments"), str):
                    text = function["arguments"]
                    function["arguments"] = json.loads(text) if text.strip() else {}
                call["function"] = function
                calls.append(call)
            m["tool_calls"] = calls
        messages.append(m)
    context = {"messages": messages, "tools": request.get("tools"), "add_generation_prompt": True}
    kwargs = request.get("chat_template_kwargs") or {}
    if "enable_thinking" in kwargs:
        context["enable_thinking"] = kwargs["enable_thinking"]
    if request.get("reasoning_effort") == "none":
        context["enable_thinking"] = False
    if "clear_thinking" in kwargs:
        context["clear_thinking"] = kwargs["clear_thinking"]
    return context


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    template = env.from_string(TEMPLATE.read_bytes().decode("utf-8"))
    requests = sorted(GOLDEN.glob("*.request.json"))
    if not requests:
        sys.exit(f"no *.request.json in {GOLDEN}")
    for path in requests:
        request = json.loads(path.read_bytes().decode("utf-8"))
        prompt = template.render(**template_context(request))
        out = path.with_name(path.name.removesuffix(".request.json") + ".prompt.txt")
        out.write_bytes(prompt.encode("utf-8"))
        print(f"{out.relative_to(ROOT)}: {len(prompt)} chars")


if __name__ == "__main__":
    main()
