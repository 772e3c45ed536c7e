#include "tokenizer/chat_template.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_parser.h"

namespace qserve {

struct ChatTemplate::Parsed {
  jinja::Body body;
};

ChatTemplate::ChatTemplate(std::string source, std::map<std::string, std::string> special_tokens)
    : source_(std::move(source)), special_tokens_(std::move(special_tokens)), parsed_(std::make_unique<Parsed>()) {
  parsed_->body = jinja::parse_template(source_);
}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const {
  if (!messages.is_array()) fail(ErrorCode::kInvalidArgument, "chat template: messages must be a list");
  // Hugging Face drops message keys whose value is null before rendering.
  nlohmann::ordered_json cleaned = nlohmann::ordered_json::array();
  for (const auto& m : messages) {
    if (!m.is_object()) fail(ErrorCode::kInvalidArgument, "chat template: each message must be an object");
    nlohmann::ordered_json c = nlohmann::ordered_json::object();
    for (auto it = m.begin(); it != m.end(); ++it)
      if (!it.value().is_null()) c[it.key()] = it.value();
    cleaned.push_back(std::move(c));
  }
  jinja::Value vars = jinja::Value::make_dict();
  for (const auto& [k, v] : special_tokens_) vars.set(jinja::Value::string(k), jinja::Value::string(v));
  vars.set(jinja::Value::string("messages"), jinja::Value::from_json(cleaned));
  vars.set(jinja::Value::string("tools"), jinja::Value::none());
  vars.set(jinja::Value::string("documents"), jinja::Value::none());
  vars.set(jinja::Value::string("add_generation_prompt"), jinja::Value::boolean(add_generation_prompt));
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it)
      vars.set(jinja::Value::string(it.key()), jinja::Value::from_json(it.value()));
  return jinja::render(parsed_->body, vars);
}

namespace {
std::optional<std::string> token_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

std::map<std::string, std::string> special_tokens_of(const nlohmann::json& config) {
  std::map<std::string, std::string> out;
  if (!config.is_object()) return out;
  for (const char* name : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"})
    if (config.contains(name))
      if (auto t = token_text(config[name])) out[name] = *t;
  return out;
}

std::optional<std::string> template_text(const nlohmann::json& value, const std::string& name) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    for (const auto& t : value)
      if (t.is_object() && t.contains("name") && t["name"] == name && t.contains("template") && t["template"].is_string())
        return t["template"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<nlohmann::json> read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorruptData, "{}: {}", p.string(), e.what());
  }
}
}  // namespace

std::optional<ChatTemplate> ChatTemplate::from_tokenizer_config(const nlohmann::json& config,
                                                                const std::string& name) {
  if (!config.is_object() || !config.contains("chat_template")) return std::nullopt;
  auto text = template_text(config["chat_template"], name);
  if (!text) return std::nullopt;
  return ChatTemplate(*text, special_tokens_of(config));
}

std::optional<std::string> ChatTemplate::source_from_model_dir(const std::filesystem::path& dir) {
  if (std::ifstream in(dir / "chat_template.jinja"); in) {
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  for (const char* file : {"chat_template.json", "tokenizer_config.json"})
    if (auto j = read_json(dir / file); j && j->is_object() && j->contains("chat_template"))
      if (auto text = template_text((*j)["chat_template"], "default")) return text;
  return std::nullopt;
}

}  // namespace qserve
