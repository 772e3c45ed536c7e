#include "tokenizer/jinja_eval.h"

#include <cmath>
#include <memory>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"

namespace qserve::jinja {
namespace {

using Frame = std::unordered_map<std::string, Value>;
using Frames = std::vector<std::shared_ptr<Frame>>;
// What a macro or a caller() keeps of the scopes it was defined in: weak, since
// the macro itself lives in one of them (a strong capture would be a cycle).
using WeakFrames = std::vector<std::weak_ptr<Frame>>;

WeakFrames weaken(const Frames& frames) { return WeakFrames(frames.begin(), frames.end()); }
Frames strengthen(const WeakFrames& frames) {
  Frames out;
  for (const auto& w : frames)
    if (auto f = w.lock()) out.push_back(std::move(f));
  return out;
}

class Renderer {
 public:
  Renderer(const Value& variables, const RenderLimits& limits) : limits_(limits) {
    auto globals = std::make_shared<Frame>();
    Value g = Value::make_dict();
    add_globals(g);
    for (const auto& [k, v] : *g.dict) (*globals)[k.s] = v;
    for (const auto& [k, v] : *variables.dict)
      if (k.is_string()) (*globals)[k.s] = v;
    frames_.push_back(globals);
    frames_.push_back(std::make_shared<Frame>());  // the template's own top-level `set`s
  }

  std::string run(const Body& body) {
    std::string out;
    exec(body, out);
    return out;
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  [[noreturn]] void error(int line, const std::string& what) const {
    fail(ErrorCode::kInvalidArgument, "chat template line {}: {}", line, what);
  }

  void step() {
    if (++steps_ > limits_.max_steps) fail(ErrorCode::kInvalidArgument, "chat template: too many steps");
  }
  void emit(std::string& out, const std::string& s) {
    out += s;
    if (out.size() > limits_.max_output_bytes) fail(ErrorCode::kInvalidArgument, "chat template: output too large");
  }

  Value lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      auto f = (*it)->find(name);
      if (f != (*it)->end()) return f->second;
    }
    return Value::undefined(name);
  }
  void assign(const std::vector<std::string>& names, const Value& v, int line) {
    if (names.size() == 1) {
      (*frames_.back())[names[0]] = v;
      return;
    }
    ValueList items = iterate(v);
    if (items.size() != names.size())
      error(line, fmt::format("cannot unpack {} values into {} names", items.size(), names.size()));
    for (size_t i = 0; i < names.size(); ++i) (*frames_.back())[names[i]] = items[i];
  }

  // One level of eval() / exec() recursion, at most limits_.max_nesting deep.
  NestingLevel nest() { return NestingLevel(nesting_, limits_.max_nesting, 0, "evaluation"); }

  Flow exec(const Body& body, std::string& out) {
    const NestingLevel level = nest();
    for (const auto& s : body) {
      step();
      Flow f = exec_one(*s, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  std::string render_body(const Body& body) {
    std::string out;
    exec(body, out);
    return out;
  }

  Flow exec_one(const Stmt& s, std::string& out) {
    switch (s.type) {
      case Stmt::Type::kText: emit(out, s.text); return Flow::kNormal;
      case Stmt::Type::kOutput: emit(out, to_str(eval(*s.expr))); return Flow::kNormal;
      case Stmt::Type::kIf:
        for (const auto& [cond, body] : s.branches)
          if (truthy(eval(*cond))) return exec(body, out);
        return exec(s.else_body, out);
      case Stmt::Type::kFor: return exec_for(s, out);
      case Stmt::Type::kSet: {
        Value v = eval(*s.expr);
        if (s.attr_target) {
          Value obj = lookup(s.targets[0]);
          if (!obj.is_dict() || !obj.is_namespace)
            error(s.line, "can only set attributes of a namespace(), not of '" + s.targets[0] + "'");
          obj.set(Value::string(s.targets[1]), v);
        } else {
          assign(s.targets, v, s.line);
        }
        return Flow::kNormal;
      }
      case Stmt::Type::kSetBlock: {
        Value v = Value::string(render_body(s.body));
        if (s.filter) v = with_body(v, *s.filter);
        assign(s.targets, v, s.line);
        return Flow::kNormal;
      }
      case Stmt::Type::kFilterBlock:
        emit(out, to_str(with_body(Value::string(render_body(s.body)), *s.filter)));
        return Flow::kNormal;
      case Stmt::Type::kMacro:
        (*frames_.back())[s.text] = make_macro(s);
        return Flow::kNormal;
      case Stmt::Type::kCallBlock: {
        if (s.expr->type != Expr::Type::kCall) error(s.line, "call block needs a macro call");
        Value callee = eval(*s.expr->items[0]);
        CallArgs args = eval_args(*s.expr);
        WeakFrames snapshot = weaken(frames_);
        const Body* body = &s.body;
        args.kw.emplace_back("caller", Value::function([this, snapshot, body](CallArgs&) {
                               Frames saved = frames_;
                               frames_ = strengthen(snapshot);
                               frames_.push_back(std::make_shared<Frame>());
                               std::string r = render_body(*body);
                               frames_ = saved;
                               return Value::string(r);
                             }));
        emit(out, to_str(call(callee, args, s.line)));
        return Flow::kNormal;
      }
      case Stmt::Type::kBreak: return Flow::kBreak;
      case Stmt::Type::kContinue: return Flow::kContinue;
      case Stmt::Type::kScope: return exec(s.body, out);
    }
    return Flow::kNormal;
  }

  Value with_body(const Value& body, const Expr& filter) {
    frames_.push_back(std::make_shared<Frame>());
    (*frames_.back())["__body__"] = body;
    Value v = eval(filter);
    frames_.pop_back();
    return v;
  }

  Flow exec_for(const Stmt& s, std::string& out) {
    ValueList items = iterate(eval(*s.expr));
    if (s.filter) {
      ValueList kept;
      for (auto& item : items) {
        frames_.push_back(std::make_shared<Frame>());
        assign(s.targets, item, s.line);
        bool keep = truthy(eval(*s.filter));
        frames_.pop_back();
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(s.else_body, out);
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      step();
      auto frame = std::make_shared<Frame>();
      frames_.push_back(frame);
      assign(s.targets, items[static_cast<size_t>(i)], s.line);
      Value loop = Value::make_dict();
      loop.set(Value::string("index"), Value::integer(i + 1));
      loop.set(Value::string("index0"), Value::integer(i));
      loop.set(Value::string("revindex"), Value::integer(n - i));
      loop.set(Value::string("revindex0"), Value::integer(n - i - 1));
      loop.set(Value::string("first"), Value::boolean(i == 0));
      loop.set(Value::string("last"), Value::boolean(i == n - 1));
      loop.set(Value::string("length"), Value::integer(n));
      loop.set(Value::string("depth"), Value::integer(1));
      loop.set(Value::string("depth0"), Value::integer(0));
      loop.set(Value::string("previtem"), i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("previtem"));
      loop.set(Value::string("nextitem"), i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("nextitem"));
      loop.set(Value::string("cycle"), Value::function([i](CallArgs& a) {
                 if (a.pos.empty()) fail(ErrorCode::kInvalidArgument, "chat template: loop.cycle() needs arguments");
                 return a.pos[static_cast<size_t>(i) % a.pos.size()];
               }));
      (*frame)["loop"] = loop;
      Flow f = exec(s.body, out);
      frames_.pop_back();
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  Value make_macro(const Stmt& s) {
    WeakFrames snapshot = weaken(frames_);
    const Stmt* def = &s;
    return Value::function([this, snapshot, def](CallArgs& a) {
      if (++depth_ > limits_.max_call_depth) error(def->line, "macro recursion too deep");
      Frames saved = frames_;
      frames_ = strengthen(snapshot);
      auto frame = std::make_shared<Frame>();
      frames_.push_back(frame);
      for (size_t i = 0; i < def->params.size(); ++i) {
        const auto& [name, dflt] = def->params[i];
        const Value* v = a.get(i, name);
        (*frame)[name] = v ? *v : dflt ? eval(*dflt) : Value::undefined(name);
      }
      ValueList varargs;
      for (size_t i = def->params.size(); i < a.pos.size(); ++i) varargs.push_back(a.pos[i]);
      (*frame)["varargs"] = Value::make_list(std::move(varargs));
      Value kwargs = Value::make_dict();
      for (const auto& [k, v] : a.kw) {
        bool is_param = false;
        for (const auto& p : def->params) is_param |= p.first == k;
        if (k == "caller") (*frame)["caller"] = v;
        else if (!is_param) kwargs.set(Value::string(k), v);
      }
      (*frame)["kwargs"] = kwargs;
      std::string r;
      try {
        r = render_body(def->body);
      } catch (...) {
        frames_ = saved;
        --depth_;
        throw;
      }
      frames_ = saved;
      --depth_;
      return Value::string(r);
    });
  }

  CallArgs eval_args(const Expr& e) {
    CallArgs a;
    for (const auto& x : e.args) a.pos.push_back(eval(*x));
    for (const auto& [k, x] : e.kwargs) a.kw.emplace_back(k, eval(*x));
    return a;
  }

  Value call(const Value& callee, CallArgs& args, int line) {
    if (callee.is_undefined())
      error(line, "'" + (callee.s.empty() ? std::string("value") : callee.s) + "' is undefined");
    if (callee.kind != Kind::kFunction) error(line, std::string("'") + kind_name(callee.kind) + "' is not callable");
    return (*callee.fn)(args);
  }

  [[noreturn]] void undefined_error(const Value& v, int line) const {
    error(line, "'" + (v.s.empty() ? std::string("value") : v.s) + "' is undefined");
  }

  Value arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
    if (op == "~") return Value::string(to_str(a) + to_str(b));
    if (a.is_undefined()) undefined_error(a, line);
    if (b.is_undefined()) undefined_error(b, line);
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Value::string(a.s + b.s);
      if (a.is_list() && b.is_list()) {
        ValueList out = *a.list;
        out.insert(out.end(), b.list->begin(), b.list->end());
        return Value::make_list(std::move(out), a.is_tuple);
      }
    }
    if (op == "*" && (a.is_string() || a.is_list()) && b.is_integral()) {
      int64_t n = b.as_int();
      if (n > 0 && (a.is_string() ? a.s.size() : a.list->size()) * static_cast<size_t>(n) > limits_.max_output_bytes)
        error(line, "repetition too large");
      if (a.is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += a.s;
        return Value::string(out);
      }
      ValueList out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), a.list->begin(), a.list->end());
      return Value::make_list(std::move(out));
    }
    if (!a.is_number() || !b.is_number())
      error(line, fmt::format("unsupported operand types for {}: {} and {}", op, kind_name(a.kind), kind_name(b.kind)));
    bool ints = a.is_integral() && b.is_integral();
    if (op == "/") {
      if (b.as_double() == 0.0) error(line, "division by zero");
      return Value::number(a.as_double() / b.as_double());
    }
    if (op == "//" || op == "%") {
      if (b.as_double() == 0.0) error(line, "division by zero");
      if (ints) {
        int64_t x = a.as_int(), y = b.as_int(), q = x / y, r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) {
          --q;
          r += y;
        }
        return Value::integer(op == "//" ? q : r);
      }
      double x = a.as_double(), y = b.as_double(), q = std::floor(x / y);
      return Value::number(op == "//" ? q : x - q * y);
    }
    if (op == "**") {
      if (ints && b.as_int() >= 0) {
        int64_t r = 1;
        for (int64_t i = 0; i < b.as_int() && i < 64; ++i) r *= a.as_int();
        return Value::integer(r);
      }
      return Value::number(std::pow(a.as_double(), b.as_double()));
    }
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      return Value::integer(op == "+" ? x + y : op == "-" ? x - y : x * y);
    }
    double x = a.as_double(), y = b.as_double();
    return Value::number(op == "+" ? x + y : op == "-" ? x - y : x * y);
  }

  bool compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "in") return contains(b, a);
    if (op == "not in") return !contains(b, a);
    if (op == "<") return less_than(a, b);
    if (op == ">") return less_than(b, a);
    if (op == "<=") return !less_than(b, a);
    return !less_than(a, b);  // >=
  }

  Value eval(const Expr& e) {
    const NestingLevel level = nest();
    switch (e.type) {
      case Expr::Type::kLiteral: return e.literal;
      case Expr::Type::kName: return lookup(e.name);
      case Expr::Type::kList:
      case Expr::Type::kTuple: {
        ValueList items;
        for (const auto& x : e.items) items.push_back(eval(*x));
        return Value::make_list(std::move(items), e.type == Expr::Type::kTuple);
      }
      case Expr::Type::kDict: {
        Value d = Value::make_dict();
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) d.set(eval(*e.items[i]), eval(*e.items[i + 1]));
        return d;
      }
      case Expr::Type::kGetAttr: return get_attr(eval(*e.items[0]), e.name);
      case Expr::Type::kGetItem: return get_item(eval(*e.items[0]), eval(*e.items[1]));
      case Expr::Type::kSlice: {
        Value obj = eval(*e.items[0]);
        Value parts[3];
        for (int k = 0; k < 3; ++k)
          if (e.items[k + 1]) parts[k] = eval(*e.items[k + 1]);
        return slice(obj, e.items[1] ? &parts[0] : nullptr, e.items[2] ? &parts[1] : nullptr,
                     e.items[3] ? &parts[2] : nullptr);
      }
      case Expr::Type::kCall: {
        Value callee = eval(*e.items[0]);
        CallArgs args = eval_args(e);
        return call(callee, args, e.line);
      }
      case Expr::Type::kFilter: {
        Value v = eval(*e.items[0]);
        CallArgs args = eval_args(e);
        return apply_filter(e.name, v, args);
      }
      case Expr::Type::kTest: {
        Value v = eval(*e.items[0]);
        CallArgs args = eval_args(e);
        bool r = apply_test(e.name, v, args);
        return Value::boolean(e.negated ? !r : r);
      }
      case Expr::Type::kNot: return Value::boolean(!truthy(eval(*e.items[0])));
      case Expr::Type::kNeg:
      case Expr::Type::kPos: {
        Value v = eval(*e.items[0]);
        if (v.is_undefined()) undefined_error(v, e.line);
        if (!v.is_number()) error(e.line, std::string("bad operand type for unary -: ") + kind_name(v.kind));
        if (e.type == Expr::Type::kPos) return v;
        return v.kind == Kind::kFloat ? Value::number(-v.f) : Value::integer(-v.as_int());
      }
      case Expr::Type::kBinary: return arithmetic(e.name, eval(*e.items[0]), eval(*e.items[1]), e.line);
      case Expr::Type::kCompare: {
        Value left = eval(*e.items[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.items[i + 1]);
          if (!compare(e.ops[i], left, right)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case Expr::Type::kAnd: {
        Value a = eval(*e.items[0]);
        return truthy(a) ? eval(*e.items[1]) : a;
      }
      case Expr::Type::kOr: {
        Value a = eval(*e.items[0]);
        return truthy(a) ? a : eval(*e.items[1]);
      }
      case Expr::Type::kCondition:
        if (truthy(eval(*e.items[1]))) return eval(*e.items[0]);
        return e.items[2] ? eval(*e.items[2]) : Value::undefined();
    }
    return Value::undefined();
  }

  RenderLimits limits_;
  Frames frames_;
  size_t steps_ = 0;
  int depth_ = 0;
  int nesting_ = 0;  // nest()
};

}  // namespace

std::string render(const Body& body, const Value& variables, const RenderLimits& limits) {
  QS_CHECK(variables.is_dict()) << "render: variables must be a dict";
  Renderer r(variables, limits);
  return r.run(body);
}

}  // namespace qserve::jinja
