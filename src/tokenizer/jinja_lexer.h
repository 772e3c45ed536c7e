// Splits a Jinja template into text, {{ output }} and {% statement %} chunks,
// applying whitespace control the way Hugging Face's environment does
// (trim_blocks=True, lstrip_blocks=True, "-" strips, "+" keeps, one trailing
// newline of the source dropped), and tokenizes the inside of each tag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qserve::jinja {

struct Token {
  enum class Type { kName, kString, kInt, kFloat, kOp };
  Type type;
  std::string text;  // name, decoded string value, or operator spelling
  int64_t int_value = 0;
  double float_value = 0.0;
};

struct Chunk {
  enum class Type { kText, kOutput, kStatement };
  Type type;
  std::string text;           // kText
  std::vector<Token> tokens;  // kOutput / kStatement
  int line = 1;               // where the tag starts, for error messages
};

// Throws qserve::Error(kInvalidArgument) on an unterminated tag or string.
std::vector<Chunk> lex_template(const std::string& source);

}  // namespace qserve::jinja
