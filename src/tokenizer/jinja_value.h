// Values of the Jinja subset that chat templates use. Semantics follow
// Python/jinja2 (what Hugging Face's apply_chat_template runs): lists and dicts
// are shared by reference, dicts keep insertion order, strings are UTF-8 and
// indexed by code point, printing follows Python's str()/repr().
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace qserve::jinja {

struct Value;
struct CallArgs;
using ValueList = std::vector<Value>;
using DictItems = std::vector<std::pair<Value, Value>>;  // insertion order
using Function = std::function<Value(CallArgs&)>;

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

struct Value {
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;                       // kString; kUndefined: the missing name (for messages)
  std::shared_ptr<ValueList> list;     // kList
  bool is_tuple = false;               // kList printed as (a, b)
  std::shared_ptr<DictItems> dict;     // kDict
  bool is_namespace = false;           // kDict made by namespace(): attributes assignable
  std::shared_ptr<Function> fn;        // kFunction

  Value() = default;
  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(ValueList items = {}, bool tuple = false);
  static Value make_dict(DictItems items = {});
  static Value function(Function fn);
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);  // keeps key order

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_dict() const { return kind == Kind::kDict; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  bool is_integral() const { return kind == Kind::kInt || kind == Kind::kBool; }
  double as_double() const;
  int64_t as_int() const;

  // Dict lookup by key; nullptr when absent.
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const { return find(Value::string(key)); }
  void set(const Value& key, Value v);  // dict/namespace only
};

struct CallArgs {
  ValueList pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The keyword `name`, else positional `index`, else nullptr.
  const Value* get(size_t index, const std::string& name) const;
};

// Python truthiness (undefined is false).
bool truthy(const Value& v);
// Python ==.
bool equals(const Value& a, const Value& b);
// Python <; throws qserve::Error on incomparable types.
bool less_than(const Value& a, const Value& b);
// str(v) as Jinja prints it ({{ v }}): undefined prints as "".
std::string to_str(const Value& v);
// repr(v) in Python.
std::string repr(const Value& v);
// json.dumps(v, ensure_ascii=..., indent=..., separators=..., sort_keys=...).
struct JsonOptions {
  int indent = -1;       // < 0: one line
  std::string item_sep;  // empty: Python's default (", " on one line, "," with indent)
  std::string key_sep;   // empty: ": "
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string to_json(const Value& v, const JsonOptions& options);
// Python's float repr (shortest round-trip, "1.0", "1e-05", "inf").
std::string float_repr(double v);
const char* kind_name(Kind k);

// UTF-8 helpers: code points of a string, and back.
std::vector<uint32_t> utf8_decode(const std::string& s);
std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end);

}  // namespace qserve::jinja
