#include "tokenizer/jinja_lexer.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "tokenizer/jinja_value.h"

namespace qserve::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string rstrip_all(const std::string& s) {
  size_t end = s.size();
  while (end > 0 && is_space(s[end - 1])) --end;
  return s.substr(0, end);
}

// Python's unicode-escape decoding of a string literal's body.
std::string decode_escapes(const std::string& body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out += c;
      continue;
    }
    char e = body[++i];
    auto hex = [&](int n) -> uint32_t {
      uint32_t v = 0;
      for (int k = 0; k < n; ++k) {
        if (i + 1 >= body.size()) fail(ErrorCode::kInvalidArgument, "chat template line {}: truncated escape", line);
        char h = body[++i];
        if (!std::isxdigit(static_cast<unsigned char>(h)))
          fail(ErrorCode::kInvalidArgument, "chat template line {}: bad escape", line);
        v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                                                                                        : (std::tolower(h) - 'a' + 10));
      }
      return v;
    };
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '0': out += '\0'; break;
      case '\n': break;  // line continuation
      case 'x': out += utf8_encode({hex(2)}, 0, 1); break;
      case 'u': out += utf8_encode({hex(4)}, 0, 1); break;
      case 'U': out += utf8_encode({hex(8)}, 0, 1); break;
      default:
        out += '\\';
        out += e;
    }
  }
  return out;
}

// Tokenizes a tag body starting at `pos` up to its closing delimiter; returns
// the position after the delimiter (and after any whitespace it strips).
size_t lex_tag(const std::string& src, size_t pos, bool block, int line, Chunk& chunk, bool& ends_with_newline) {
  const char* close = block ? "%}" : "}}";
  int depth = 0;
  size_t n = src.size();
  static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                               "=",  "(",  ")",  "[",  "]",  "{",  "}", ",", ".", ":", "|", ";", "!"};
  while (true) {
    while (pos < n && is_space(src[pos])) ++pos;
    if (pos >= n) fail(ErrorCode::kInvalidArgument, "chat template line {}: unterminated tag", line);
    if (depth == 0) {
      if (src.compare(pos, 3, std::string("-") + close) == 0) {
        pos += 3;
        while (pos < n && is_space(src[pos])) ++pos;
        ends_with_newline = pos > 0 && src[pos - 1] == '\n';
        return pos;
      }
      if (src.compare(pos, 3, std::string("+") + close) == 0) {
        ends_with_newline = false;
        return pos + 3;
      }
      if (src.compare(pos, 2, close) == 0) {
        pos += 2;
        ends_with_newline = false;
        if (block && pos < n && src[pos] == '\n') {  // trim_blocks
          ++pos;
          ends_with_newline = true;
        }
        return pos;
      }
    }
    char c = src[pos];
    Token tok;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = pos;
      while (pos < n && (std::isalnum(static_cast<unsigned char>(src[pos])) || src[pos] == '_')) ++pos;
      tok.type = Token::Type::kName;
      tok.text = src.substr(b, pos - b);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t b = pos;
      while (pos < n && (std::isdigit(static_cast<unsigned char>(src[pos])) || src[pos] == '_')) ++pos;
      bool after_dot = !chunk.tokens.empty() && chunk.tokens.back().type == Token::Type::kOp &&
                       chunk.tokens.back().text == ".";
      bool is_float = false;
      if (!after_dot && pos + 1 < n && src[pos] == '.' && std::isdigit(static_cast<unsigned char>(src[pos + 1]))) {
        is_float = true;
        ++pos;
        while (pos < n && (std::isdigit(static_cast<unsigned char>(src[pos])) || src[pos] == '_')) ++pos;
      }
      if (!after_dot && pos < n && (src[pos] == 'e' || src[pos] == 'E')) {
        size_t q = pos + 1;
        if (q < n && (src[q] == '+' || src[q] == '-')) ++q;
        if (q < n && std::isdigit(static_cast<unsigned char>(src[q]))) {
          is_float = true;
          pos = q;
          while (pos < n && std::isdigit(static_cast<unsigned char>(src[pos]))) ++pos;
        }
      }
      std::string digits;
      for (size_t k = b; k < pos; ++k)
        if (src[k] != '_') digits += src[k];
      tok.text = digits;
      if (is_float) {
        tok.type = Token::Type::kFloat;
        // As Python's float(): past double's range a literal is inf (or 0.0
        // below it), not an error (std::stod throws out_of_range there).
        tok.float_value = std::strtod(digits.c_str(), nullptr);
      } else {
        tok.type = Token::Type::kInt;
        try {
          tok.int_value = std::stoll(digits);
        } catch (const std::exception&) {
          fail(ErrorCode::kInvalidArgument, "chat template line {}: integer literal too large", line);
        }
      }
    } else if (c == '\'' || c == '"') {
      size_t b = ++pos;
      while (pos < n && src[pos] != c) pos += (src[pos] == '\\') ? 2 : 1;
      if (pos >= n) fail(ErrorCode::kInvalidArgument, "chat template line {}: unterminated string", line);
      tok.type = Token::Type::kString;
      tok.text = decode_escapes(src.substr(b, pos - b), line);
      ++pos;
      // Adjacent string literals concatenate ("a" "b").
      if (!chunk.tokens.empty() && chunk.tokens.back().type == Token::Type::kString && chunk.tokens.back().int_value) {
        chunk.tokens.back().text += tok.text;
        continue;
      }
      tok.int_value = 1;  // marks a string token as joinable
    } else {
      const char* op = nullptr;
      for (const char* o : kOps)
        if (src.compare(pos, std::strlen(o), o) == 0) {
          op = o;
          break;
        }
      if (!op) fail(ErrorCode::kInvalidArgument, "chat template line {}: unexpected character '{}'", line, c);
      tok.type = Token::Type::kOp;
      tok.text = op;
      pos += tok.text.size();
      if (tok.text == "(" || tok.text == "[" || tok.text == "{") ++depth;
      if ((tok.text == ")" || tok.text == "]" || tok.text == "}") && depth > 0) --depth;
    }
    chunk.tokens.push_back(std::move(tok));
  }
}

}  // namespace

std::vector<Chunk> lex_template(const std::string& raw) {
  // Newlines normalized to \n; a single trailing newline dropped (keep_trailing_newline=False).
  std::string src;
  src.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\r') {
      src += '\n';
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
    } else {
      src += raw[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();

  std::vector<Chunk> chunks;
  size_t pos = 0, n = src.size();
  int line = 1;
  bool line_starting = true;
  auto count_lines = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < n; ++k) line += src[k] == '\n';
  };
  while (pos < n) {
    size_t start = std::string::npos;
    for (size_t k = src.find('{', pos); k != std::string::npos; k = src.find('{', k + 1)) {
      if (k + 1 < n && (src[k + 1] == '{' || src[k + 1] == '%' || src[k + 1] == '#')) {
        start = k;
        break;
      }
    }
    std::string text = src.substr(pos, start == std::string::npos ? std::string::npos : start - pos);
    if (start == std::string::npos) {
      if (!text.empty()) chunks.push_back({Chunk::Type::kText, text, {}, line});
      break;
    }
    count_lines(pos, start);
    char kind = src[start + 1];
    size_t p = start + 2;
    char sign = p < n && (src[p] == '-' || src[p] == '+') ? src[p] : 0;
    if (sign == '-') {
      text = rstrip_all(text);
    } else if (sign != '+' && (kind == '%' || kind == '#')) {  // lstrip_blocks
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        bool all_space = l_pos < text.size();
        for (size_t k = l_pos; k < text.size(); ++k)
          if (!is_space(text[k])) all_space = false;
        if (all_space) text.resize(l_pos);
      }
    }
    if (!text.empty()) chunks.push_back({Chunk::Type::kText, text, {}, line});
    if (sign) ++p;
    int tag_line = line;
    if (kind == '#') {
      size_t end = src.find("#}", p);
      if (end == std::string::npos) fail(ErrorCode::kInvalidArgument, "chat template line {}: unterminated comment", line);
      bool strip = end > p && src[end - 1] == '-';
      pos = end + 2;
      line_starting = false;
      if (strip) {
        while (pos < n && is_space(src[pos])) ++pos;
        line_starting = pos > 0 && src[pos - 1] == '\n';
      } else if (!(end > p && src[end - 1] == '+') && pos < n && src[pos] == '\n') {
        ++pos;
        line_starting = true;
      }
      count_lines(start, pos);
      continue;
    }
    Chunk chunk{kind == '%' ? Chunk::Type::kStatement : Chunk::Type::kOutput, {}, {}, tag_line};
    bool ends_nl = false;
    size_t after = lex_tag(src, p, kind == '%', tag_line, chunk, ends_nl);
    count_lines(start, after);
    pos = after;
    line_starting = ends_nl;
    for (auto& t : chunk.tokens)
      if (t.type == Token::Type::kString) t.int_value = 0;
    // {% raw %}...{% endraw %}: the body is text.
    if (chunk.type == Chunk::Type::kStatement && chunk.tokens.size() == 1 && chunk.tokens[0].text == "raw") {
      size_t k = pos;
      while (true) {
        k = src.find("{%", k);
        if (k == std::string::npos) fail(ErrorCode::kInvalidArgument, "chat template line {}: unterminated raw", line);
        size_t q = k + 2;
        if (q < n && (src[q] == '-' || src[q] == '+')) ++q;
        while (q < n && is_space(src[q])) ++q;
        if (src.compare(q, 6, "endraw") == 0) break;
        k += 2;
      }
      std::string body = src.substr(pos, k - pos);
      if (src[k + 2] == '-') body = rstrip_all(body);
      if (!body.empty()) chunks.push_back({Chunk::Type::kText, body, {}, line});
      Chunk end_chunk{Chunk::Type::kStatement, {}, {}, line};
      count_lines(pos, k);
      pos = lex_tag(src, src.find("endraw", k) + 6, true, line, end_chunk, ends_nl);
      line_starting = ends_nl;
      continue;  // the raw/endraw pair itself produces nothing
    }
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

}  // namespace qserve::jinja
