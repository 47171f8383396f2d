#!/usr/bin/env python3
"""Writes tests/chat/golden/chat_cases.json: prompts and parsed replies from DeepSeek's own
encoder, encoding_dsv4.py (the checkpoint's encoding/ folder; it is not in this repository), for
the cases below. tests/chat/golden/README.md says which copy of the encoder made the file.

A case is what dsv4's chat API takes: OpenAI-style messages, the request's tools, thinking on or
off and reasoning_effort. The request's tools go where DeepSeek's encoder reads them, on a
message: the first one when it is a system message, otherwise a system message with empty
content put first (src/chat/chat_encoder.cpp does the same).

Usage: scripts/make_chat_golden.py ENCODING_DIR   (from the repository root)"""
import copy
import json
import sys

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a specific location",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                 "description": "Temperature unit"}}, "required": ["location"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web for information",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "Search query"},
        "num_results": {"type": "integer", "description": "Number of results to return"}},
        "required": ["query"]}}}
# Keys out of alphabetical order, non-ASCII text, escapes and numbers of every JSON kind: the
# schema must come out exactly as Python's json.dumps writes it.
ODD = {"type": "function", "function": {
    "parameters": {"type": "object", "properties": {
        "z": {"type": "number", "minimum": -0.0, "maximum": 2.5e20, "multipleOf": 1e-07,
              "default": 1.5},
        "a": {"type": "integer", "maximum": 9007199254740993, "default": -3},
        "flag": {"type": "boolean", "default": False, "examples": [True, None]}}},
    "name": "天气_查询", "description": "Quotes \" and \\ backslash,\ttab,\nnewline, \u0001 and é😀"}}


def call(id_, name, arguments):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


SYS = {"role": "system", "content": "You are a helpful assistant."}

ENCODE_CASES = [
    ("official_1_tools_thinking", [
        SYS,
        {"role": "user", "content": "What's the weather in Beijing?"},
        {"role": "assistant", "content": "", "reasoning_content":
         "The user wants to know the weather in Beijing. I should use the get_weather tool.",
         "tool_calls": [call("call_1", "get_weather",
                             '{"location": "Beijing", "unit": "celsius"}')]},
        {"role": "tool", "tool_call_id": "call_1",
         "content": '{"temperature": 22, "condition": "sunny", "humidity": 45}'},
        {"role": "assistant", "reasoning_content":
         "Got the weather data. Let me format a nice response.", "content":
         "The weather in Beijing is currently sunny with a temperature of 22°C and 45% humidity."},
    ], [WEATHER, SEARCH], True, None),
    ("official_2_drop_thinking", [
        SYS,
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "reasoning_content": "The user said hello, I should greet back.",
         "content": "Hi there! How can I help you?"},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "reasoning_content":
         "The user asks about the capital of France. It is Paris.",
         "content": "The capital of France is Paris."},
    ], [], True, None),
    ("user_chat", [{"role": "user", "content": "Hello"}], [], False, None),
    ("user_thinking", [{"role": "user", "content": "Hello"}], [], True, None),
    ("system_user_chat", [SYS, {"role": "user", "content": "1+1=?"}], [], False, None),
    ("system_user_thinking", [SYS, {"role": "user", "content": "1+1=?"}], [], True, None),
    ("history_chat_ignores_reasoning", [
        SYS,
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hello! I am DeepSeek.", "reasoning_content": "thinking..."},
        {"role": "user", "content": "1+1=?"},
    ], [], False, None),
    ("history_thinking_drops_earlier_reasoning", [
        SYS,
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hello! I am DeepSeek.", "reasoning_content": "thinking..."},
        {"role": "user", "content": "1+1=?"},
        {"role": "assistant", "content": "2", "reasoning_content": "add them"},
        {"role": "user", "content": "and 2+2?"},
    ], [], True, None),
    ("history_thinking_high_effort", [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hi.", "reasoning_content": "greet"},
        {"role": "user", "content": "1+1=?"},
    ], [], True, "high"),
    ("max_effort_thinking_with_system", [SYS, {"role": "user", "content": "Prove it."}], [],
     True, "max"),
    ("max_effort_thinking_user_first", [{"role": "user", "content": "Prove it."}], [], True, "max"),
    ("max_effort_in_chat_mode_adds_nothing", [SYS, {"role": "user", "content": "Prove it."}], [],
     False, "max"),
    ("max_effort_history", [
        SYS,
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b", "reasoning_content": "r"},
        {"role": "user", "content": "c"},
    ], [], True, "max"),
    ("empty_contents_chat", [
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": ""},
    ], [], False, None),
    ("empty_contents_thinking", [
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": None, "reasoning_content": ""},
        {"role": "user", "content": ""},
    ], [], True, None),
    ("unicode_and_markup_in_content", [
        {"role": "system", "content": "该助手为DeepSeek-V4。\n今天是星期五。"},
        {"role": "user", "content": "Ünïcödé, emoji 😀👍🏽, combining e\u0301, RTL שלום, \"quotes\", "
                                    "tabs\tand\r\nCRLF, <think> and </think> as text"},
        {"role": "assistant", "content": "日本語の答え", "reasoning_content": "考えています…"},
        {"role": "user", "content": "继续 🚀"},
    ], [], True, None),
    ("consecutive_user_messages_merge", [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "third"},
    ], [], False, None),
    ("consecutive_assistant_messages", [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a1"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q2"},
    ], [], True, None),
    ("tools_without_system_chat", [{"role": "user", "content": "Weather in Paris?"}],
     [WEATHER], False, None),
    ("tools_thinking_keeps_all_reasoning", [
        SYS,
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello.", "reasoning_content": "greet"},
        {"role": "user", "content": "Weather in Oslo?"},
    ], [WEATHER], True, None),
    ("tools_max_effort", [SYS, {"role": "user", "content": "Weather in Rome?"}], [WEATHER, SEARCH],
     True, "max"),
    ("tool_schema_python_json", [SYS, {"role": "user", "content": "go"}], [ODD], False, None),
    ("parallel_tool_calls_sorted_results", [
        SYS,
        {"role": "user", "content": "Weather in Beijing and Tokyo, and search news."},
        {"role": "assistant", "content": "Let me check.", "reasoning_content": "three calls",
         "tool_calls": [
             call("a", "get_weather", '{"location": "Beijing"}'),
             call("b", "get_weather", '{"location": "東京", "unit": "celsius"}'),
             call("c", "search", '{"query": "news", "num_results": 3}')]},
        {"role": "tool", "tool_call_id": "c", "content": "no news"},
        {"role": "tool", "tool_call_id": "a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "b", "content": "rain"},
    ], [WEATHER, SEARCH], True, None),
    ("tool_results_then_user", [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None,
         "tool_calls": [call("x", "get_weather", '{"location": "Lima"}')]},
        {"role": "tool", "tool_call_id": "x", "content": "fog"},
        {"role": "user", "content": "And tomorrow?"},
    ], [WEATHER], False, None),
    ("tool_argument_kinds", [
        {"role": "user", "content": "Do it."},
        {"role": "assistant", "content": "", "tool_calls": [
            call("k", "search", '{"query": "a \\"b\\" c", "num_results": 10, "ratio": 0.25, '
                                '"big": 1e300, "ok": true, "none": null, "list": [1, "two", '
                                '{"z": 1, "a": 2}], "nested": {"y": [], "x": {}}, '
                                '"text": "行\\n2"}')]},
        {"role": "tool", "tool_call_id": "k", "content": ""},
    ], [SEARCH], True, None),
    ("tool_arguments_not_json", [
        {"role": "user", "content": "Do it."},
        {"role": "assistant", "content": "", "tool_calls": [
            call("n", "search", "not json {")]},
        {"role": "tool", "tool_call_id": "n", "content": "done"},
    ], [SEARCH], False, None),
    ("tool_arguments_empty", [
        {"role": "user", "content": "Ping."},
        {"role": "assistant", "content": "", "tool_calls": [call("p", "ping", "{}")]},
        {"role": "tool", "tool_call_id": "p", "content": "pong"},
    ], [], True, None),
    ("tool_messages_without_tools_drop_thinking", [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "reasoning_content": "call it",
         "tool_calls": [call("x", "get_weather", '{"location": "Lima"}')]},
        {"role": "tool", "tool_call_id": "x", "content": "fog"},
    ], [], True, None),
]

# Conversations whose JSON only Python's json module reads and writes this way: tool-call
# arguments (JSON text, as in a request) read by the encoder's json.loads, and tool schemas
# given as JSON text (as a request's body holds them) that a server reads with json.loads
# before the encoder writes them with json.dumps. Integers past 64 bits, numbers past the double
# range, NaN and Infinity, repeated keys, a UTF-8 BOM and text json.loads refuses.
BIG_NUMBERS = ('{"big": 123456789012345678901234567890, "neg": -98765432109876543210987654321, '
               '"inf": 1e400, "ninf": -1e400, "tiny": -1e-400, "nan": NaN, "inf2": Infinity, '
               '"f": [1e16, 1e15, 0.1, 2.50, 1E2, -0, 5e-324, 1.7976931348623159e308], "dup": 1, '
               '"s": "x", "dup": {"deep": [true, null, -Infinity]}}')
SCHEMA_TEXT = ('{"name": "f", "description": "d", "parameters": {"type": "object", "properties": '
               '{"n": {"type": "integer", "maximum": 123456789012345678901234567890, '
               '"minimum": -1e400, "multipleOf": 1e-400, "default": 1.0E+2}}}, "x": "a", '
               '"x": "b"}')


def json_case(name, arguments, tool_texts=()):
    return (name, [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call("c1", "f", arguments)]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ], list(tool_texts), False, None)


ENCODE_JSON_CASES = [
    json_case("python_json_numbers_in_arguments", BIG_NUMBERS),
    json_case("python_json_bom_in_arguments", "\ufeff{\"a\": 1}"),
    json_case("python_json_trailing_comma_in_arguments", '{"a": 1,}'),
    json_case("python_json_leading_zero_in_arguments", '{"a": 01}'),
    json_case("python_json_int_past_4300_digits", '{"n": ' + "9" * 4301 + "}"),
    json_case("python_json_numbers_in_tool_schema", '{"k": 1e400}', [SCHEMA_TEXT]),
]

# Complete replies (ending with the end-of-sentence token) as the official parser reads them.
EOS = "<｜end▁of▁sentence｜>"
DSML = "｜DSML｜"


def invoke(name, params):
    lines = [f'<{DSML}parameter name="{k}" string="{s}">{v}</{DSML}parameter>' for k, s, v in params]
    return f'<{DSML}invoke name="{name}">\n' + "\n".join(lines) + f"\n</{DSML}invoke>"


def block(*invokes):
    return f"\n\n<{DSML}tool_calls>\n" + "\n".join(invokes) + f"\n</{DSML}tool_calls>"


PARSE_CASES = [
    ("chat_content", "Hello there." + EOS, False),
    ("chat_empty", EOS, False),
    ("thinking_content", "Let me think.\nStill thinking.</think>The answer is 4." + EOS, True),
    ("thinking_empty_reasoning", "</think>Straight answer." + EOS, True),
    ("unicode", "考えています…</think>答え 😀\n\nsecond paragraph" + EOS, True),
    ("chat_tool_call", block(invoke("get_weather", [("location", "true", "Beijing"),
                                                    ("unit", "true", "celsius")])) + EOS, False),
    ("thinking_tool_calls_with_content", "Two calls.</think>Checking." + block(
        invoke("get_weather", [("location", "true", "東京")]),
        invoke("search", [("query", "true", 'say "hi"\nnow'), ("num_results", "false", "3"),
                          ("filters", "false", '{"lang": "en", "safe": true}')])) + EOS, True),
    ("tool_call_without_parameters", block(invoke("ping", [])) + EOS, False),
    # What the official parser's regexes also accept: any character Python's re counts as \s
    # before name= (here U+3000, and U+001C, an information separator), and a parameter value
    # whose closing "<" is followed by a newline (its `$` matches before a final newline).
    ("invoke_after_unicode_space", block(invoke("get_weather", [("location", "true", "Oslo")])
                                         .replace("invoke name=", "invoke\u3000name=")) + EOS,
     False),
    ("invoke_after_information_separator",
     block(invoke("ping", [])).replace("invoke name=", "invoke\x1c \u2028name=") + EOS, False),
    ("parameter_value_before_lt_newline", block(
        f'<{DSML}invoke name="f">\n<{DSML}parameter name="a" string="true">x<\n/{DSML}parameter>'
        f'\n<{DSML}parameter name="b" string="false">[1, 2]<\n/{DSML}parameter>\n</{DSML}invoke>')
     + EOS, False),
    ("parameter_value_holding_lt_newline",
     block(invoke("f", [("a", "true", "a<\nb <\n c")])) + EOS, False),
]


def main():
    sys.path.insert(0, sys.argv[1])
    from encoding_dsv4 import encode_messages, parse_message_from_completion_text

    encode = []
    for name, messages, tools, thinking, effort in ENCODE_CASES:
        official = copy.deepcopy(messages)
        if tools:
            if official[0]["role"] != "system":
                official.insert(0, {"role": "system", "content": ""})
            official[0]["tools"] = tools
        prompt = encode_messages(official, thinking_mode="thinking" if thinking else "chat",
                                 reasoning_effort=effort)
        encode.append({"name": name, "messages": messages, "tools": tools, "thinking": thinking,
                       "reasoning_effort": effort, "prompt": prompt})
    encode_json = []
    for name, messages, tool_texts, thinking, effort in ENCODE_JSON_CASES:
        official = copy.deepcopy(messages)
        if tool_texts:
            official.insert(0, {"role": "system", "content": "", "tools": [
                {"type": "function", "function": json.loads(t)} for t in tool_texts]})
        prompt = encode_messages(official, thinking_mode="thinking" if thinking else "chat",
                                 reasoning_effort=effort)
        encode_json.append({"name": name, "messages": messages, "tools": [],
                            "tool_texts": tool_texts, "thinking": thinking,
                            "reasoning_effort": effort, "prompt": prompt})
    parse = []
    for name, text, thinking in PARSE_CASES:
        reply = parse_message_from_completion_text(text, "thinking" if thinking else "chat")
        parse.append({"name": name, "text": text, "thinking": thinking, "reply": reply})
    with open("tests/chat/golden/chat_cases.json", "w", encoding="utf-8") as f:
        json.dump({"encode": encode, "encode_json": encode_json, "parse": parse}, f,
                  ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
