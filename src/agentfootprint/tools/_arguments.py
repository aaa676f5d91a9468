"""A ``@tool`` function's arguments: their Pydantic model, its JSON Schema, one validation a call.

The model is declared with the tool (``defer_build``) and the JSON Schema the model is shown is
generated from the model's core schema alone, exactly as ``model_json_schema()`` writes it.
Pydantic builds the validator — and, the first time in a process, loads its plugins, the
larger part of that cost — on the tool's first call, so a process that declares tools and
never calls one (an agent that answers directly, a tool catalog being linted) does not pay it.

A call is validated once: ``FunctionCall.bind`` turns the arguments into the function's
keyword arguments (the validated model's fields, plus the context parameter), which the
registry passes straight to the function (``tools/_registry.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from ._context import RunContext
    from ._validate import ArgumentIssue

__all__ = ["FunctionCall", "arguments_schema", "issues_of"]


class FunctionCall:
    """The ``execute`` of a ``@tool`` tool: validate the arguments with its model, call it.

    ``issues`` is the tool's ``validate``; the registry recognises the pair (``function_call``)
    and validates a call once with ``bind``, then calls ``func`` itself.
    """

    __slots__ = ("_validator", "context_param", "func", "model")

    def __init__(self, func: Callable[..., Any], model: type[BaseModel],
                 context_param: str | None) -> None:
        self.func = func
        """The function the tool was made from."""
        self.model = model
        """The arguments model (``extra="forbid"``; its validator is built on first use)."""
        self.context_param = context_param
        """The parameter that receives the call's ``RunContext``, if the function has one."""
        self._validator: Callable[[Any], BaseModel] | None = None

    def validator(self) -> Callable[[Any], BaseModel]:
        """The model's ``validate_python`` (what ``model_validate`` runs), built on first use."""
        found = self._validator
        if found is None:
            self.model.model_rebuild()  # (a deferred model: builds its validator)
            found = self._validator = self.model.__pydantic_validator__.validate_python
        return found

    def fields_validator(self) -> Callable[[Any], tuple[dict[str, Any], Any, Any]] | None:
        """The ``validate_python`` of the model's fields schema alone, or ``None``.

        Validating a call gives the same fields dict (and the same errors) as ``validator()``
        does, without building the model instance the dict would be the fields of: the
        registry's one validation per call (``[0]`` of its result is the keyword arguments).
        ``None`` when the model's core schema is anything but a plain model over its fields
        (definitions, a custom ``__init__``, a root model, a model validator): then
        ``validator()``.
        """
        self.validator()  # (builds the deferred model: its core schema)
        schema: Any = getattr(self.model, "__pydantic_core_schema__", None)
        if (not isinstance(schema, dict) or schema.get("type") != "model"
                or not set(schema) <= _PLAIN_MODEL or schema.get("custom_init")
                or schema.get("root_model") or schema.get("post_init")
                or not isinstance(schema.get("schema"), dict)
                or schema["schema"].get("type") != "model-fields"):
            return None
        from pydantic_core import SchemaValidator

        try:
            fields = SchemaValidator(schema["schema"], schema.get("config"))
        except Exception:  # a schema pydantic-core only accepts inside its model: as it is
            return None
        return fields.validate_python

    def bind(self, args: dict[str, Any] | None, ctx: RunContext[Any]) -> dict[str, Any]:
        """The function's keyword arguments for ``args``; raises ``ValidationError``."""
        # the validated model is this call's alone: its fields dict is the keyword arguments
        kwargs: dict[str, Any] = (self._validator or self.validator())(
            args if args is not None else {}).__dict__
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        return kwargs

    def issues(self, args: dict[str, Any] | None) -> list[ArgumentIssue]:
        """The argument issues Pydantic finds (at most ten), or none."""
        try:
            (self._validator or self.validator())(args if args is not None else {})
        except ValidationError as exc:
            return issues_of(exc)
        return []

    def __call__(self, args: dict[str, Any] | None, ctx: RunContext[Any]) -> Any:
        return self.func(**self.bind(args, ctx))


_PLAIN_MODEL = frozenset(("type", "cls", "schema", "custom_init", "root_model", "post_init",
                          "config", "ref", "metadata"))
"""The keys of a ``model`` core schema that only wraps its fields (``fields_validator``)."""


def function_call(execute: object, validate: object) -> FunctionCall | None:
    """``execute`` when it is a ``@tool``'s call and ``validate`` is still its own check."""
    if type(execute) is FunctionCall and validate == execute.issues:
        return execute
    return None


def issues_of(error: ValidationError) -> list[ArgumentIssue]:
    """Pydantic's errors (the first ten) as argument issues: path, expected, got (a type)."""
    return [_issue(e) for e in error.errors()[:10]]


def _issue(error: Any) -> ArgumentIssue:
    path = ".".join(str(p) for p in error.get("loc", ()))
    kind = error.get("type", "")
    if kind == "missing":
        return {"path": path, "expected": "a value", "got": "missing"}
    if kind == "extra_forbidden":
        return {"path": path, "expected": "no such field", "got": type(error.get("input")).__name__}
    message = str(error.get("msg", kind))
    for lead in ("Input should be ", "Value should be "):  # pydantic's phrasing, minus the lead
        if message.startswith(lead):
            message = message[len(lead):]
    return {"path": path, "expected": message, "got": type(error.get("input")).__name__}


def arguments_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model.model_json_schema()``, generated without building the model's validator.

    Pydantic's own generators make it (``_generated_schema``); if they cannot be driven that
    way (another Pydantic version) or fail, ``model_json_schema()`` itself answers, errors
    and all.
    """
    try:
        return _generated_schema(model)
    except Exception:
        return model.model_json_schema()


def _generated_schema(model: type[BaseModel]) -> dict[str, Any]:
    """What ``model_json_schema`` does after building the model: its core schema (as the
    model's build makes it), then ``GenerateJsonSchema`` in validation mode."""
    from pydantic._internal._config import ConfigWrapper
    from pydantic._internal._generate_schema import GenerateSchema
    from pydantic.json_schema import GenerateJsonSchema

    generator = GenerateSchema(ConfigWrapper(model.model_config, check=False))
    core = generator.clean_schema(generator.generate_schema(model))
    schema: dict[str, Any] = GenerateJsonSchema().generate(core, mode="validation")
    return schema
