"""Rejected tool arguments → one redacted ``[invalid_input]`` message in our own words.

FastMCP validates a call's arguments against the tool's signature before the tool runs,
and on failure returns pydantic's text: every wrong value quoted whole (an AWS key passed
as a list came back in clear), its Python type, and a docs URL. ``ArgumentErrors`` turns
that into ``[invalid_input] invalid arguments for add_document: content: expected a
string, got a list`` — which argument, what was expected, the JSON type that came —
never the value itself, and the result still passes through ``redact_output``.
"""

from __future__ import annotations

from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware
from pydantic import ValidationError
from pydantic_core import ErrorDetails

_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "an object",
    "literal_error": "",  # its message lists the allowed values
}
_MISSING = {"missing", "missing_argument"}
_UNEXPECTED = {"unexpected_keyword_argument", "extra_forbidden"}


def describe_invalid_arguments(
    tool: str, error: ValidationError, arguments: tuple[str, ...] = ()
) -> str:
    """``[invalid_input] …`` for a pydantic error over ``tool``'s arguments, redacted."""
    from kb_mcp.redact import redact_output  # with the library, after initialize's answer

    problems = [_describe(detail, tool, arguments) for detail in error.errors(include_url=False)]
    message = f"[invalid_input] invalid arguments for {tool}: " + "; ".join(problems[:5])
    if len(problems) > 5:
        message += f"; and {len(problems) - 5} more"
    return redact_output(message).text


def _describe(detail: ErrorDetails, tool: str, arguments: tuple[str, ...]) -> str:
    where = _location(detail["loc"])
    kind = detail["type"]
    if kind in _MISSING:
        return f"{where}: missing (a required argument)"
    if kind in _UNEXPECTED:
        takes = f"; it takes {', '.join(arguments)}" if arguments else ""
        return f"{where}: not an argument of {tool}{takes}"
    expected = _EXPECTED.get(kind)
    if expected:
        return f"{where}: expected {expected}, got {json_type(detail.get('input'))}"
    message = detail["msg"]
    return f"{where}: {message[:1].lower()}{message[1:]}"


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "arguments"


def json_type(value: Any) -> str:
    """The JSON name of a value's type, as an agent wrote it: never the value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "a value of another type"


def _validation_error(exc: BaseException) -> ValidationError | None:
    for candidate in (exc, exc.__cause__):
        if isinstance(candidate, ValidationError):
            return candidate
    return None


class ArgumentErrors(Middleware):
    """Rewrites FastMCP's argument-validation failures as ``describe_invalid_arguments``."""

    def __init__(self, server: Any) -> None:
        self._server = server

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        try:
            return await call_next(context)
        except Exception as exc:
            error = _validation_error(exc)
            if error is None:
                raise
            name = context.message.name
            raise ToolError(
                describe_invalid_arguments(name, error, await self._arguments(name))
            ) from exc

    async def _arguments(self, name: str) -> tuple[str, ...]:
        try:
            tool = await self._server.get_tool(name)
            return tuple(tool.parameters.get("properties", {}))
        except Exception:  # the names are a courtesy; the error must go out regardless
            return ()
