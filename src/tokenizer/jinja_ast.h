// The syntax tree of the Jinja subset: expressions and statements.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja_value.h"

namespace qserve::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Expr {
  enum class Type {
    kLiteral,   // literal
    kName,      // name
    kList,      // items
    kTuple,     // items
    kDict,      // items as key, value pairs
    kGetAttr,   // items[0] . name
    kGetItem,   // items[0] [ items[1] ]
    kSlice,     // items[0] [ items[1] : items[2] : items[3] ]  (null = omitted)
    kCall,      // items[0] ( args, kwargs )
    kFilter,    // items[0] | name ( args, kwargs )
    kTest,      // items[0] is [not] name ( args )
    kNot,       // not items[0]
    kNeg,       // - items[0]
    kPos,       // + items[0]
    kBinary,    // items[0] name items[1]: + - * / // % ** ~
    kCompare,   // items[0] ops[0] items[1] ops[1] items[2] ...
    kAnd,       // items[0] and items[1]
    kOr,        // items[0] or items[1]
    kCondition  // items[0] if items[1] else items[2] (items[2] may be null)
  };
  Type type = Type::kLiteral;
  int line = 0;
  std::string name;
  Value literal;
  bool negated = false;  // kTest
  std::vector<ExprPtr> items;
  std::vector<ExprPtr> args;  // kCall / kFilter / kTest
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare
  // Nodes on the longest path from here to a leaf. The parser keeps it at most
  // kMaxExprHeight, so that evaluating or destroying a tree (both recursive)
  // never nests deeper than that, whatever the template.
  int height = 1;
};

constexpr int kMaxExprHeight = 100;
// Nested expressions being parsed ((, [, {, arguments, unary operators) and
// nested blocks ({% if %} in {% for %} ...): the parser's own recursion.
constexpr int kMaxParseNesting = 100;

// One level of a recursion whose depth the template decides (parsing,
// evaluation), counted in `depth`: past `max` levels, Error(kInvalidArgument)
// "chat template[ line L]: WHAT nested more than MAX levels deep" (line <= 0:
// none), before the stack is at risk.
class NestingLevel {
 public:
  NestingLevel(int& depth, int max, int line, const char* what) : depth_(depth) {
    if (++depth_ > max) {
      --depth_;
      if (line > 0) fail(ErrorCode::kInvalidArgument, "chat template line {}: {} nested more than {} levels deep", line, what, max);
      fail(ErrorCode::kInvalidArgument, "chat template: {} nested more than {} levels deep", what, max);
    }
  }
  ~NestingLevel() { --depth_; }
  NestingLevel(const NestingLevel&) = delete;
  NestingLevel& operator=(const NestingLevel&) = delete;

 private:
  int& depth_;
};

struct Stmt {
  enum class Type {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches (cond, body)...; else_body
    kFor,       // for targets in expr [if filter]: body; else_body
    kSet,       // set targets = expr, or set target_obj.attr = expr
    kSetBlock,  // {% set name %}body{% endset %}
    kMacro,     // {% macro name(params) %}body{% endmacro %}
    kCallBlock, // {% call expr %}body{% endcall %}: caller() renders body
    kFilterBlock,  // {% filter name(args) %}body{% endfilter %}
    kBreak,
    kContinue,
    kScope      // a body rendered in place ({% generation %})
  };
  Type type = Type::kText;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;                                   // kFor: the `if` clause; kSetBlock/kFilterBlock: a filter chain
  std::vector<std::string> targets;                 // kFor / kSet: names; kSet with attr: {object, attr}
  bool attr_target = false;                         // kSet: `set ns.attr = ...`
  std::vector<std::pair<ExprPtr, Body>> branches;   // kIf
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro: name, default (may be null)
};

}  // namespace qserve::jinja
