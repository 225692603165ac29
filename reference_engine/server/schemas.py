"""Request bodies of the OpenAI-compatible endpoints.

Strict types (a string is never a number), OpenAI's ranges, and tolerance for OpenAI fields
we do not model (`extra="allow"`), so real client traffic replays unchanged. Checks that need
the model (context length, the served name) live in `sampling.py` and `prompts.py`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_STOP_SEQUENCES = 4
MAX_TOP_LOGPROBS = 20
# torch.Generator.manual_seed accepts exactly this range
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1


class _Body(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class TextPart(_Body):
    type: Literal["text"]
    text: str


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | Annotated[list[TextPart], Field(min_length=1)]
    name: str | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


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
