// The grammar of replies with strict tool calls (chat/tool_call_grammar.h): random replies
// generated through it (random bytes wherever it allows a choice) are read back by the DSML
// reader (parse_tool_calls), and each strict call's arguments validate against its schema
// (checked here by hand); replies the grammar must refuse (a missing required parameter, a value
// of the wrong type, DSML in the content, a call to an unknown tool) are refused; unsupported
// keywords are refused by name.
#include "chat/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "chat/dsml.h"
#include "format/json.h"
#include "grammar/grammar_testing.h"
#include "grammar/matcher.h"
#include "testing/random.h"

namespace dsv4::chat {
namespace {

using format::Json;

// A strict tool with a raw string, a raw enum, an integer, a nested object and an optional
// array; a loose tool beside it.
const char* const kSpec = R"({"tools": [
  {"name": "book", "strict": true, "parameters": {"type": "object",
    "properties": {"who": {"type": "string"}, "room": {"enum": ["red", "blue"]},
                   "nights": {"type": "integer"},
                   "extras": {"type": "object", "additionalProperties": false,
                              "properties": {"bed": {"type": "boolean"}}, "required": ["bed"]},
                   "notes": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
    "required": ["who", "room", "nights", "extras"], "additionalProperties": false}},
  {"name": "ping", "parameters": {"type": "object"}}],
  "forced_tool": FORCED})";

std::string spec(const char* forced) {
  std::string s = kSpec;
  s.replace(s.find("FORCED"), 6, forced);
  return s;
}

// A random reply of `g`: random allowed bytes; past `soft_limit` bytes, with probability 0.7,
// the first closing text of DSML or JSON the grammar takes from there whole; ends when the text
// is complete with probability 1/4. False when no end came within 4096 bytes.
bool random_reply(const grammar::Grammar& g, testing::SeededRng& rng, std::string& out,
                  size_t soft_limit) {
  static const std::string kClosers[] = {"</｜DSML｜parameter>",
                                         "\n</｜DSML｜invoke>",
                                         "\n</｜DSML｜tool_calls>",
                                         "\"",
                                         "}",
                                         "]",
                                         ","};
  grammar::Matcher m(g);
  out.clear();
  while (out.size() < 4096) {
    if (m.accepted() && (m.set().stacks.empty() || rng.uniform(0, 1) < 0.25)) return true;
    if (out.size() > soft_limit && rng.uniform(0, 1) < 0.7) {
      bool closed = false;
      for (const std::string& closer : kClosers) {
        grammar::Matcher copy = m;
        if (!copy.advance(closer)) continue;
        m.advance(closer);
        out += closer;
        closed = true;
        break;
      }
      if (closed) continue;
    }
    const std::vector<uint8_t> bytes = grammar::testing::allowed_bytes(m);
    if (bytes.empty()) return false;
    const char c = static_cast<char>(
        bytes[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(bytes.size()) - 1))]);
    if (!m.advance(std::string_view(&c, 1))) return false;
    out += c;
  }
  return false;
}

bool valid_book(const Json& a) {
  if (!a.is_object() || !a.contains("who") || !a["who"].is_string() || !a.contains("room") ||
      !(a["room"] == "red" || a["room"] == "blue") || !a.contains("nights") ||
      !a["nights"].is_number_integer() || !a.contains("extras") || !a["extras"].is_object() ||
      a["extras"].size() != 1 || !a["extras"].contains("bed") || !a["extras"]["bed"].is_boolean()) {
    return false;
  }
  for (const auto& [key, value] : a.items()) {
    if (key != "who" && key != "room" && key != "nights" && key != "extras" && key != "notes")
      return false;
  }
  if (!a.contains("notes")) return true;
  if (!a["notes"].is_array() || a["notes"].size() > 2) return false;
  for (const Json& n : a["notes"]) {
    if (!n.is_string()) return false;
  }
  return true;
}

// Whether each call in `text` that names a parameter twice is to the loose tool: a context-free
// grammar cannot keep a loose call's free parameter names apart (the DSML reader then refuses
// the reply), so only strict calls are held to distinct names.
bool only_loose_calls_repeat_a_parameter(const std::string& text) {
  const std::string invoke = std::string(kInvokeOpen) + " name=\"";
  const std::string parameter = std::string(kParameterOpen) + " name=\"";
  for (size_t at = text.find(invoke); at != std::string::npos;) {
    const size_t name_end = text.find('"', at + invoke.size());
    const std::string name = text.substr(at + invoke.size(), name_end - at - invoke.size());
    const size_t next = text.find(invoke, name_end);
    const std::string body =
        text.substr(name_end, next == std::string::npos ? next : next - name_end);
    std::set<std::string> seen;
    for (size_t p = body.find(parameter); p != std::string::npos; p = body.find(parameter, p + 1)) {
      const size_t begin = p + parameter.size();
      if (!seen.insert(body.substr(begin, body.find('"', begin) - begin)).second && name != "ping")
        return false;
    }
    at = next;
  }
  return true;
}

TEST(ToolCallGrammarTest, RandomRepliesReadBackIntoValidCalls) {
  testing::SeededRng rng;
  int n_calls = 0, n_books = 0;
  for (const char* forced : {"null", "\"\"", "\"book\""}) {
    Result<grammar::Grammar> g = tool_call_grammar(spec(forced));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    // What the prompt opened (tool_calls_opening) before the reply.
    const std::string opening = std::string(forced) == "null"   ? ""
                                : std::string(forced) == "\"\"" ? tool_calls_opening("")
                                                                : tool_calls_opening("book");
    for (int i = 0; i < 60; ++i) {
      std::string reply;
      if (!random_reply(*g, rng, reply, 16)) continue;
      const std::string text = opening + reply;
      const size_t start = text.find(kToolCallsStart);
      if (start == std::string::npos) {
        EXPECT_EQ(text.find("｜DSML"), std::string::npos) << text;
        continue;
      }
      Result<ParsedToolCalls> parsed = parse_tool_calls(text, start + kToolCallsStart.size());
      if (!parsed.ok() && parsed.status().to_string().find("given twice") != std::string::npos &&
          only_loose_calls_repeat_a_parameter(text)) {
        continue;
      }
      ASSERT_TRUE(parsed.ok()) << parsed.status().to_string() << "\n" << text;
      EXPECT_EQ(parsed->end, text.size()) << text;
      for (const ToolCall& call : parsed->calls) {
        ++n_calls;
        ASSERT_TRUE(call.name == "book" || call.name == "ping") << call.name;
        ASSERT_TRUE(Json::accept(call.arguments)) << call.arguments;
        if (call.name != "book") continue;
        ++n_books;
        EXPECT_TRUE(valid_book(Json::parse(call.arguments))) << call.arguments;
      }
    }
  }
  EXPECT_GT(n_books, 20);
  EXPECT_GT(n_calls, n_books);
}

TEST(ToolCallGrammarTest, RefusesWhatDoesNotFit) {
  Result<grammar::Grammar> g = tool_call_grammar(spec("\"book\""));
  ASSERT_TRUE(g.ok());
  const std::string p = std::string(kParameterOpen);
  const std::string close = "</｜DSML｜parameter>";
  const std::string end = "\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  const std::string who = p + " name=\"who\" string=\"true\">Ann" + close + "\n";
  const std::string room = p + " name=\"room\" string=\"true\">red" + close + "\n";
  const std::string nights = p + " name=\"nights\" string=\"false\">3" + close + "\n";
  const std::string extras = p + " name=\"extras\" string=\"false\">{\"bed\":true}" + close;
  EXPECT_TRUE(grammar::testing::matches(*g, who + room + nights + extras + end));
  EXPECT_FALSE(grammar::testing::matches(*g, who + room + extras + end));  // nights missing
  EXPECT_FALSE(grammar::testing::matches(
      *g, who + room + p + " name=\"nights\" string=\"false\">3.5" + close + "\n" + extras + end));
  EXPECT_FALSE(grammar::testing::matches(*g, p + " name=\"who\" string=\"true\">A/｜DSML｜" +
                                                 close + "\n" + room + nights + extras + end));
  Result<grammar::Grammar> free = tool_call_grammar(spec("null"));
  ASSERT_TRUE(free.ok());
  EXPECT_TRUE(grammar::testing::matches(*free, "Hello <b>there</b>"));
  EXPECT_FALSE(grammar::testing::matches(*free, "Hello <｜DSML｜invoke"));
  EXPECT_FALSE(grammar::testing::matches(
      *free, "Hi" + tool_calls_opening("nope") + "\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"));
}

// A strict tool of a thousand optional parameters compiles (the grammar grows with them); past
// the node cap the parameters are refused before they are built.
TEST(ToolCallGrammarTest, CompilesAThousandOptionalParameters) {
  const auto spec_of = [](int n) {
    Json properties = Json::object();
    for (int i = 0; i < n; ++i)
      properties[std::string("p").append(std::to_string(i))] = {{"type", "string"}};
    return Json{{"tools",
                 {{{"name", "many"},
                   {"strict", true},
                   {"parameters", {{"type", "object"}, {"properties", properties}}}}}},
                {"forced_tool", "many"}}
        .dump();
  };
  const auto call = [](const std::vector<int>& parameters) {
    std::string out;
    for (const int p : parameters) {
      if (!out.empty()) out.append("\n");
      out.append("<｜DSML｜parameter name=\"p")
          .append(std::to_string(p))
          .append("\" string=\"true\">v</｜DSML｜parameter>");
    }
    return out.append("\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  };
  for (const int n : {600, 1000}) {
    SCOPED_TRACE(n);
    const Result<grammar::Grammar> g = tool_call_grammar(spec_of(n));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_TRUE(grammar::testing::matches(*g, call({})));
    EXPECT_TRUE(grammar::testing::matches(*g, call({0, 1, 10, 100, n - 1})));
    EXPECT_FALSE(grammar::testing::matches(*g, call({n - 1, 0})));
    EXPECT_FALSE(grammar::testing::matches(*g, call({5, 5})));
    EXPECT_FALSE(grammar::testing::matches(*g, call({n})));
  }
  Result<grammar::Grammar> g = tool_call_grammar(spec_of(4000));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(g.status().message().find("tool \"many\" parameters: 4000 members in order take "),
            std::string::npos)
      << g.status().to_string();
}

TEST(ToolCallGrammarTest, UnsupportedKeywordsAreRefusedByName) {
  std::string s = spec("null");
  const std::string nights = "\"nights\": {\"type\": \"integer\"}";
  s.replace(s.find(nights), nights.size(), "\"nights\": {\"type\": \"integer\", \"maximum\": 9}");
  Result<grammar::Grammar> g = tool_call_grammar(s);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(g.status().message(),
            "tool \"book\" parameters: JSON Schema keyword \"maximum\" at #/properties/nights is "
            "not supported");
}

}  // namespace
}  // namespace dsv4::chat
