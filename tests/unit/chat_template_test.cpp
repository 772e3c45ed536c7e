// The Jinja-subset chat template interpreter against Hugging Face's renderer:
// tests/data/chat_templates/expected.json is written by
// scripts/dump_chat_template_reference.py (transformers + jinja2).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_files.h"
#include "tokenizer/chat_template.h"

namespace qserve {
namespace {

const std::filesystem::path kDataDir = std::filesystem::path(QSERVE_SOURCE_DIR) / "tests/data/chat_templates";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json read_json(const std::filesystem::path& p) { return nlohmann::ordered_json::parse(read_file(p)); }

TEST(ChatTemplate, MatchesHuggingFaceReference) {
  auto spec = read_json(kDataDir / "conversations.json");
  auto expected = read_json(kDataDir / "expected.json");
  ASSERT_GT(expected["cases"].size(), 100u);
  int compared = 0, rejected = 0;
  for (const auto& c : expected["cases"]) {
    std::string name = c["template"], conv_name = c["conversation"];
    SCOPED_TRACE(name + " / " + conv_name + " / add_generation_prompt=" + (c["add_generation_prompt"] ? "1" : "0"));
    std::map<std::string, std::string> tokens;
    if (spec["special_tokens"].contains(name))
      for (auto& [k, v] : spec["special_tokens"][name].items()) tokens[k] = v.get<std::string>();
    ChatTemplate tmpl(read_file(kDataDir / (name + ".jinja")), tokens);
    const auto& conv = spec["conversations"][conv_name];
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    if (conv.contains("tools")) extra["tools"] = conv["tools"];
    if (c.contains("error")) {
      EXPECT_THROW(tmpl.render(conv["messages"], c["add_generation_prompt"], extra), Error);
      ++rejected;
    } else {
      std::string got;
      ASSERT_NO_THROW(got = tmpl.render(conv["messages"], c["add_generation_prompt"], extra));
      EXPECT_EQ(got, c["output"].get<std::string>());
      ++compared;
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(rejected, 0);
}

TEST(ChatTemplate, RaiseExceptionMessageReachesTheCaller) {
  ChatTemplate t("{{ raise_exception('roles must alternate') }}");
  try {
    t.render(nlohmann::ordered_json::array(), true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("roles must alternate"), std::string::npos);
  }
}

TEST(ChatTemplate, SyntaxErrorsAreTypedErrors) {
  for (const char* bad : {"{% if x %}no end", "{{ 1 + }}", "{% for x in %}{% endfor %}", "{{ 'unterminated }}",
                          "{% include 'x' %}", "{{ x", "{% endif %}", "{{ a[1:2:3:4] }}"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(ChatTemplate{bad}, Error);
  }
}

TEST(ChatTemplate, RuntimeErrorsAreTypedErrors) {
  for (const char* bad : {"{{ undefined_thing.attr }}", "{{ 1 + 'a' }}", "{{ 1 // 0 }}", "{{ nope() }}",
                          "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "{{ 'x' * 100000000000 }}",
                          "{% for i in range(100000000) %}{% endfor %}", "{{ [1] | unknown_filter }}",
                          "{% set x = 1 %}{% set x.a = 2 %}"}) {
    SCOPED_TRACE(bad);
    ChatTemplate t(bad);
    EXPECT_THROW(t.render(nlohmann::ordered_json::array(), false), Error);
  }
}

// Numbers past the int64 / double ranges behave as Python's: a float literal
// past double's range is inf (below it 0.0), a string past int64 through |int
// gives the default, an attribute path's index past int64 names nothing, and a
// float without an integer value used as one is a typed error, never an escaped
// std::out_of_range (found by fuzz_chat_template).
TEST(ChatTemplate, NumbersPastTheirRangesBehaveAsPythons) {
  const auto none = nlohmann::ordered_json::array();
  EXPECT_EQ(ChatTemplate("{{ 1e999 }} {{ -1e999 }} {{ 1e-400 }} {{ 1.5e3 }}").render(none, false), "inf -inf 0.0 1500.0");
  EXPECT_EQ(ChatTemplate("{{ '1e999' | int }} {{ '1e999' | int(7) }} {{ '12.9' | int }}").render(none, false), "0 7 12");
  const auto msgs = nlohmann::ordered_json::parse(R"([{"role":"user","content":"hi"}])");
  EXPECT_EQ(ChatTemplate("{{ messages | map(attribute='99999999999999999999') | list | length }}").render(msgs, false),
            "1");
  EXPECT_EQ(ChatTemplate("{{ [1, 2][1e999] }}").render(none, false), "");  // jinja2: a failed lookup is undefined
  for (const char* bad : {"{{ range(1e999) }}", "{{ 'ab' * 1e999 }}"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(ChatTemplate(bad).render(none, false), Error);
  }
}

TEST(ChatTemplate, FromTokenizerConfigPicksTheDefaultOfAList) {
  auto config = nlohmann::json::parse(R"({
    "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>",
    "chat_template": [{"name": "tool_use", "template": "T"},
                      {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"}]})");
  auto t = ChatTemplate::from_tokenizer_config(config);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->render(nlohmann::ordered_json::parse(R"([{"role":"user","content":"hi"}])"), false), "<s>hi</s>");
  EXPECT_FALSE(ChatTemplate::from_tokenizer_config(nlohmann::json::object()).has_value());
}

// Where a model directory keeps its template, in transformers' order; entries
// of a template list that are not {"name": string, "template": string} are
// skipped (a list entry with a numeric name threw a JSON type error before,
// found by fuzz_tokenizer_config).
TEST(ChatTemplate, SourceFromModelDirInTransformersOrder) {
  testing_files::TempDir dir;
  const std::filesystem::path d = dir.path();
  EXPECT_FALSE(ChatTemplate::source_from_model_dir(d).has_value());
  testing_files::write_bytes(dir.file("tokenizer_config.json"),
                    R"({"chat_template": [{"name": 1, "template": "N"}, "x", {"name": "default", "template": "C"}]})");
  EXPECT_EQ(ChatTemplate::source_from_model_dir(d), "C");
  testing_files::write_bytes(dir.file("chat_template.json"), R"({"chat_template": "J"})");
  EXPECT_EQ(ChatTemplate::source_from_model_dir(d), "J");
  testing_files::write_bytes(dir.file("chat_template.jinja"), "T");
  EXPECT_EQ(ChatTemplate::source_from_model_dir(d), "T");
  std::filesystem::remove(dir.file("chat_template.jinja"));
  testing_files::write_bytes(dir.file("chat_template.json"), "{not json");
  testing_files::expect_error([&] { ChatTemplate::source_from_model_dir(d); }, ErrorCode::kCorruptData,
                              {"chat_template.json"});
}

// Nesting is bounded in the parser (expressions, blocks), in the syntax tree
// (chains such as a.b.b... or 1+1+1...) and in evaluation (macro recursion
// through nested blocks): a template past a bound is an error naming it, not a
// stack overflow (these templates crashed before).
TEST(ChatTemplate, DeepNestingIsAnErrorNotACrash) {
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  const std::vector<std::string> deep = {
      "{{" + repeat("(", 5000) + "1" + repeat(")", 5000) + "}}",
      repeat("{% if 1 %}", 3000) + "x" + repeat("{% endif %}", 3000),
      "{{ " + repeat("-", 5000) + "1 }}",
      "{{ " + repeat("not ", 5000) + "1 }}",
      "{{ " + repeat("[", 5000) + repeat("]", 5000) + " }}",
      "{{ 1" + repeat("|abs", 5000) + " }}",
      "{{ a" + repeat(".b", 5000) + " }}",
      "{{ 1" + repeat("+1", 5000) + " }}",
  };
  for (const auto& src : deep) {
    SCOPED_TRACE(src.substr(0, 24));
    testing_files::expect_error([&] { ChatTemplate(src).render(nlohmann::ordered_json::array(), false); },
                                ErrorCode::kInvalidArgument, {"nested more than"});
  }
  // macro recursion through nested blocks: stopped by the evaluation bound
  const std::string recursive = "{% macro f(n) %}" + repeat("{% if true %}", 90) + "{{ f(n - 1) if n > 0 else 1 }}" +
                                repeat("{% endif %}", 90) + "{% endmacro %}{{ f(60) }}";
  testing_files::expect_error([&] { ChatTemplate(recursive).render(nlohmann::ordered_json::array(), false); },
                              ErrorCode::kInvalidArgument, {"evaluation nested more than"});
  // nesting well inside the bounds renders
  EXPECT_EQ(ChatTemplate("{{" + repeat("(", 60) + "1" + repeat(")", 60) + repeat("+1", 80) + "}}")
                .render(nlohmann::ordered_json::array(), false),
            "81");
  EXPECT_EQ(ChatTemplate("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% else %}done{% endif %}{% endmacro %}{{ f(20) }}")
                .render(nlohmann::ordered_json::array(), false),
            "done");
}

TEST(ChatTemplate, UserContentIsDataNotCode) {
  ChatTemplate t("{% for m in messages %}{{ m.content }}{% endfor %}");
  auto msgs = nlohmann::ordered_json::parse(R"([{"role":"user","content":"{{ 7*7 }} {% if %}"}])");
  EXPECT_EQ(t.render(msgs, false), "{{ 7*7 }} {% if %}");
}

}  // namespace
}  // namespace qserve
