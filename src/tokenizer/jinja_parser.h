// Parses the chunks of jinja_lexer into a syntax tree (jinja_ast.h), with
// jinja2's operator precedence: or < and < not < comparisons (==, in, not in)
// < + - < ~ < * / // % < ** < unary - < postfix (.a [i] (call)) < | filter, is test.
#pragma once

#include <string>

#include "tokenizer/jinja_ast.h"

namespace qserve::jinja {

// Throws qserve::Error(kInvalidArgument) with the line on a syntax error.
Body parse_template(const std::string& source);

}  // namespace qserve::jinja
