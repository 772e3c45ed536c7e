// The built-in filters, tests, methods and global functions of the Jinja
// subset, with the behaviour of jinja2 plus the overrides Hugging Face adds
// (tojson without HTML escaping, raise_exception, strftime_now, namespace).
#pragma once

#include <string>

#include "tokenizer/jinja_value.h"

namespace qserve::jinja {

Value apply_filter(const std::string& name, const Value& operand, CallArgs& args);
bool apply_test(const std::string& name, const Value& operand, CallArgs& args);
bool has_test(const std::string& name);

// obj.name: dict keys, namespace attributes, bound methods of str/dict/list.
// Missing attributes give an undefined value; `obj` undefined throws.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: dict keys first, then attributes; sequences by (negative) index.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] with Python semantics (null parts = omitted).
Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step);
// `item in container`.
bool contains(const Value& container, const Value& item);
// The elements a for-loop visits: list items, dict keys, string characters.
ValueList iterate(const Value& v);
// range, namespace, dict, raise_exception, strftime_now.
void add_globals(Value& dict);

// Python str.strip()/lstrip()/rstrip() (chars empty: whitespace).
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right);

}  // namespace qserve::jinja
