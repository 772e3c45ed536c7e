// Filters, tests and global functions (jinja2 semantics, Hugging Face overrides).
#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>

#include "core/error.h"

namespace qserve::jinja {
namespace {

[[noreturn]] void bad(const std::string& what) { fail(ErrorCode::kInvalidArgument, "chat template: {}", what); }

bool arg_bool(const CallArgs& a, size_t i, const char* name, bool def) {
  const Value* v = a.get(i, name);
  return v ? truthy(*v) : def;
}

// "a.b.0" attribute paths of map/selectattr/sort(attribute=...).
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t b = 0;
  while (true) {
    size_t k = path.find('.', b);
    std::string part = path.substr(b, k == std::string::npos ? std::string::npos : k - b);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(c); });
    if (cur.is_undefined()) return cur;
    if (digits) {
      // An index past int64 names no item (Python's int is unbounded; the lookup fails).
      int64_t index = 0;
      const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
      if (ec != std::errc() || end != part.data() + part.size()) return Value::undefined(part);
      cur = get_item(cur, Value::integer(index));
    } else {
      cur = get_item(cur, Value::string(part));
    }
    if (k == std::string::npos) return cur;
    b = k + 1;
  }
}

Value lower_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) {
    std::string s = v.s;
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return Value::string(s);
  }
  return v;
}

// select / reject / selectattr / rejectattr.
Value select_items(const Value& seq, CallArgs& a, bool with_attr, bool keep) {
  size_t next = 0;
  std::string attr;
  if (with_attr) {
    if (a.pos.empty() || !a.pos[0].is_string()) bad("selectattr/rejectattr needs an attribute name");
    attr = a.pos[0].s;
    next = 1;
  }
  std::string test;
  CallArgs test_args;
  if (a.pos.size() > next) {
    if (!a.pos[next].is_string()) bad("select: the test name must be a string");
    test = a.pos[next].s;
    test_args.pos.assign(a.pos.begin() + static_cast<long>(next) + 1, a.pos.end());
  }
  ValueList out;
  for (const auto& item : iterate(seq)) {
    Value x = with_attr ? attr_path(item, attr) : item;
    bool ok = test.empty() ? truthy(x) : apply_test(test, x, test_args);
    if (ok == keep) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string do_indent(std::string s, const CallArgs& a) {
  const Value* w = a.get(0, "width");
  std::string ind = w && w->is_string() ? w->s : std::string(w ? static_cast<size_t>(w->as_int()) : 4, ' ');
  bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
  s += "\n";
  std::vector<std::string> lines;
  size_t b = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\n') {
      lines.push_back(s.substr(b, i - b));
      b = i + 1;
    }
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == 0) {
      rv = lines[0];
      continue;
    }
    rv += "\n";
    if (blank || !lines[i].empty()) rv += ind;
    rv += lines[i];
  }
  return first ? ind + rv : rv;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, CallArgs& a) {
  if (name == "trim") return Value::string(py_strip(to_str(v), a.get(0, "chars"), true, true));
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::integer(static_cast<int64_t>(utf8_decode(v.s).size()));
    if (v.is_list()) return Value::integer(static_cast<int64_t>(v.list->size()));
    if (v.is_dict()) return Value::integer(static_cast<int64_t>(v.dict->size()));
    if (v.is_undefined()) return Value::integer(0);
    bad(std::string("object of type ") + kind_name(v.kind) + " has no length");
  }
  if (name == "tojson") {
    JsonOptions o;
    // Hugging Face's signature: tojson(ensure_ascii=False, indent=None, separators=None, sort_keys=False).
    o.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
    if (const Value* x = a.get(1, "indent"); x && !x->is_none()) o.indent = static_cast<int>(x->as_int());
    o.sort_keys = arg_bool(a, 3, "sort_keys", false);
    if (const Value* sep = a.get(2, "separators"); sep && sep->is_list() && sep->list->size() == 2) {
      o.item_sep = to_str((*sep->list)[0]);
      o.key_sep = to_str((*sep->list)[1]);
    }
    return Value::string(to_json(v, o));
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    CallArgs none;
    return get_attr(Value::string(to_str(v)), name).fn->operator()(none);
  }
  if (name == "default" || name == "d") {
    const Value* def = a.get(0, "default_value");
    bool boolean = arg_bool(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !truthy(v))) return def ? *def : Value::string("");
    return v;
  }
  if (name == "first" || name == "last") {
    ValueList items = iterate(v);
    if (items.empty()) return Value::undefined();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    const Value* sep = a.get(0, "d");
    const Value* attr = a.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const auto& e : iterate(v)) {
      if (!first) out += sep ? to_str(*sep) : "";
      first = false;
      out += to_str(attr ? attr_path(e, to_str(*attr)) : e);
    }
    return Value::string(out);
  }
  if (name == "list") return Value::make_list(iterate(v));
  if (name == "string") return Value::string(to_str(v));
  if (name == "safe") return v;
  if (name == "escape" || name == "e") return Value::string(html_escape(to_str(v)));
  if (name == "int") {
    const Value* def = a.get(0, "default");
    if (v.is_number()) return Value::integer(v.as_int());
    if (v.is_string()) {
      try {
        size_t used = 0;
        std::string t = py_strip(v.s, nullptr, true, true);
        int64_t x = std::stoll(t, &used);
        if (used == t.size()) return Value::integer(x);
        double d = std::stod(t, &used);
        // (int(float(x)) in Python; past int64, inf or nan: the default, as its OverflowError / ValueError give)
        if (used == t.size() && d >= -0x1p63 && d < 0x1p63) return Value::integer(static_cast<int64_t>(d));
      } catch (const std::exception&) {
      }
    }
    return def ? *def : Value::integer(0);
  }
  if (name == "float") {
    const Value* def = a.get(0, "default");
    if (v.is_number()) return Value::number(v.as_double());
    if (v.is_string()) {
      try {
        size_t used = 0;
        std::string t = py_strip(v.s, nullptr, true, true);
        double d = std::stod(t, &used);
        if (used == t.size()) return Value::number(d);
      } catch (const std::exception&) {
      }
    }
    return def ? *def : Value::number(0.0);
  }
  if (name == "abs") {
    if (v.kind == Kind::kFloat) return Value::number(std::fabs(v.f));
    return Value::integer(std::llabs(v.as_int()));
  }
  if (name == "round") {
    const Value* p = a.get(0, "precision");
    const Value* m = a.get(1, "method");
    double scale = std::pow(10.0, p ? static_cast<double>(p->as_int()) : 0.0), x = v.as_double() * scale;
    std::string method = m ? to_str(*m) : "common";
    x = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
    return Value::number(x / scale);
  }
  if (name == "replace") {
    CallArgs b = a;
    return get_attr(Value::string(to_str(v)), "replace").fn->operator()(b);
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = utf8_decode(v.s);
      std::reverse(cps.begin(), cps.end());
      return Value::string(utf8_encode(cps, 0, cps.size()));
    }
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "sort" || name == "unique" || name == "max" || name == "min") {
    bool reverse = name == "sort" && arg_bool(a, 0, "reverse", false);
    bool cs = arg_bool(a, name == "sort" ? 1 : 0, "case_sensitive", false);
    const Value* attr = a.get(name == "sort" ? 2 : 1, "attribute");
    ValueList items = iterate(v);
    auto key = [&](const Value& x) { return lower_key(attr ? attr_path(x, to_str(*attr)) : x, cs); };
    if (name == "unique") {
      ValueList out, seen;
      for (const auto& x : items) {
        Value k = key(x);
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
          seen.push_back(k);
          out.push_back(x);
        }
      }
      return Value::make_list(std::move(out));
    }
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return reverse ? less_than(key(y), key(x)) : less_than(key(x), key(y));
    });
    if (name == "sort") return Value::make_list(std::move(items));
    if (items.empty()) return Value::undefined();
    return name == "min" ? items.front() : items.back();
  }
  if (name == "sum") {
    const Value* attr = a.get(0, "attribute");
    const Value* start = a.get(1, "start");
    Value acc = start ? *start : Value::integer(0);
    for (const auto& x : iterate(v)) {
      Value y = attr ? attr_path(x, to_str(*attr)) : x;
      if (acc.is_integral() && y.is_integral()) acc = Value::integer(acc.as_int() + y.as_int());
      else acc = Value::number(acc.as_double() + y.as_double());
    }
    return acc;
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::make_list();
    if (!v.is_dict()) bad("items filter expects a mapping");
    CallArgs none;
    return get_attr(v, "items").fn->operator()(none);
  }
  if (name == "dictsort") {
    if (!v.is_dict()) bad("dictsort expects a mapping");
    bool cs = arg_bool(a, 0, "case_sensitive", false);
    const Value* by = a.get(1, "by");
    bool by_value = by && to_str(*by) == "value";
    bool reverse = arg_bool(a, 2, "reverse", false);
    ValueList out;
    for (const auto& [k, x] : *v.dict) out.push_back(Value::make_list({k, x}, true));
    std::stable_sort(out.begin(), out.end(), [&](const Value& p, const Value& q) {
      Value kp = lower_key((*p.list)[by_value ? 1 : 0], cs), kq = lower_key((*q.list)[by_value ? 1 : 0], cs);
      return reverse ? less_than(kq, kp) : less_than(kp, kq);
    });
    return Value::make_list(std::move(out));
  }
  if (name == "map") {
    ValueList out;
    const Value* attr = a.get(99, "attribute");
    if (attr) {
      const Value* def = a.get(99, "default");
      for (const auto& x : iterate(v)) {
        Value y = attr_path(x, to_str(*attr));
        out.push_back(y.is_undefined() && def ? *def : y);
      }
      return Value::make_list(std::move(out));
    }
    if (a.pos.empty() || !a.pos[0].is_string()) bad("map needs a filter name or attribute=");
    CallArgs rest;
    rest.pos.assign(a.pos.begin() + 1, a.pos.end());
    rest.kw = a.kw;
    for (const auto& x : iterate(v)) out.push_back(apply_filter(a.pos[0].s, x, rest));
    return Value::make_list(std::move(out));
  }
  if (name == "select" || name == "reject") return select_items(v, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select_items(v, a, true, name == "selectattr");
  if (name == "indent") return Value::string(do_indent(to_str(v), a));
  if (name == "attr") {
    const Value* n = a.get(0, "name");
    if (!n) bad("attr needs a name");
    return get_attr(v, to_str(*n));
  }
  if (name == "wordcount") {
    CallArgs none;
    return Value::integer(static_cast<int64_t>(get_attr(Value::string(to_str(v)), "split").fn->operator()(none).list->size()));
  }
  bad("unknown filter '" + name + "'");
}

bool has_test(const std::string& n) {
  static const char* kTests[] = {"defined", "undefined", "none", "boolean", "false", "true", "integer", "float",
                                 "number", "string", "mapping", "iterable", "sequence", "callable", "sameas",
                                 "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt",
                                 "greaterthan", ">", "ge", ">=", "in", "odd", "even", "divisibleby", "lower",
                                 "upper"};
  return std::find_if(std::begin(kTests), std::end(kTests), [&](const char* t) { return n == t; }) !=
         std::end(kTests);
}

bool apply_test(const std::string& n, const Value& v, CallArgs& a) {
  auto arg = [&]() -> const Value& {
    if (a.pos.empty()) bad("test '" + n + "' needs an argument");
    return a.pos[0];
  };
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.is_none();
  if (n == "boolean") return v.kind == Kind::kBool;
  if (n == "false") return v.kind == Kind::kBool && !v.b;
  if (n == "true") return v.kind == Kind::kBool && v.b;
  if (n == "integer") return v.kind == Kind::kInt;
  if (n == "float") return v.kind == Kind::kFloat;
  if (n == "number") return v.is_number();
  if (n == "string") return v.is_string();
  if (n == "mapping") return v.is_dict();
  if (n == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (n == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (n == "callable") return v.kind == Kind::kFunction;
  if (n == "sameas") {
    const Value& o = arg();
    if (v.kind != o.kind) return false;
    if (v.is_list()) return v.list == o.list;
    if (v.is_dict()) return v.dict == o.dict;
    return equals(v, o);
  }
  if (n == "eq" || n == "equalto" || n == "==") return equals(v, arg());
  if (n == "ne" || n == "!=") return !equals(v, arg());
  if (n == "lt" || n == "lessthan" || n == "<") return less_than(v, arg());
  if (n == "le" || n == "<=") return !less_than(arg(), v);
  if (n == "gt" || n == "greaterthan" || n == ">") return less_than(arg(), v);
  if (n == "ge" || n == ">=") return !less_than(v, arg());
  if (n == "in") return contains(arg(), v);
  if (n == "odd") return (v.as_int() % 2) != 0;
  if (n == "even") return (v.as_int() % 2) == 0;
  if (n == "divisibleby") {
    int64_t d = arg().as_int();
    if (d == 0) bad("divisibleby 0");
    return v.as_int() % d == 0;
  }
  if (n == "lower" || n == "upper") {
    if (!v.is_string()) return false;
    bool up = n == "upper", any = false;
    for (unsigned char c : v.s) {
      if (std::isalpha(c)) {
        any = true;
        if (up ? std::islower(c) : std::isupper(c)) return false;
      }
    }
    return any;
  }
  bad("unknown test '" + n + "'");
}

void add_globals(Value& g) {
  g.set(Value::string("raise_exception"), Value::function([](CallArgs& a) -> Value {
          const Value* m = a.get(0, "message");
          fail(ErrorCode::kInvalidArgument, "chat template: {}", m ? to_str(*m) : "raise_exception");
        }));
  g.set(Value::string("range"), Value::function([](CallArgs& a) {
          if (a.pos.empty() || a.pos.size() > 3) bad("range() takes 1 to 3 arguments");
          int64_t start = 0, stop, step = 1;
          if (a.pos.size() == 1) {
            stop = a.pos[0].as_int();
          } else {
            start = a.pos[0].as_int();
            stop = a.pos[1].as_int();
            if (a.pos.size() == 3) step = a.pos[2].as_int();
          }
          if (step == 0) bad("range() step must not be zero");
          ValueList out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (out.size() >= 1000000) bad("range() too long");
            out.push_back(Value::integer(i));
          }
          return Value::make_list(std::move(out));
        }));
  auto make_dict = [](bool ns) {
    return Value::function([ns](CallArgs& a) {
      Value d = Value::make_dict();
      d.is_namespace = ns;
      for (const auto& p : a.pos) {
        if (!p.is_dict()) bad("namespace()/dict() positional argument must be a mapping");
        for (const auto& [k, v] : *p.dict) d.set(k, v);
      }
      for (const auto& [k, v] : a.kw) d.set(Value::string(k), v);
      return d;
    });
  };
  g.set(Value::string("namespace"), make_dict(true));
  g.set(Value::string("dict"), make_dict(false));
  g.set(Value::string("strftime_now"), Value::function([](CallArgs& a) {
          const Value* f = a.get(0, "format");
          if (!f || !f->is_string()) bad("strftime_now needs a format string");
          std::time_t t = std::time(nullptr);
          std::tm tm{};
          localtime_r(&t, &tm);
          char buf[256];
          size_t n = std::strftime(buf, sizeof(buf), f->s.c_str(), &tm);
          return Value::string(std::string(buf, n));
        }));
}

}  // namespace qserve::jinja
