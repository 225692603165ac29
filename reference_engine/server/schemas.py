"""Request bodies of the OpenAI-compatible endpoints.

Strict types (a string is never a number), OpenAI's ranges, and tolerance for OpenAI fields
we do not model (`extra="allow"`), so real client traffic replays unchanged. Checks that need
the model (context length, the served name) live in `sampling.py` and `prompts.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_STOP_SEQUENCES = 4
MAX_TOP_LOGPROBS = 20
# torch.Generator.manual_seed accepts exactly this range
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1


class _Body(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class TextPart(_Body):
    type: Literal["text"]
    text: str


FUNCTION_NAME = r"^[a-zA-Z0-9_-]{1,64}$"  # OpenAI's rule for a function's name


class FunctionCall(_Body):
    name: Annotated[str, Field(min_length=1)]
    arguments: str  # JSON text, as the model wrote it


class MessageToolCall(_Body):
    """A call an earlier assistant turn made (`messages[i].tool_calls[j]`)."""

    id: Annotated[str, Field(min_length=1)]
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    # null only for an assistant turn that made tool calls
    content: str | Annotated[list[TextPart], Field(min_length=1)] | None
    name: str | None = None
    tool_calls: Annotated[list[MessageToolCall], Field(min_length=1)] | None = None
    tool_call_id: Annotated[str, Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _roles(self) -> ChatMessage:
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError("only an assistant message has `tool_calls`")
        if self.content is None and self.tool_calls is None:
            raise ValueError("`content` may be null only in an assistant message with "
                             "`tool_calls`")
        if self.role == "tool" and self.tool_call_id is None:
            raise ValueError("a `tool` message needs the `tool_call_id` it answers")
        return self

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class FunctionDefinition(_Body):
    name: Annotated[str, Field(pattern=FUNCTION_NAME)]
    description: str | None = None
    parameters: dict[str, Any] | None = None  # a JSON Schema object
    strict: bool | None = None


class Tool(_Body):
    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(_Body):
    name: Annotated[str, Field(pattern=FUNCTION_NAME)]


class NamedToolChoice(_Body):
    type: Literal["function"]
    function: NamedFunction


class JSONSchemaFormat(_Body):
    name: Annotated[str, Field(pattern=FUNCTION_NAME)]
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("`json_schema` is required when the type is json_schema")
        return self


class StreamOptions(_Body):
    include_usage: bool | None = None


class SamplingFields(_Body):
    """The fields both endpoints share."""

    model: str | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    seed: Annotated[int, Field(ge=SEED_MIN, le=SEED_MAX)] | None = None
    stop: (Annotated[str, Field(min_length=1)]
           | Annotated[list[Annotated[str, Field(min_length=1)]],
                       Field(max_length=MAX_STOP_SEQUENCES)]
           | None) = None
    n: Annotated[int, Field(ge=1)] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    presence_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] | None = None
    logit_bias: dict[str, float] | None = None
    user: str | None = None

    def stop_sequences(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)


class ChatCompletionRequest(SamplingFields):
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    logprobs: bool | None = False
    top_logprobs: Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)] | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    # accepted, not enforced: the engine has no constrained decoding (docs/FORMATS.md)
    response_format: ResponseFormat | None = None
    # variables for the chat template; `thinking` (bool) switches the reasoning split
    chat_template_kwargs: dict[str, Any] | None = None


class CompletionRequest(SamplingFields):
    # one prompt: text, or token ids; a one-element list of either is accepted too
    prompt: (str
             | Annotated[list[str], Field(min_length=1)]
             | Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]
             | Annotated[list[Annotated[list[Annotated[int, Field(ge=0)]],
                                        Field(min_length=1)]], Field(min_length=1)])
    logprobs: Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)] | None = None
    echo: bool | None = False
    suffix: str | None = None
    best_of: Annotated[int, Field(ge=1)] | None = None
