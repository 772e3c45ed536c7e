#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace qserve::jinja {

Value Value::undefined(std::string name) {
  Value v;
  v.kind = Kind::kUndefined;
  v.s = std::move(name);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::move(x);
  return v;
}
Value Value::make_list(ValueList items, bool tuple) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::make_shared<ValueList>(std::move(items));
  v.is_tuple = tuple;
  return v;
}
Value Value::make_dict(DictItems items) {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<DictItems>(std::move(items));
  return v;
}
Value Value::function(Function fn) {
  Value v;
  v.kind = Kind::kFunction;
  v.fn = std::make_shared<Function>(std::move(fn));
  return v;
}

namespace {
template <typename Json>
Value value_from_json(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      for (const auto& e : j) items.push_back(value_from_json(e));
      return Value::make_list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      DictItems items;
      for (auto it = j.begin(); it != j.end(); ++it)
        items.emplace_back(Value::string(it.key()), value_from_json(it.value()));
      return Value::make_dict(std::move(items));
    }
    default: return Value::none();
  }
}
}  // namespace

Value Value::from_json(const nlohmann::json& j) { return value_from_json(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return value_from_json(j); }

double Value::as_double() const {
  switch (kind) {
    case Kind::kBool: return b ? 1.0 : 0.0;
    case Kind::kInt: return static_cast<double>(i);
    case Kind::kFloat: return f;
    default: fail(ErrorCode::kInvalidArgument, "chat template: expected a number, got {}", kind_name(kind));
  }
}
int64_t Value::as_int() const {
  switch (kind) {
    case Kind::kBool: return b ? 1 : 0;
    case Kind::kInt: return i;
    case Kind::kFloat:
      // Python: int(inf) / int(nan) raise; a float past int64 has no int64 value here.
      if (!(f >= -0x1p63 && f < 0x1p63)) fail(ErrorCode::kInvalidArgument, "chat template: {} has no integer value", f);
      return static_cast<int64_t>(f);
    default: fail(ErrorCode::kInvalidArgument, "chat template: expected an integer, got {}", kind_name(kind));
  }
}

const Value* Value::find(const Value& key) const {
  if (kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : *dict)
    if (equals(k, key)) return &v;
  return nullptr;
}

void Value::set(const Value& key, Value v) {
  QS_CHECK(kind == Kind::kDict) << "set on a non-dict";
  for (auto& [k, old] : *dict)
    if (equals(k, key)) {
      old = std::move(v);
      return;
    }
  dict->emplace_back(key, std::move(v));
}

const Value* CallArgs::get(size_t index, const std::string& name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return index < pos.size() ? &pos[index] : nullptr;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.b;
    case Kind::kInt: return v.i != 0;
    case Kind::kFloat: return v.f != 0.0;
    case Kind::kString: return !v.s.empty();
    case Kind::kList: return !v.list->empty();
    case Kind::kDict: return v.is_namespace || !v.dict->empty();
    case Kind::kFunction: return true;
  }
  return false;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.s == b.s;
    case Kind::kList:
      if (a.is_tuple != b.is_tuple || a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i)
        if (!equals((*a.list)[i], (*b.list)[i])) return false;
      return true;
    case Kind::kDict:
      if (a.dict == b.dict) return true;
      if (a.is_namespace || b.is_namespace || a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* other = b.find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    case Kind::kFunction: return a.fn == b.fn;
    default: return false;
  }
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.s < b.s;  // UTF-8 byte order == code point order
  if (a.is_list() && b.is_list() && a.is_tuple == b.is_tuple) {
    const auto &x = *a.list, &y = *b.list;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less_than(x[i], y[i])) return true;
      if (less_than(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  fail(ErrorCode::kInvalidArgument, "chat template: '<' not supported between {} and {}", kind_name(a.kind),
       kind_name(b.kind));
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0.0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp10 = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp10 >= -5 + 1 && exp10 < 16) {  // Python: fixed when -4 <= exp < 16
    if (exp10 < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
    } else if (static_cast<size_t>(exp10) + 1 >= digits.size()) {
      out = digits + std::string(exp10 + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp10 + 1) + "." + digits.substr(exp10 + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[32];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  }
  return neg ? "-" + out : out;
}

namespace {
std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(q)) out += std::string("\\") + q;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    } else out += static_cast<char>(c);
  }
  return out + q;
}

void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  auto cps = ensure_ascii ? utf8_decode(s) : std::vector<uint32_t>{};
  auto put_u = [&](uint32_t u) {
    char b[16];  // a backslash, u, four hex digits (u <= 0xFFFF: larger ones come as surrogates)
    std::snprintf(b, sizeof(b), "\\u%04x", u);
    out += b;
  };
  auto one = [&](uint32_t c) {
    switch (c) {
      case '"': out += "\\\""; return;
      case '\\': out += "\\\\"; return;
      case '\n': out += "\\n"; return;
      case '\r': out += "\\r"; return;
      case '\t': out += "\\t"; return;
      case '\b': out += "\\b"; return;
      case '\f': out += "\\f"; return;
      default: break;
    }
    if (c < 0x20) return put_u(c);
    if (ensure_ascii && c > 0x7e) {
      if (c >= 0x10000) {
        uint32_t x = c - 0x10000;
        put_u(0xD800 + (x >> 10));
        put_u(0xDC00 + (x & 0x3FF));
      } else {
        put_u(c);
      }
      return;
    }
    out += static_cast<char>(c);
  };
  if (ensure_ascii) {
    for (uint32_t c : cps) one(c);
  } else {
    for (unsigned char c : s) {
      if (c < 0x80) one(c);
      else out += static_cast<char>(c);
    }
  }
  out += '"';
}

void json_rec(const Value& v, int indent, int depth, const std::string& isep, const std::string& ksep, bool sort_keys,
              bool ensure_ascii, std::string& out) {
  if (depth > 128) fail(ErrorCode::kInvalidArgument, "chat template: tojson nesting too deep");
  auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * d, ' ');
  };
  switch (v.kind) {
    case Kind::kNone: out += "null"; return;
    case Kind::kBool: out += v.b ? "true" : "false"; return;
    case Kind::kInt: out += std::to_string(v.i); return;
    case Kind::kFloat:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f > 0 ? "Infinity" : "-Infinity";
      else out += float_repr(v.f);
      return;
    case Kind::kString: json_string(v.s, ensure_ascii, out); return;
    case Kind::kList: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const auto& e : *v.list) {
        if (!first) out += isep;
        first = false;
        newline(depth + 1);
        json_rec(e, indent, depth + 1, isep, ksep, sort_keys, ensure_ascii, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Kind::kDict: {
      if (v.dict->empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : *v.dict) items.push_back(&kv);
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return less_than(a->first, b->first); });
      out += '{';
      bool first = true;
      for (const auto* kv : items) {
        if (!first) out += isep;
        first = false;
        newline(depth + 1);
        if (kv->first.is_string()) json_string(kv->first.s, ensure_ascii, out);
        else if (kv->first.kind == Kind::kNone) out += "\"null\"";
        else if (kv->first.kind == Kind::kBool) out += kv->first.b ? "\"true\"" : "\"false\"";
        else if (kv->first.kind == Kind::kInt) out += "\"" + std::to_string(kv->first.i) + "\"";
        else if (kv->first.kind == Kind::kFloat) out += "\"" + float_repr(kv->first.f) + "\"";
        else fail(ErrorCode::kInvalidArgument, "chat template: tojson: keys must be str, int, float, bool or None");
        out += ksep;
        json_rec(kv->second, indent, depth + 1, isep, ksep, sort_keys, ensure_ascii, out);
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      fail(ErrorCode::kInvalidArgument, "chat template: tojson: object of type {} is not JSON serializable",
           kind_name(v.kind));
  }
}
}  // namespace

std::string to_json(const Value& v, const JsonOptions& o) {
  std::string isep = o.item_sep.empty() ? (o.indent >= 0 ? "," : ", ") : o.item_sep;
  std::string ksep = o.key_sep.empty() ? ": " : o.key_sep;
  std::string out;
  json_rec(v, o.indent, 0, isep, ksep, o.sort_keys, o.ensure_ascii, out);
  return out;
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "";
    case Kind::kString: return v.s;
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return v.b ? "True" : "False";
    case Kind::kInt: return std::to_string(v.i);
    case Kind::kFloat: return float_repr(v.f);
    case Kind::kString: return repr_string(v.s);
    case Kind::kList: {
      std::string out = v.is_tuple ? "(" : "[";
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i) out += ", ";
        out += repr((*v.list)[i]);
      }
      if (v.is_tuple && v.list->size() == 1) out += ",";
      return out + (v.is_tuple ? ")" : "]");
    }
    case Kind::kDict: {
      std::string out = v.is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, x] : *v.dict) {
        if (!first) out += ", ";
        first = false;
        out += repr(k) + ": " + repr(x);
      }
      return out + (v.is_namespace ? "}>" : "}");
    }
    case Kind::kFunction: return "<function>";
  }
  return "";
}

std::vector<uint32_t> utf8_decode(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0) {
      out.push_back(0xDC00 + c);  // surrogateescape: an invalid byte round-trips
      ++i;
      continue;
    }
    uint32_t cp = n == 0 ? c : (c & (0x3F >> n));
    bool ok = true;
    for (int k = 1; k <= n; ++k) {
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) >> 6) != 2) {
        ok = false;
        break;
      }
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    if (!ok) {
      out.push_back(0xDC00 + c);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += n + 1;
  }
  return out;
}

std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t k = begin; k < end && k < cps.size(); ++k) {
    uint32_t c = cps[k];
    if (c >= 0xDC80 && c <= 0xDCFF) out += static_cast<char>(c - 0xDC00);
    else if (c < 0x80) out += static_cast<char>(c);
    else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

}  // namespace qserve::jinja
