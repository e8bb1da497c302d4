"""Model parameters (entities/model_params.py, use_cases/model_params.py): their
bounds, what each family refuses, how a send's override an agent's, what a turn
sends the model, and how each provider family writes them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_adapters.llm import alpha, beta
from agentsvc_adapters.llm.local import LocalModel
from agentsvc_core.entities.model_params import JsonSchemaFormat, ModelParams, ResponseFormat
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import Finished, ModelRequest, TextDelta, UsageReport
from agentsvc_core.telemetry import SpanTracer
from agentsvc_core.use_cases.model_params import (
    MAX_OUTPUT_TOKENS,
    MAX_SCHEMA_BYTES,
    check_for_family,
    check_params,
)
from agentsvc_core.use_cases.turn.conversation import SendInput
from agentsvc_core.use_cases.turn.reply_plan import plan_reply
from agentsvc_core.use_cases.turn.spans import chat_span
from tests.contract.test_conversations_contract import a_message, a_thread
from tests.unit.test_mutants_conversation import send
from tests.unit.test_mutants_reply_plan import chosen
from tests.unit.test_turn_spans import Recorder
from tests.unit.turn_world import ORG, Script, says, world

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}


def structured(
    name: str = "answer", schema: Any = None, strict: bool | None = None
) -> ResponseFormat:
    spec = JsonSchemaFormat(name=name, schema=SCHEMA if schema is None else schema, strict=strict)
    return ResponseFormat(type="json_schema", json_schema=spec)


def refused(params: ModelParams, field: str = "") -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        check_params(params, field)
    return caught.value


# --- bounds -------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        ModelParams(),
        ModelParams(temperature=0.0, top_p=0.0, max_output_tokens=1),
        ModelParams(temperature=2.0, top_p=1.0, max_output_tokens=MAX_OUTPUT_TOKENS),
        ModelParams(stop=()),
        ModelParams(stop=("a", "b", "\n\n", "x" * 200)),
        ModelParams(response_format=ResponseFormat(type="text")),
        ModelParams(response_format=structured("a-Z_09" + "x" * 58, strict=True)),
    ],
)
def test_values_within_the_bounds_pass(params: ModelParams) -> None:
    assert check_params(params) is params


@pytest.mark.parametrize(
    ("params", "field", "problem"),
    [
        (ModelParams(temperature=2.0001), "temperature", "must be between 0 and 2"),
        (ModelParams(temperature=-0.0001), "temperature", "must be between 0 and 2"),
        (ModelParams(top_p=1.0001), "top_p", "must be between 0 and 1"),
        (ModelParams(top_p=-0.1), "top_p", "must be between 0 and 1"),
        (
            ModelParams(max_output_tokens=0),
            "max_output_tokens",
            f"between 1 and {MAX_OUTPUT_TOKENS}",
        ),
        (ModelParams(max_output_tokens=MAX_OUTPUT_TOKENS + 1), "max_output_tokens", "between 1"),
        (ModelParams(stop=("a", "b", "c", "d", "e")), "stop", "at most 4 stop texts"),
        (ModelParams(stop=("x" * 201,)), "stop", "at most 200 characters"),
        (ModelParams(stop=("",)), "stop", "a stop text must not be empty"),
        (ModelParams(stop=("a\x00",)), "stop", "NUL"),
        (
            ModelParams(response_format=ResponseFormat(type="json_schema")),
            "response_format",
            "jsonSchema is required with type json_schema, and only then",
        ),
        (
            ModelParams(response_format=structured("a b")),
            "response_format.jsonSchema.name",
            "1 to 64 letters, digits, '_' or '-'",
        ),
        (
            ModelParams(
                response_format=ResponseFormat(type="text", json_schema=structured().json_schema)
            ),
            "response_format",
            "only then",
        ),
        (ModelParams(response_format=structured("")), "response_format.jsonSchema.name", "letters"),
        (ModelParams(response_format=structured("a b")), "response_format.jsonSchema.name", "'-'"),
        (
            ModelParams(response_format=structured("x" * 65)),
            "response_format.jsonSchema.name",
            "64",
        ),
        (
            ModelParams(response_format=structured(schema={"type": 12})),
            "response_format.jsonSchema.schema",
            "not a valid JSON Schema",
        ),
        (
            ModelParams(response_format=structured(schema={"description": "x" * MAX_SCHEMA_BYTES})),
            "response_format.jsonSchema.schema",
            f"at most {MAX_SCHEMA_BYTES} bytes",
        ),
    ],
)
def test_values_past_the_bounds_are_refused_naming_the_field(
    params: ModelParams, field: str, problem: str
) -> None:
    error = refused(params)
    assert error.field == field
    assert problem in error.problem


def test_a_schema_of_exactly_the_size_limit_passes() -> None:
    pad = MAX_SCHEMA_BYTES - len('{"description":""}')
    check_params(ModelParams(response_format=structured(schema={"description": "x" * pad})))
    refused(ModelParams(response_format=structured(schema={"description": "x" * (pad + 1)})))


def test_the_exact_problems() -> None:
    with pytest.raises(InvalidInput) as caught:
        check_params(ModelParams(stop=("",)))  # no field: the bare name
    assert (caught.value.field, caught.value.problem) == ("stop", "a stop text must not be empty")
    with pytest.raises(InvalidInput) as caught:
        check_params(ModelParams(response_format=ResponseFormat(type="json_schema")))
    assert caught.value.problem == "jsonSchema is required with type json_schema, and only then"


def test_within_a_field_the_names_are_the_clients() -> None:
    assert refused(ModelParams(top_p=2), "model_params").field == "model_params.topP"
    got = refused(ModelParams(max_output_tokens=0), "model_params")
    assert got.field == "model_params.maxOutputTokens"
    got = refused(ModelParams(response_format=structured("a b")), "model_params")
    assert got.field == "model_params.responseFormat.jsonSchema.name"


# --- the families ---------------------------------------------------------------


def family_refuses(family: str, params: ModelParams) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        check_for_family(family, params)
    return caught.value


def test_alpha_takes_a_temperature_up_to_1_and_not_with_top_p() -> None:
    check_for_family("alpha", ModelParams(temperature=1.0, stop=("END",)))
    check_for_family("alpha", ModelParams(top_p=0.5, response_format=structured()))
    hot = family_refuses("alpha", ModelParams(temperature=1.01))
    assert (hot.field, hot.problem) == (
        "temperature",
        "the alpha family's models take a temperature between 0 and 1",
    )
    both = family_refuses("alpha", ModelParams(temperature=0.5, top_p=0.5))
    assert (both.field, both.problem) == (
        "top_p",
        "the alpha family's models take temperature or topP, not both:"
        " give only one (on the send or in the agent's modelParams)",
    )
    blank = family_refuses("alpha", ModelParams(stop=("END", " \n")))
    assert (blank.field, blank.problem) == (
        "stop",
        "the alpha family's models take no stop text of only whitespace (such as a blank line)",
    )


def test_beta_takes_everything() -> None:
    check_for_family(
        "beta",
        ModelParams(temperature=2.0, top_p=1.0, stop=("\n\n",), response_format=structured()),
    )


def test_local_refuses_only_a_json_schema() -> None:
    check_for_family(
        "local",
        ModelParams(
            temperature=2.0, top_p=1.0, stop=(" ",), response_format=ResponseFormat(type="text")
        ),
    )
    error = family_refuses("local", ModelParams(response_format=structured()))
    assert (error.field, error.problem) == (
        "response_format",
        "the local model cannot follow a JSON Schema: use a model of the alpha or"
        ' beta family, or responseFormat {"type": "text"}',
    )


def test_a_family_it_does_not_know_refuses_nothing() -> None:
    check_for_family("gamma", ModelParams(temperature=2.0, top_p=1.0, response_format=structured()))


# --- a send's over an agent's ------------------------------------------------------


def test_a_sends_parameters_override_the_agents_one_by_one() -> None:
    agent = ModelParams(temperature=0.2, max_output_tokens=100, stop=("X",))
    send_ = ModelParams(temperature=0.9, stop=())
    assert send_.over(agent) == ModelParams(temperature=0.9, max_output_tokens=100, stop=())
    assert send_.over(None) is send_
    assert ModelParams().over(agent) == agent


def test_structured_is_the_schema_only_for_json_schema() -> None:
    assert ModelParams().structured() is None
    assert ModelParams(response_format=ResponseFormat(type="text")).structured() is None
    spec = structured().json_schema
    assert ModelParams(response_format=structured()).structured() == spec


async def test_the_turn_sends_the_merged_parameters_and_the_cap() -> None:
    model = Script(says("hi"), provider="beta")
    defaults = ModelParams(temperature=0.2, max_output_tokens=100, stop=("X",))
    w = await world(model, agent={"default_model": "beta:m", "model_params": defaults})
    await send(w, SendInput(content="hi", params=ModelParams(top_p=0.5)))
    first = model.requests[0]
    assert first.params == ModelParams(
        temperature=0.2, top_p=0.5, max_output_tokens=100, stop=("X",)
    )
    assert first.max_tokens == 100
    await send(w, SendInput(content="again"))
    assert model.requests[1].params == defaults


async def test_without_parameters_the_model_gets_none_and_the_default_cap() -> None:
    model = Script(says("hi"), provider="beta")
    w = await world(model, agent={"default_model": "beta:m"})
    await send(w)
    assert (model.requests[0].params, model.requests[0].max_tokens) == (None, 4096)


async def test_a_send_the_family_cannot_honour_is_refused_before_its_run() -> None:
    model = Script(says("hi"), provider="alpha")
    w = await world(model, agent={"default_model": "alpha:m"})
    with pytest.raises(InvalidInput) as caught:
        await send(w, SendInput(content="hi", params=ModelParams(temperature=1.5)))
    assert caught.value.field == "temperature"
    with pytest.raises(InvalidInput):  # the bounds, before anything is read
        await send(w, SendInput(content="hi", params=ModelParams(temperature=3)))
    assert model.requests == []
    assert await w.runs() == []


# --- the wire -----------------------------------------------------------------------


def request(params: ModelParams | None, max_tokens: int = 4096) -> ModelRequest:
    thread = a_thread(ORG)
    return ModelRequest(
        model="m",
        system="",
        messages=[a_message(thread, "user", "hello there world")],
        max_tokens=max_tokens,
        params=params,
    )


EVERY = ModelParams(
    temperature=0.5,
    top_p=0.9,
    max_output_tokens=7,
    stop=("END",),
    response_format=structured(strict=True),
)


def test_alpha_writes_the_messages_apis_names() -> None:
    body = alpha.request_body(request(EVERY, 7))
    assert (body["max_tokens"], body["temperature"], body["top_p"]) == (7, 0.5, 0.9)
    assert body["stop_sequences"] == ["END"]
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    text = alpha.request_body(request(ModelParams(response_format=ResponseFormat(type="text"))))
    assert "output_config" not in text
    plain = alpha.request_body(request(None))
    assert not {"temperature", "top_p", "stop_sequences", "output_config"} & set(plain)
    assert "stop_sequences" not in alpha.request_body(request(ModelParams(stop=())))


def test_beta_writes_the_chat_completions_names() -> None:
    body = beta.request_body(request(EVERY, 7), "max_tokens")
    assert (body["max_tokens"], body["temperature"], body["top_p"]) == (7, 0.5, 0.9)
    assert body["stop"] == ["END"]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
    }
    text = beta.request_body(request(ModelParams(response_format=ResponseFormat(type="text"))))
    assert text["response_format"] == {"type": "text"}
    loose = beta.request_body(request(ModelParams(response_format=structured())))
    assert loose["response_format"]["json_schema"] == {"name": "answer", "schema": SCHEMA}
    plain = beta.request_body(request(None))
    assert not {"temperature", "top_p", "stop", "response_format"} & set(plain)
    assert plain["max_completion_tokens"] == 4096
    assert "stop" not in beta.request_body(request(ModelParams(stop=())))


async def local_says(params: ModelParams | None, max_tokens: int = 4096) -> tuple[str, Any, Any]:
    events = [e async for e in LocalModel().stream(request(params, max_tokens))]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    usage = next(e.usage for e in events if isinstance(e, UsageReport))
    return text, usage.output_tokens, events[-1]


async def test_the_local_model_stops_at_the_first_stop_text() -> None:
    text, _, end = await local_says(ModelParams(stop=("world", "there")))
    assert (text, end) == ('You said: "hello ', Finished("stop"))
    whole, _, _ = await local_says(ModelParams(stop=("absent",)))
    assert whole.startswith('You said: "hello there world". This is message 1')


async def test_the_local_model_cuts_its_reply_at_the_cap() -> None:
    text, out, end = await local_says(None, max_tokens=2)
    assert (text, out, end) == ("You said:", 2, Finished("length"))
    whole, whole_out, end = await local_says(None)
    assert end == Finished("stop")
    assert whole_out == max(1, len(whole) // 4)
    words = len(whole.split(" "))
    exact, _, end = await local_says(None, max_tokens=words)
    assert (exact, end) == (whole, Finished("stop"))  # exactly the cap: nothing cut


def test_the_chat_span_names_the_parameters_but_not_the_stop_texts() -> None:
    rec = Recorder()
    params = ModelParams(temperature=0.3, top_p=0.8, max_output_tokens=55, stop=("SECRET",))
    with_params = chosen(SendInput(content="hi", params=params))
    plan = plan_reply(
        with_params,
        [],
        user_id=None,
        keep_events=timedelta(0),
        keys=None,
        gate=None,
        stored_parent=None,
    )
    chat_span(SpanTracer([rec]), plan).end()
    attributes = rec.spans[0].attributes
    assert attributes["gen_ai.request.max_tokens"] == 55
    assert (attributes["gen_ai.request.temperature"], attributes["gen_ai.request.top_p"]) == (
        0.3,
        0.8,
    )
    assert "SECRET" not in repr(attributes)
    assert "gen_ai.output.type" not in attributes
    plain = plan_reply(
        chosen(
            SendInput(content="hi", params=ModelParams(response_format=ResponseFormat(type="text")))
        ),
        [],
        user_id=None,
        keep_events=timedelta(0),
        keys=None,
        gate=None,
        stored_parent=None,
    )
    chat_span(SpanTracer([rec]), plain).end()
    assert rec.spans[1].attributes["gen_ai.request.max_tokens"] == 4096
    assert not {"gen_ai.request.temperature", "gen_ai.request.top_p", "gen_ai.output.type"} & set(
        rec.spans[1].attributes
    )
    json_plan = msgspec.structs.replace(plan, params=ModelParams(response_format=structured()))
    chat_span(SpanTracer([rec]), json_plan).end()
    assert rec.spans[2].attributes["gen_ai.output.type"] == "json"
