// A model's own chat template (tokenizer_config.json "chat_template", a
// chat_template.jinja file, or GGUF tokenizer.chat_template) rendered the way
// Hugging Face's apply_chat_template does: jinja2 with trim_blocks and
// lstrip_blocks, messages with null fields dropped, tools/documents defined as
// none unless given, the special tokens (bos_token, eos_token, ...) as
// variables. No template text lives in the code.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace qserve {

namespace jinja {
struct Stmt;
}

class ChatTemplate {
 public:
  // Parses `source`; throws qserve::Error(kInvalidArgument) on a syntax error.
  // `special_tokens` maps names such as "bos_token" to their text.
  explicit ChatTemplate(std::string source, std::map<std::string, std::string> special_tokens = {});
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // messages: [{"role": ..., "content": ...}, ...] (ordered_json: key order
  // shows in tojson output, as in Python). `extra` (a JSON object)
  // adds variables (tools, documents, enable_thinking, ...). Throws
  // qserve::Error(kInvalidArgument) when the template fails or calls
  // raise_exception (e.g. roles that do not alternate). Thread-safe.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  const std::string& source() const { return source_; }

  // The template named `name` ("default" when the config holds a list) from a
  // parsed tokenizer_config.json, with its special tokens; nullopt if none.
  static std::optional<ChatTemplate> from_tokenizer_config(const nlohmann::json& config,
                                                           const std::string& name = "default");
  // The template source of a Hugging Face model directory, where transformers
  // looks: chat_template.jinja, then chat_template.json, then
  // tokenizer_config.json ("chat_template": a string, or a list of
  // {"name", "template"} from which "default" is taken). nullopt if none;
  // Error(kCorruptData) naming a side file that is not valid JSON.
  static std::optional<std::string> source_from_model_dir(const std::filesystem::path& dir);

 private:
  struct Parsed;
  std::string source_;
  std::map<std::string, std::string> special_tokens_;
  std::unique_ptr<Parsed> parsed_;
};

}  // namespace qserve
