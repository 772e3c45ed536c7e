#include "tokenizer/jinja_parser.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "tokenizer/jinja_lexer.h"

namespace qserve::jinja {
namespace {

using TT = Token::Type;

// Parses the tokens of one tag.
class ExprParser {
 public:
  ExprParser(const std::vector<Token>& tokens, int line) : toks_(tokens), line_(line) {}

  [[noreturn]] void error(const std::string& what) const {
    fail(ErrorCode::kInvalidArgument, "chat template line {}: {}", line_, what);
  }
  bool at_end() const { return pos_ >= toks_.size(); }
  const Token* peek(size_t ahead = 0) const { return pos_ + ahead < toks_.size() ? &toks_[pos_ + ahead] : nullptr; }
  bool is_op(const char* op, size_t ahead = 0) const {
    auto* t = peek(ahead);
    return t && t->type == TT::kOp && t->text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    auto* t = peek(ahead);
    return t && t->type == TT::kName && t->text == name;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++pos_;
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    ++pos_;
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(std::string("expected '") + op + "'");
  }
  std::string expect_name() {
    auto* t = peek();
    if (!t || t->type != TT::kName) error("expected a name");
    ++pos_;
    return t->text;
  }
  void expect_end() const {
    if (!at_end()) error("unexpected '" + toks_[pos_].text + "'");
  }

  ExprPtr node(Expr::Type type) {
    auto e = std::make_unique<Expr>();
    e->type = type;
    e->line = line_;
    return e;
  }
  // A finished composite node: its height from its children, at most
  // kMaxExprHeight (a chain such as a.b.b.b... or 1+1+1... grows by one a link,
  // so it stops here before it is deep enough to matter).
  ExprPtr seal(ExprPtr e) {
    int h = 0;
    for (const auto& x : e->items)
      if (x) h = std::max(h, x->height);
    for (const auto& x : e->args) h = std::max(h, x->height);
    for (const auto& [k, x] : e->kwargs) h = std::max(h, x->height);
    e->height = h + 1;
    if (e->height > kMaxExprHeight) error(fmt::format("expression nested more than {} levels deep", kMaxExprHeight));
    return e;
  }
  // One level of the parser's recursion (expression(), unary and `not`
  // prefixes): "((((...", "- - - -...".
  NestingLevel nest() { return NestingLevel(nesting_, kMaxParseNesting, line_, "expression"); }

  ExprPtr expression(bool with_condition = true) {
    const NestingLevel level = nest();
    ExprPtr e = or_expr();
    while (with_condition && is_name("if")) {
      ++pos_;
      auto c = node(Expr::Type::kCondition);
      c->items.push_back(std::move(e));
      c->items.push_back(or_expr());
      c->items.push_back(skip_name("else") ? expression() : nullptr);
      e = seal(std::move(c));
    }
    return e;
  }

  // An expression, or a bare tuple `a, b` (as in `set x = a, b`).
  ExprPtr tuple_or_expression(bool with_condition = true) {
    ExprPtr first = expression(with_condition);
    if (!is_op(",")) return first;
    auto t = node(Expr::Type::kTuple);
    t->items.push_back(std::move(first));
    while (skip_op(",")) {
      if (at_end() || is_op(")") || is_name("if")) break;
      t->items.push_back(expression(with_condition));
    }
    return seal(std::move(t));
  }

  std::vector<std::string> target_names() {
    std::vector<std::string> names;
    bool paren = skip_op("(");
    names.push_back(expect_name());
    while (skip_op(",")) names.push_back(expect_name());
    if (paren) expect_op(")");
    return names;
  }

 private:
  ExprPtr binary(Expr::Type type, const char* op, ExprPtr a, ExprPtr b) {
    auto e = node(type);
    e->name = op;
    e->items.push_back(std::move(a));
    e->items.push_back(std::move(b));
    return seal(std::move(e));
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (skip_name("or")) e = binary(Expr::Type::kOr, "or", std::move(e), and_expr());
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (skip_name("and")) e = binary(Expr::Type::kAnd, "and", std::move(e), not_expr());
    return e;
  }
  ExprPtr not_expr() {
    if (skip_name("not")) {
      const NestingLevel level = nest();
      auto e = node(Expr::Type::kNot);
      e->items.push_back(not_expr());
      return seal(std::move(e));
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr first = math1();
    ExprPtr cmp;
    static const std::set<std::string> kOps = {"==", "!=", "<", ">", "<=", ">="};
    while (true) {
      std::string op;
      if (peek() && peek()->type == TT::kOp && kOps.count(peek()->text)) {
        op = peek()->text;
        ++pos_;
      } else if (is_name("in")) {
        op = "in";
        ++pos_;
      } else if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        pos_ += 2;
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(Expr::Type::kCompare);
        cmp->items.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(math1());
    }
    return cmp ? seal(std::move(cmp)) : std::move(first);
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      std::string op = peek()->text;
      ++pos_;
      e = binary(Expr::Type::kBinary, op.c_str(), std::move(e), concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (skip_op("~")) e = binary(Expr::Type::kBinary, "~", std::move(e), math2());
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = peek()->text;
      ++pos_;
      e = binary(Expr::Type::kBinary, op.c_str(), std::move(e), power());
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary(true);
    while (skip_op("**")) e = binary(Expr::Type::kBinary, "**", std::move(e), unary(true));
    return e;
  }
  ExprPtr unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const NestingLevel level = nest();
      e = node(is_op("-") ? Expr::Type::kNeg : Expr::Type::kPos);
      ++pos_;
      e->items.push_back(unary(false));
      e = seal(std::move(e));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filter_expr(std::move(e));
    return e;
  }
  ExprPtr primary() {
    auto* t = peek();
    if (!t) error("unexpected end of expression");
    if (t->type == TT::kName) {
      ++pos_;
      auto e = node(Expr::Type::kLiteral);
      if (t->text == "true" || t->text == "True") e->literal = Value::boolean(true);
      else if (t->text == "false" || t->text == "False") e->literal = Value::boolean(false);
      else if (t->text == "none" || t->text == "None") e->literal = Value::none();
      else {
        e->type = Expr::Type::kName;
        e->name = t->text;
      }
      return e;
    }
    if (t->type == TT::kString || t->type == TT::kInt || t->type == TT::kFloat) {
      ++pos_;
      auto e = node(Expr::Type::kLiteral);
      e->literal = t->type == TT::kString ? Value::string(t->text)
                   : t->type == TT::kInt  ? Value::integer(t->int_value)
                                          : Value::number(t->float_value);
      return e;
    }
    if (skip_op("(")) {
      if (skip_op(")")) return node(Expr::Type::kTuple);
      ExprPtr e = expression();
      if (is_op(",")) {
        auto tup = node(Expr::Type::kTuple);
        tup->items.push_back(std::move(e));
        while (skip_op(",")) {
          if (is_op(")")) break;
          tup->items.push_back(expression());
        }
        e = seal(std::move(tup));
      }
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto e = node(Expr::Type::kList);
      while (!skip_op("]")) {
        if (!e->items.empty()) expect_op(",");
        if (skip_op("]")) break;
        e->items.push_back(expression());
      }
      return seal(std::move(e));
    }
    if (skip_op("{")) {
      auto e = node(Expr::Type::kDict);
      while (!skip_op("}")) {
        if (!e->items.empty()) expect_op(",");
        if (skip_op("}")) break;
        e->items.push_back(expression());
        expect_op(":");
        e->items.push_back(expression());
      }
      return seal(std::move(e));
    }
    error("unexpected '" + t->text + "'");
  }
  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (skip_op(".")) {
        auto* t = peek();
        if (t && t->type == TT::kInt) {
          ++pos_;
          auto g = node(Expr::Type::kGetItem);
          auto idx = node(Expr::Type::kLiteral);
          idx->literal = Value::integer(t->int_value);
          g->items.push_back(std::move(e));
          g->items.push_back(std::move(idx));
          e = seal(std::move(g));
        } else {
          auto g = node(Expr::Type::kGetAttr);
          g->name = expect_name();
          g->items.push_back(std::move(e));
          e = seal(std::move(g));
        }
      } else if (skip_op("[")) {
        e = subscript(std::move(e));
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }
  ExprPtr subscript(ExprPtr obj) {
    ExprPtr parts[3];
    int n_colons = 0;
    if (!is_op(":")) parts[0] = expression();
    while (skip_op(":")) {
      ++n_colons;
      if (n_colons > 2) error("bad slice");
      if (!is_op(":") && !is_op("]")) parts[n_colons] = expression();
    }
    expect_op("]");
    if (n_colons == 0) {
      auto g = node(Expr::Type::kGetItem);
      g->items.push_back(std::move(obj));
      g->items.push_back(std::move(parts[0]));
      return seal(std::move(g));
    }
    auto s = node(Expr::Type::kSlice);
    s->items.push_back(std::move(obj));
    for (auto& p : parts) s->items.push_back(std::move(p));
    return seal(std::move(s));
  }
  void call_args(Expr& e) {
    expect_op("(");
    while (!skip_op(")")) {
      if (!e.args.empty() || !e.kwargs.empty()) {
        expect_op(",");
        if (skip_op(")")) break;
      }
      if (peek() && peek()->type == TT::kName && is_op("=", 1)) {
        std::string key = peek()->text;
        pos_ += 2;
        e.kwargs.emplace_back(key, expression());
      } else {
        if (!e.kwargs.empty()) error("positional argument after keyword argument");
        e.args.push_back(expression());
      }
    }
  }
  ExprPtr call(ExprPtr callee) {
    auto c = node(Expr::Type::kCall);
    c->items.push_back(std::move(callee));
    call_args(*c);
    return seal(std::move(c));
  }
  std::string dotted_name() {
    std::string name = expect_name();
    while (is_op(".") && peek(1) && peek(1)->type == TT::kName) {
      pos_ += 1;
      name += "." + expect_name();
    }
    return name;
  }

 public:
  ExprPtr filter_expr(ExprPtr e) {
    while (true) {
      if (skip_op("|")) {
        auto f = node(Expr::Type::kFilter);
        f->name = dotted_name();
        f->items.push_back(std::move(e));
        if (is_op("(")) call_args(*f);
        e = seal(std::move(f));
      } else if (skip_name("is")) {
        auto t = node(Expr::Type::kTest);
        t->negated = skip_name("not");
        t->name = dotted_name();
        t->items.push_back(std::move(e));
        auto* nt = peek();
        bool arg_follows = nt && !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") &&
                           (nt->type != TT::kOp || nt->text == "[" || nt->text == "{");
        if (is_op("(")) call_args(*t);
        else if (arg_follows) t->args.push_back(postfix(primary()));
        e = seal(std::move(t));
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

 private:
  const std::vector<Token>& toks_;
  size_t pos_ = 0;
  int line_;
  int nesting_ = 0;  // nest()
};

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Chunk> chunks) : chunks_(std::move(chunks)) {}

  Body parse_all() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

 private:
  // Parses statements until one of `ends` (a statement keyword) is met; sets
  // `end` to it and leaves its parser positioned after the keyword.
  Body parse_body(const std::set<std::string>& ends, std::string& end) {
    const NestingLevel level(nesting_, kMaxParseNesting, 0, "blocks");
    Body body;
    while (idx_ < chunks_.size()) {
      Chunk& c = chunks_[idx_++];
      if (c.type == Chunk::Type::kText) {
        auto s = stmt(Stmt::Type::kText, c.line);
        s->text = c.text;
        body.push_back(std::move(s));
        continue;
      }
      if (c.type == Chunk::Type::kOutput) {
        ExprParser p(c.tokens, c.line);
        auto s = stmt(Stmt::Type::kOutput, c.line);
        s->expr = p.tuple_or_expression();
        p.expect_end();
        body.push_back(std::move(s));
        continue;
      }
      if (c.tokens.empty() || c.tokens[0].type != TT::kName)
        fail(ErrorCode::kInvalidArgument, "chat template line {}: expected a statement", c.line);
      const std::string& kw = c.tokens[0].text;
      if (ends.count(kw)) {
        end = kw;
        cur_ = std::make_unique<ExprParser>(c.tokens, c.line);
        cur_->expect_name();
        return body;
      }
      body.push_back(statement(c));
    }
    if (!ends.empty())
      fail(ErrorCode::kInvalidArgument, "chat template: unexpected end of template, expected '{}'", *ends.rbegin());
    return body;
  }

  StmtPtr stmt(Stmt::Type type, int line) {
    auto s = std::make_unique<Stmt>();
    s->type = type;
    s->line = line;
    return s;
  }

  StmtPtr statement(Chunk& c) {
    ExprParser p(c.tokens, c.line);
    std::string kw = p.expect_name();
    std::string end;
    if (kw == "if") {
      auto s = stmt(Stmt::Type::kIf, c.line);
      ExprPtr cond = p.expression();
      p.expect_end();
      while (true) {
        Body b = parse_body({"elif", "else", "endif"}, end);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "elif") {
          cond = cur_->expression();
          cur_->expect_end();
          continue;
        }
        cur_->expect_end();
        if (end == "else") {
          s->else_body = parse_body({"endif"}, end);
          cur_->expect_end();
        }
        break;
      }
      return s;
    }
    if (kw == "for") {
      auto s = stmt(Stmt::Type::kFor, c.line);
      s->targets = p.target_names();
      if (!p.skip_name("in")) p.error("expected 'in'");
      s->expr = p.tuple_or_expression(false);
      if (p.skip_name("if")) s->filter = p.expression();
      if (p.skip_name("recursive")) p.error("recursive loops are not supported");
      p.expect_end();
      s->body = parse_body({"else", "endfor"}, end);
      cur_->expect_end();
      if (end == "else") {
        s->else_body = parse_body({"endfor"}, end);
        cur_->expect_end();
      }
      return s;
    }
    if (kw == "set") {
      std::vector<std::string> names;
      bool attr = false;
      names.push_back(p.expect_name());
      if (p.skip_op(".")) {
        names.push_back(p.expect_name());
        attr = true;
      } else {
        while (p.skip_op(",")) names.push_back(p.expect_name());
      }
      if (p.skip_op("=")) {
        auto s = stmt(Stmt::Type::kSet, c.line);
        s->targets = std::move(names);
        s->attr_target = attr;
        s->expr = p.tuple_or_expression();
        p.expect_end();
        return s;
      }
      if (attr || names.size() != 1) p.error("block set needs a single name");
      auto s = stmt(Stmt::Type::kSetBlock, c.line);
      s->targets = std::move(names);
      if (p.is_op("|")) s->filter = filter_chain(p);
      p.expect_end();
      s->body = parse_body({"endset"}, end);
      cur_->expect_end();
      return s;
    }
    if (kw == "macro") {
      auto s = stmt(Stmt::Type::kMacro, c.line);
      s->text = p.expect_name();
      p.expect_op("(");
      while (!p.skip_op(")")) {
        if (!s->params.empty()) p.expect_op(",");
        std::string name = p.expect_name();
        ExprPtr def = p.skip_op("=") ? p.expression() : nullptr;
        s->params.emplace_back(name, std::move(def));
      }
      p.expect_end();
      s->body = parse_body({"endmacro"}, end);
      cur_->expect_end();
      return s;
    }
    if (kw == "call") {
      auto s = stmt(Stmt::Type::kCallBlock, c.line);
      s->expr = p.expression();
      p.expect_end();
      s->body = parse_body({"endcall"}, end);
      cur_->expect_end();
      return s;
    }
    if (kw == "filter") {
      auto s = stmt(Stmt::Type::kFilterBlock, c.line);
      std::vector<Token> toks = {Token{TT::kOp, "|"}};  // `filter f | g` parsed as `__body__ | f | g`
      toks.insert(toks.end(), c.tokens.begin() + 1, c.tokens.end());
      ExprParser q(toks, c.line);
      s->filter = filter_chain(q);
      q.expect_end();
      s->body = parse_body({"endfilter"}, end);
      cur_->expect_end();
      return s;
    }
    if (kw == "break" || kw == "continue") {
      p.expect_end();
      return stmt(kw == "break" ? Stmt::Type::kBreak : Stmt::Type::kContinue, c.line);
    }
    if (kw == "generation") {
      p.expect_end();
      auto s = stmt(Stmt::Type::kScope, c.line);
      s->body = parse_body({"endgeneration"}, end);
      cur_->expect_end();
      return s;
    }
    fail(ErrorCode::kInvalidArgument, "chat template line {}: unsupported statement '{}'", c.line, kw);
  }

  // `| f(x) | g` applied to the placeholder name "__body__" (the rendered body).
  ExprPtr filter_chain(ExprParser& p) {
    auto base = std::make_unique<Expr>();
    base->type = Expr::Type::kName;
    base->name = "__body__";
    return p.filter_expr(std::move(base));
  }

  std::vector<Chunk> chunks_;
  size_t idx_ = 0;
  int nesting_ = 0;  // parse_body's recursion
  std::unique_ptr<ExprParser> cur_;  // the parser of the block-ending tag just met
};

}  // namespace

Body parse_template(const std::string& source) {
  TemplateParser parser(lex_template(source));
  return parser.parse_all();
}

}  // namespace qserve::jinja
