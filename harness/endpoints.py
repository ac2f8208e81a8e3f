"""What compatible endpoints bend, and how the loop stays right anyway.

Every lesson's loop calls these on each reply (s03 defines the loop; s06 and s07 repeat it).
The reference API never needs most of this; proxies, gateways, llama-server and small models
do. Without each piece:
- decode_args: a tool input sent as JSON text ('{"command": "ls"}', "items": "[...]") is
  refused, though the model meant exactly that.
- check_args: a missing or mistyped argument becomes a TypeError deep in a tool.
- cut_call: a reply cut by max_tokens ends in a half-written call, and half a file is written.
- assistant_turn: the SDK's objects (with None fields, unknown and server blocks, a str
  input, a lone surrogate from half an emoji) go back into the history, and the next request
  is refused, or fails to encode, for every later call of the session.
- complete_tool_calls: a server that says end_turn beside a tool call loses that call.
- final_text: a turn cut short looks like a finished one.
"""

import json

from harness.terminal import clean_json, clean_text

JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
              "array": list, "object": dict}
CUT = {"max_tokens", "model_context_window_exceeded"}   # the reply stopped mid-way
KEEP_BLOCKS = {"text", "tool_use", "thinking", "redacted_thinking"}  # what the loop sends back
ENDED = {"max_tokens": "[answer cut: the model reached max_tokens]",
         "model_context_window_exceeded": "[answer cut: the conversation filled the context window]",
         "refusal": "[the model refused to continue with this request]"}


def decode_args(args: object, schema: dict) -> dict:
    """The arguments as the schema wants them, or ValueError.

    json.loads only parses data; the model's text is never run as code.
    """
    if isinstance(args, str):
        args = _json_or_none(args)
    if not isinstance(args, dict):
        raise ValueError("the arguments must be a JSON object such as {\"path\": \"a.txt\"}, "
                         f"got {type(args).__name__}")
    props = schema.get("properties", {})
    decoded = {}
    for name, value in args.items():
        want = props.get(name, {}).get("type")
        if want in ("array", "object") and isinstance(value, str):
            parsed = _json_or_none(value)
            value = parsed if isinstance(parsed, JSON_TYPES[want]) else value
        decoded[name] = value
    return decoded


def check_args(schema: dict, args: dict) -> None:
    """Top-level check of a tool call against its schema, so the model gets a clear error."""
    props = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in args:
            raise ValueError(f"missing required argument {name!r}")
    for name, value in args.items():
        if name not in props:
            raise ValueError(f"unexpected argument {name!r}; expected: {', '.join(props) or 'none'}")
        kinds = props[name].get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds] if kinds else []
        ok = any(isinstance(value, JSON_TYPES[k]) and not (isinstance(value, bool) and k != "boolean")
                 for k in kinds)
        if kinds and not ok:
            raise ValueError(f"argument {name!r} must be {' or '.join(kinds)}, "
                             f"got {type(value).__name__}")


def _json_or_none(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def cut_call(response) -> object:
    """The tool call a cut reply stopped inside, or None.

    Only the last block can be half-written; the calls before it were finished before it began.
    llama-server, for one, returns several parsed calls with stop_reason max_tokens.
    """
    content = response.content or []
    if response.stop_reason in CUT and content and content[-1].type == "tool_use":
        return content[-1]
    return None


def complete_tool_calls(response) -> list:
    """The tool calls to run: every complete one, whatever stop_reason says."""
    cut = cut_call(response)
    return [b for b in response.content or [] if b.type == "tool_use" and b is not cut]


def cut_note(response) -> list:
    """A text block telling the model its cut call was not run ([] when nothing was cut).

    The cut call is not in the history, so it gets no tool_result: it is said in words.
    """
    cut = cut_call(response)
    if cut is None:
        return []
    return [{"type": "text", "text": f"[your {cut.name} call was cut off by {response.stop_reason} "
                                     "before it was complete, so it was not run; send it again, in "
                                     "smaller pieces if it is long]"}]


def assistant_turn(response, note=print) -> dict:
    """The assistant message as plain dicts, safe to send again and to write as JSON."""
    cut = cut_call(response)
    if cut is not None:  # half-written: never keep (or run) it
        note(f"  [the reply was cut off by {response.stop_reason} inside a {cut.name} call: "
             "it was not run]")
    blocks = clean_json([b.model_dump(mode="json", exclude_none=True, warnings=False)
                         for b in response.content or [] if b is not cut])
    for b in [b for b in blocks if b["type"] not in KEEP_BLOCKS]:
        note(f"  [a {b['type']!r} block in the reply was left out: this harness does not use it]")
    blocks = [b for b in blocks if b["type"] in KEEP_BLOCKS]
    for b in blocks:  # the API accepts only an object as a tool call's input in the history
        if b["type"] == "tool_use" and not isinstance(b.get("input"), dict):
            decoded = _json_or_none(str(b.get("input")))
            b["input"] = decoded if isinstance(decoded, dict) else {}
    blocks = [b for b in blocks if b["type"] != "text" or b["text"].strip()]
    return {"role": "assistant", "content": blocks or [{"type": "text", "text": "(no text)"}]}


def final_text(response) -> str:
    """What the user sees when the turn ends, saying why it ended if that was not normal."""
    answer = "\n".join(b.text for b in response.content or [] if b.type == "text").strip()
    note = ENDED.get(response.stop_reason)
    return "\n".join(x for x in (clean_text(answer), note) if x) or "(the model returned no text)"
