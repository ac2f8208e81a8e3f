"""A tool call's input checked against the tool's schema, before the tool runs.

Relied on by s03's call_tool (and so s06's and s07's): the API does not hold a model to a
tool's input_schema, and weak models, local servers and gateways break it. Without each piece:
- the check of required, unknown and mistyped arguments: a missing argument is a TypeError deep
  in the tool, and a model that sent {"file": "a.txt"} is told "unexpected keyword argument",
  not the arguments it should have sent.
- _decoded: JSON text where an object or an array belongs ('{"command": "ls"}', a todo list as
  a string) is refused though the model meant exactly that (json.loads only parses: nothing
  runs); an input of null fails the turn instead of being no arguments.
- _is_a: True passes for an integer (read_file's limit of 1), though in JSON a boolean is not
  a number. JSON's names (json_name): "must be integer, got NoneType" is Python's word for null.
- null and 2.0 (_decoded): a weak model's {"offset": null} (no offset) and 2.0 (an integer, as
  JSON Schema counts it) were refused.
What is inside an argument (each todo item) the tool itself checks.
"""

import json

from harness.clean import clean_json

JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
              "array": list, "object": dict}
JSON_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
              dict: "object", type(None): "null"}


def checked(given: object, name: str, tools: list) -> dict:
    """The arguments as the tool's schema wants them, or ValueError saying what is wrong."""
    schema = {}
    for tool in tools:
        if tool["name"] == name:
            schema = tool.get("input_schema", {})
    arguments = _decoded(given, schema)
    props = schema.get("properties", {})
    for required in schema.get("required", []):
        if required not in arguments:
            raise ValueError(f"missing required argument {required!r}")
    for argument, value in arguments.items():
        if argument not in props:
            raise ValueError(f"unexpected argument {argument!r}; expected: "
                             f"{', '.join(props) or 'none'}")
        kinds = props[argument].get("type")
        if not kinds:
            continue
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is_a(value, kind) for kind in kinds):
            raise ValueError(f"argument {argument!r} must be {' or '.join(kinds)}, got "
                             f"{json_name(value)}")
    return arguments


def _decoded(given: object, schema: dict) -> dict:
    """The arguments (None: none), JSON text decoded where an object or an array belongs."""
    sent = json_name(given)             # named as the model sent it, not as it decoded
    if given is None:
        given = {}
    if isinstance(given, str):
        given = json_or_none(given)
    if not isinstance(given, dict):
        raise ValueError("the arguments must be a JSON object such as {\"path\": \"a.txt\"}, "
                         f"got {sent}")
    props = schema.get("properties", {})
    decoded = {}
    for argument, value in given.items():
        want = props.get(argument, {}).get("type")
        # null for an optional number or flag (offset, limit): not given. A string's null
        # (owner) may mean "none", and an unknown argument's is still refused.
        if value is None and want in ("integer", "number", "boolean") \
                and argument not in schema.get("required", []):
            continue
        if want == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        if want in ("array", "object") and isinstance(value, str):
            parsed = json_or_none(value)
            if isinstance(parsed, JSON_TYPES[want]):
                value = parsed
        decoded[argument] = value
    return decoded


def _is_a(value, kind: str) -> bool:
    """Whether value is of the JSON type kind (a bool is only a boolean)."""
    if isinstance(value, bool) and kind != "boolean":
        return False
    return isinstance(value, JSON_TYPES.get(kind, object))


def json_name(value) -> str:
    """The JSON type of value, as a schema names it ("null", not NoneType)."""
    return JSON_NAMES.get(type(value), type(value).__name__)


def json_or_none(text: str):
    """The data of a JSON text, every string sendable (an escape may be half an emoji), or None."""
    try:
        return clean_json(json.loads(text))
    except (ValueError, RecursionError):
        return None
