// Renders a parsed template (jinja_parser.h) against a dict of variables.
// Scoping follows jinja2: a for-loop iteration and a macro call open a frame
// that `set` writes into; `if` does not; namespace() objects carry state out.
#pragma once

#include <cstddef>
#include <string>

#include "tokenizer/jinja_ast.h"

namespace qserve::jinja {

struct RenderLimits {
  size_t max_output_bytes = 64u << 20;  // a runaway template stops here
  size_t max_steps = 50'000'000;        // statements + loop iterations
  int max_call_depth = 64;              // macro recursion
  // Expressions and blocks being evaluated inside one another, macro calls
  // included: a template stops here with an error, well before the stack
  // (8 MB on a server thread) runs out.
  int max_nesting = 1000;
};

// `variables` is a dict (Value::make_dict); the globals of jinja_builtins are
// added underneath it. Throws qserve::Error(kInvalidArgument) on any error,
// including raise_exception() in the template.
std::string render(const Body& body, const Value& variables, const RenderLimits& limits = {});

}  // namespace qserve::jinja
