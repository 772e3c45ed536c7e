// Attribute and item access, slicing, membership, iteration, and the methods
// of str / dict / list that chat templates call (content.strip(),
// message.get('x'), text.split('\n'), ...).
#include <algorithm>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"

namespace qserve::jinja {
namespace {

[[noreturn]] void bad(const std::string& what) { fail(ErrorCode::kInvalidArgument, "chat template: {}", what); }

bool py_isspace(uint32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

std::string ascii_case(std::string s, bool upper) {
  for (auto& c : s) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c))
                                                : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const std::string& arg_str(const CallArgs& a, size_t i, const char* name, const char* method) {
  const Value* v = a.get(i, name);
  if (!v || !v->is_string()) bad(std::string(method) + "() expects a string argument");
  return v->s;
}

// Python str.split(sep=None, maxsplit=-1).
Value py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  ValueList parts;
  if (!sep || sep->is_none()) {
    auto cps = utf8_decode(s);
    size_t i = 0, n = cps.size();
    while (true) {
      while (i < n && py_isspace(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = n;
        while (end > i && py_isspace(cps[end - 1])) --end;
        parts.push_back(Value::string(utf8_encode(cps, i, end)));
        break;
      }
      size_t b = i;
      while (i < n && !py_isspace(cps[i])) ++i;
      parts.push_back(Value::string(utf8_encode(cps, b, i)));
    }
    return Value::make_list(std::move(parts));
  }
  if (!sep->is_string() || sep->s.empty()) bad("split(): empty or non-string separator");
  size_t b = 0;
  while (true) {
    size_t k = s.find(sep->s, b);
    if (k == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) {
      parts.push_back(Value::string(s.substr(b)));
      break;
    }
    parts.push_back(Value::string(s.substr(b, k - b)));
    b = k + sep->s.size();
  }
  return Value::make_list(std::move(parts));
}

bool starts_or_ends(const std::string& s, const Value& affix, bool start) {
  if (affix.is_list()) {
    for (const auto& a : *affix.list)
      if (starts_or_ends(s, a, start)) return true;
    return false;
  }
  if (!affix.is_string()) bad("startswith()/endswith() expects a string or a tuple of strings");
  const std::string& a = affix.s;
  if (a.size() > s.size()) return false;
  return start ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
}

Value string_method(const std::string& s, const std::string& name) {
  auto m = [](auto fn) { return Value::function(fn); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool l = name != "rstrip", r = name != "lstrip";
    return m([s, l, r](CallArgs& a) { return Value::string(py_strip(s, a.get(0, "chars"), l, r)); });
  }
  if (name == "split")
    return m([s](CallArgs& a) {
      const Value* mx = a.get(1, "maxsplit");
      return py_split(s, a.get(0, "sep"), mx ? mx->as_int() : -1);
    });
  if (name == "splitlines")
    return m([s](CallArgs&) {
      ValueList out;
      size_t b = 0;
      for (size_t i = 0; i < s.size(); ++i)
        if (s[i] == '\n' || s[i] == '\r') {
          out.push_back(Value::string(s.substr(b, i - b)));
          if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
          b = i + 1;
        }
      if (b < s.size()) out.push_back(Value::string(s.substr(b)));
      return Value::make_list(std::move(out));
    });
  if (name == "startswith" || name == "endswith") {
    bool start = name == "startswith";
    return m([s, start](CallArgs& a) {
      const Value* x = a.get(0, "prefix");
      if (!x) bad("startswith()/endswith() needs an argument");
      return Value::boolean(starts_or_ends(s, *x, start));
    });
  }
  if (name == "upper" || name == "lower") {
    bool up = name == "upper";
    return m([s, up](CallArgs&) { return Value::string(ascii_case(s, up)); });
  }
  if (name == "title" || name == "capitalize") {
    bool title = name == "title";
    return m([s, title](CallArgs&) {
      std::string out = s;
      bool start = true;
      for (auto& c : out) {
        unsigned char u = static_cast<unsigned char>(c);
        c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
        start = title ? !std::isalpha(u) : false;
      }
      return Value::string(out);
    });
  }
  if (name == "replace")
    return m([s](CallArgs& a) {
      const std::string& from = arg_str(a, 0, "old", "replace");
      const std::string& to = arg_str(a, 1, "new", "replace");
      const Value* cnt = a.get(2, "count");
      int64_t left = cnt ? cnt->as_int() : -1;
      std::string out;
      size_t b = 0;
      if (from.empty()) return Value::string(s);  // Python inserts between characters; templates don't need it
      while (left != 0) {
        size_t k = s.find(from, b);
        if (k == std::string::npos) break;
        out += s.substr(b, k - b) + to;
        b = k + from.size();
        --left;
      }
      return Value::string(out + s.substr(b));
    });
  if (name == "find" || name == "rfind" || name == "count")
    return m([s, name](CallArgs& a) {
      const std::string& x = arg_str(a, 0, "sub", name.c_str());
      if (name == "count") {
        int64_t n = 0;
        if (x.empty()) return Value::integer(static_cast<int64_t>(utf8_decode(s).size()) + 1);
        for (size_t k = s.find(x); k != std::string::npos; k = s.find(x, k + x.size())) ++n;
        return Value::integer(n);
      }
      size_t k = name == "find" ? s.find(x) : s.rfind(x);
      if (k == std::string::npos) return Value::integer(-1);
      return Value::integer(static_cast<int64_t>(utf8_decode(s.substr(0, k)).size()));
    });
  if (name == "join")
    return m([s](CallArgs& a) {
      const Value* x = a.get(0, "iterable");
      if (!x) bad("join() needs an argument");
      std::string out;
      bool first = true;
      for (const auto& e : iterate(*x)) {
        if (!e.is_string()) bad("str.join() expects strings");
        if (!first) out += s;
        first = false;
        out += e.s;
      }
      return Value::string(out);
    });
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum")
    return m([s, name](CallArgs&) {
      if (s.empty()) return Value::boolean(false);
      for (unsigned char c : s) {
        bool ok = name == "isdigit" ? std::isdigit(c) : name == "isalpha" ? std::isalpha(c)
                : name == "isspace" ? std::isspace(c) : std::isalnum(c);
        if (!ok) return Value::boolean(false);
      }
      return Value::boolean(true);
    });
  return Value::undefined(name);
}

Value dict_method(const Value& d, const std::string& name) {
  if (name == "items")
    return Value::function([d](CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : *d.dict) out.push_back(Value::make_list({k, v}, true));
      return Value::make_list(std::move(out));
    });
  if (name == "keys" || name == "values") {
    bool keys = name == "keys";
    return Value::function([d, keys](CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : *d.dict) out.push_back(keys ? k : v);
      return Value::make_list(std::move(out));
    });
  }
  if (name == "get")
    return Value::function([d](CallArgs& a) {
      const Value* k = a.get(0, "key");
      if (!k) bad("get() needs a key");
      if (const Value* v = d.find(*k)) return *v;
      const Value* def = a.get(1, "default");
      return def ? *def : Value::none();
    });
  return Value::undefined(name);
}

Value list_method(const Value& l, const std::string& name) {
  if (name == "index" || name == "count") {
    bool index = name == "index";
    return Value::function([l, index](CallArgs& a) {
      const Value* x = a.get(0, "value");
      if (!x) bad("index()/count() needs an argument");
      int64_t n = 0;
      for (size_t i = 0; i < l.list->size(); ++i)
        if (equals((*l.list)[i], *x)) {
          if (index) return Value::integer(static_cast<int64_t>(i));
          ++n;
        }
      if (index) bad("list.index(x): x not in list");
      return Value::integer(n);
    });
  }
  return Value::undefined(name);
}

bool is_dict_method(const std::string& n) { return n == "items" || n == "keys" || n == "values" || n == "get"; }

int64_t norm_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

}  // namespace

std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  auto cps = utf8_decode(s);
  std::vector<uint32_t> set;
  bool ws = !chars || chars->is_none();
  if (!ws) {
    if (!chars->is_string()) bad("strip() expects a string");
    set = utf8_decode(chars->s);
  }
  auto strip_it = [&](uint32_t c) { return ws ? py_isspace(c) : std::find(set.begin(), set.end(), c) != set.end(); };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return utf8_encode(cps, b, e);
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Kind::kUndefined:
      fail(ErrorCode::kInvalidArgument, "chat template: '{}' is undefined (reading .{})",
           obj.s.empty() ? "value" : obj.s, name);
    case Kind::kDict:
      if (!obj.is_namespace && is_dict_method(name)) return dict_method(obj, name);
      if (const Value* v = obj.find(name)) return *v;
      return Value::undefined(name);
    case Kind::kString: return string_method(obj.s, name);
    case Kind::kList: return list_method(obj, name);
    default: return Value::undefined(name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Kind::kUndefined:
      fail(ErrorCode::kInvalidArgument, "chat template: '{}' is undefined (reading [{}])",
           obj.s.empty() ? "value" : obj.s, repr(key));
    case Kind::kDict:
      if (const Value* v = obj.find(key)) return *v;
      if (key.is_string()) return get_attr(obj, key.s);
      return Value::undefined();
    case Kind::kList:
      if (key.is_integral()) {
        int64_t n = static_cast<int64_t>(obj.list->size()), i = norm_index(key.as_int(), n);
        if (i >= 0 && i < n) return (*obj.list)[static_cast<size_t>(i)];
        return Value::undefined();
      }
      if (key.is_string()) return get_attr(obj, key.s);
      return Value::undefined();
    case Kind::kString:
      if (key.is_integral()) {
        auto cps = utf8_decode(obj.s);
        int64_t n = static_cast<int64_t>(cps.size()), i = norm_index(key.as_int(), n);
        if (i >= 0 && i < n) return Value::string(utf8_encode(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1));
        return Value::undefined();
      }
      if (key.is_string()) return get_attr(obj, key.s);
      return Value::undefined();
    default: return Value::undefined();
  }
}

Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  auto opt = [](const Value* v) { return v && !v->is_none() && !v->is_undefined(); };
  int64_t st = opt(step) ? step->as_int() : 1;
  if (st == 0) bad("slice step cannot be zero");
  std::vector<uint32_t> cps;
  int64_t n;
  if (obj.is_string()) {
    cps = utf8_decode(obj.s);
    n = static_cast<int64_t>(cps.size());
  } else if (obj.is_list()) {
    n = static_cast<int64_t>(obj.list->size());
  } else {
    bad(std::string("cannot slice a ") + kind_name(obj.kind));
  }
  // Python's slice.indices().
  auto clamp = [&](const Value* v, int64_t def) {
    if (!opt(v)) return def;
    int64_t i = v->as_int();
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t b = clamp(start, st > 0 ? 0 : n - 1), e = clamp(stop, st > 0 ? n : -1);
  std::vector<int64_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(i);
  if (obj.is_string()) {
    std::vector<uint32_t> out;
    for (int64_t i : idx) out.push_back(cps[static_cast<size_t>(i)]);
    return Value::string(utf8_encode(out, 0, out.size()));
  }
  ValueList out;
  for (int64_t i : idx) out.push_back((*obj.list)[static_cast<size_t>(i)]);
  return Value::make_list(std::move(out), obj.is_tuple);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::kString:
      if (!item.is_string()) bad("'in <string>' requires a string on the left");
      return container.s.find(item.s) != std::string::npos;
    case Kind::kList:
      for (const auto& e : *container.list)
        if (equals(e, item)) return true;
      return false;
    case Kind::kDict: return container.find(item) != nullptr;
    case Kind::kUndefined: return false;
    default: bad(std::string("argument of type ") + kind_name(container.kind) + " is not iterable");
  }
}

ValueList iterate(const Value& v) {
  switch (v.kind) {
    case Kind::kList: return *v.list;
    case Kind::kDict: {
      ValueList keys;
      for (const auto& [k, x] : *v.dict) keys.push_back(k);
      return keys;
    }
    case Kind::kString: {
      auto cps = utf8_decode(v.s);
      ValueList out;
      for (size_t i = 0; i < cps.size(); ++i) out.push_back(Value::string(utf8_encode(cps, i, i + 1)));
      return out;
    }
    case Kind::kUndefined: return {};
    default: bad(std::string("'") + kind_name(v.kind) + "' object is not iterable");
  }
}

}  // namespace qserve::jinja
