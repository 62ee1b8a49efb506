"""RocketMQ's SQL92 message selector (the broker's ``filter`` module): the grammar of its
SelectorParser.jj as a lark LALR grammar, compiled once per expression into nested closures
that evaluate a message's properties (``TAGS`` is one of them). No I/O here.

What it accepts and how it evaluates follow RocketMQ's classes exactly:

- Keywords (``AND OR NOT BETWEEN IN IS NULL TRUE FALSE CONTAINS STARTSWITH ENDSWITH``) in any
  case; property names ``[a-zA-Z_$][a-zA-Z0-9_$]*``; ``'strings'`` with ``''`` for a quote;
  decimal literals (an ``Integer``, or a ``Long`` past 32 bits, optional ``L``), floating
  literals (``1.5``, ``.5``, ``5.``, ``1E3``; a ``Double``, which must be at least
  ``Double.MIN_VALUE``, so ``0.0`` is refused as RocketMQ refuses it); ``--`` line and
  ``/* */`` block comments. RocketMQ's grammar has no hex or octal literals and no ``LIKE``.
- ``= <>`` compare anything; ``> >= < <=`` and BETWEEN's bounds only numbers and properties
  (RocketMQ's checkLessThanOperand); two properties compared by ``>`` are parsed as doubles;
  ``IN``/``NOT IN`` take string literals and need a property on the left.
- Values meet as in ``pocketmq.filter.java``: ``a > 5`` parses ``a`` as an Integer, so
  ``a = '3000000000'`` against ``5`` throws, and a message whose evaluation throws does not
  match.
- Null is unknown: a missing property makes a comparison null, ``AND``/``OR`` follow
  three-valued logic, ``NOT`` null is null, and only a TRUE result matches. ``CONTAINS`` and
  friends answer FALSE (never null) for a missing property, and FALSE for an empty search
  string, negated or not.
- A property used as a condition (``a AND b > 1``) is FALSE when set (its value is a String,
  never a Boolean) and null when missing, as UnaryExpression.createBooleanCast says.

One deliberate difference: RocketMQ's generated parser stops after the first complete
expression and ignores what follows (``a = 1 b = 2`` selects ``a = 1``); here trailing input is
an error, so a forgotten ``AND`` cannot silently change a subscription. Nesting deeper than
``MAX_DEPTH`` levels is refused, which keeps evaluation clear of Python's recursion limit;
``AND``/``OR`` chains are flat, so long lists of alternatives do not count against it.
"""

from __future__ import annotations

import functools
from typing import Final

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from pocketmq.errors import PocketMQError
from pocketmq.filter.expressions import (
    TEXT_TESTS,
    Evaluate,
    Expr,
    Invalid,
    Properties,
    as_boolean,
    between,
    decimal,
    equal,
    equal_checked,
    floating,
    literal,
    logic,
    membership,
    negated,
    negation,
    ordering,
    prop,
    text_test,
)
from pocketmq.filter.java import EvaluationError

# Compiled expressions kept (RocketMQ's SelectorParser keeps 100); failures are kept too.
CACHE_SIZE: Final = 1024
# How much of a refused expression an error message quotes.
_SHOWN_CHARS: Final = 200

KEYWORDS: Final = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS",
     "STARTSWITH", "ENDSWITH"}
)  # fmt: skip

# Keywords are lexed as ID and retyped by _keyword (JavaCC's IGNORE_CASE on ASCII letters);
# their terminals start with "_" so that the tree leaves them out, but for the three text
# tests (CONTAINS, STARTSWITH, ENDSWITH), one TEXT_TEST terminal that keeps its word.
_GRAMMAR: Final = r"""
?start: or_expr

?or_expr: and_expr
        | or_expr _OR and_expr                        -> or_

?and_expr: eq_expr
         | and_expr _AND eq_expr                      -> and_

?eq_expr: cmp_expr
        | eq_expr "=" cmp_expr                        -> eq
        | eq_expr NOT_EQUAL cmp_expr                  -> ne
        | eq_expr _IS _NULL                           -> is_null
        | eq_expr _IS _NOT _NULL                      -> is_not_null

?cmp_expr: unary
         | cmp_expr ORDER unary                       -> ordering
         | cmp_expr TEXT_TEST STRING                  -> text_test
         | cmp_expr _NOT TEXT_TEST STRING             -> not_text_test
         | cmp_expr _BETWEEN unary _AND unary         -> between
         | cmp_expr _NOT _BETWEEN unary _AND unary    -> not_between
         | cmp_expr _IN "(" strings ")"               -> in_
         | cmp_expr _NOT _IN "(" strings ")"          -> not_in

strings: STRING ("," STRING)*

?unary: "+" unary
      | "-" unary                                     -> negate
      | _NOT unary                                    -> not_
      | primary

?primary: STRING                                      -> string
        | DECIMAL                                     -> decimal
        | FLOAT                                       -> floating
        | _TRUE                                       -> true
        | _FALSE                                      -> false
        | _NULL                                       -> null
        | ID                                          -> prop
        | "(" or_expr ")"

%declare _NOT _AND _OR _BETWEEN _IN _TRUE _FALSE _NULL _IS TEXT_TEST

NOT_EQUAL.2: "<>"
ORDER: />=|<=|>|</

FLOAT.3: /[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/
DECIMAL.2: /0|[1-9][0-9]*[lL]?/
STRING: /'(?:''|[^'])*'/
ID: /[a-zA-Z_$][a-zA-Z0-9_$]*/
%ignore /[ \t\n\r\f]+/
%ignore /--[^\n\r]*(\r\n|\n|\r)/
%ignore /\/\*[^*]*\*+(?:[^\/*][^*]*\*+)*\//
"""

# How an error message names what the parser expected.
_TERMINAL_NAMES: Final = {
    "STRING": "a 'string'",
    "DECIMAL": "an integer",
    "FLOAT": "a number",
    "ID": "a property name",
    "TEXT_TEST": "CONTAINS, STARTSWITH, ENDSWITH",
    "ORDER": "'>', '>=', '<', '<='",
    "NOT_EQUAL": "'<>'",
    "$END": "the end",
}


class SqlFilterError(PocketMQError):
    """A SQL92 selector that does not compile (RocketMQ's MQFilterException); the message
    quotes the expression and names the problem."""

    def __init__(self, expression: str, detail: str) -> None:
        shown = expression if len(expression) <= _SHOWN_CHARS else expression[:_SHOWN_CHARS]
        more = "" if len(expression) <= _SHOWN_CHARS else "..."
        super().__init__(f"Invalid MessageSelector {shown!r}{more}: {detail}")
        self.expression = expression
        self.detail = detail


def _string(token: Token) -> str:
    return str(token)[1:-1].replace("''", "'")


@v_args(inline=True)
class _Build(Transformer[Token, Expr]):
    """Builds the closures bottom-up while lark parses; raises Invalid as RocketMQ's
    factories throw."""

    def or_(self, left: Expr, right: Expr) -> Expr:
        return logic("||", as_boolean(left), as_boolean(right))

    def and_(self, left: Expr, right: Expr) -> Expr:
        return logic("&&", as_boolean(left), as_boolean(right))

    def eq(self, left: Expr, right: Expr) -> Expr:
        return equal_checked(left, right)

    def ne(self, left: Expr, _symbol: Token, right: Expr) -> Expr:
        return negated(equal_checked(left, right))

    def is_null(self, e: Expr) -> Expr:
        return equal(e, literal(None, "NULL", boolean=True))

    def is_not_null(self, e: Expr) -> Expr:
        return negated(self.is_null(e))

    def ordering(self, left: Expr, symbol: Token, right: Expr) -> Expr:
        return ordering(str(symbol), left, right)

    def text_test(self, e: Expr, test: Token, s: Token) -> Expr:
        return text_test(str(test).upper(), e, _string(s), False)

    def not_text_test(self, e: Expr, test: Token, s: Token) -> Expr:
        return text_test(str(test).upper(), e, _string(s), True)

    def between(self, value: Expr, low: Expr, high: Expr) -> Expr:
        return between(value, low, high)

    def not_between(self, value: Expr, low: Expr, high: Expr) -> Expr:
        return logic("||", ordering("<", value, low), ordering(">", value, high))

    def strings(self, *tokens: Token) -> list[str]:
        return [_string(t) for t in tokens]

    def in_(self, e: Expr, values: list[str]) -> Expr:
        return membership(e, values, False)

    def not_in(self, e: Expr, values: list[str]) -> Expr:
        return membership(e, values, True)

    def negate(self, e: Expr) -> Expr:
        return negation(e)

    def not_(self, e: Expr) -> Expr:
        return negated(as_boolean(e))

    def string(self, token: Token) -> Expr:
        return literal(_string(token), str(token))

    def decimal(self, token: Token) -> Expr:
        return decimal(str(token))

    def floating(self, token: Token) -> Expr:
        return floating(str(token))

    def true(self) -> Expr:
        return literal(True, "TRUE", boolean=True)

    def false(self) -> Expr:
        return literal(False, "FALSE", boolean=True)

    def null(self) -> Expr:
        return literal(None, "NULL", boolean=True)

    def prop(self, token: Token) -> Expr:
        return prop(str(token))


_TEXT_TEST_WORDS: Final = frozenset(TEXT_TESTS)


def _keyword(token: Token) -> Token:
    upper = token.value.upper()
    if upper in _TEXT_TEST_WORDS:
        return Token.new_borrow_pos("TEXT_TEST", token.value, token)
    if upper in KEYWORDS:
        return Token.new_borrow_pos("_" + upper, token.value, token)
    return token


@functools.cache
def _parser() -> Lark:
    return Lark(
        _GRAMMAR,
        parser="lalr",
        lexer="basic",
        lexer_callbacks={"ID": _keyword},
        transformer=_Build(),
    )


def _expected(names: set[str] | frozenset[str]) -> str:
    parser = _parser()
    patterns = {t.name: t.pattern.value for t in parser.terminals if t.pattern.type == "str"}

    def shown(name: str) -> str:
        if name.startswith("_") and name[1:] in KEYWORDS:
            return name[1:]
        return _TERMINAL_NAMES.get(name) or repr(patterns.get(name, name))

    return ", ".join(sorted(shown(n) for n in names))


def _syntax_detail(exc: UnexpectedInput) -> str:
    where = f"at line {exc.line}, column {exc.column}"
    if isinstance(exc, UnexpectedCharacters):
        return f"unexpected character {exc.char!r} {where}"
    if isinstance(exc, UnexpectedToken):
        expected = f"; expected {_expected(exc.expected)}" if exc.expected else ""
        if exc.token.type == "$END":
            return f"unexpected end of the expression{expected}"
        return f"unexpected {exc.token.value!r} {where}{expected}"
    return f"syntax error {where}"


class Sql92Expression:
    """A compiled SQL92 selector: evaluate it on a message's properties."""

    __slots__ = ("_evaluate", "text")

    def __init__(self, text: str, evaluate: Evaluate) -> None:
        self.text = text
        self._evaluate = evaluate

    def evaluate(self, properties: Properties) -> bool | None:
        """RocketMQ's ``evaluate``: TRUE, FALSE or null (unknown).

        Raises:
            EvaluationError: the evaluation throws in Java (a value that does not convert).
        """
        result = self._evaluate(properties)
        assert result is None or type(result) is bool
        return result

    def matches(self, properties: Properties) -> bool:
        """Whether a message with these properties is delivered: only a TRUE result is; null
        and a failed evaluation are not (ExpressionMessageFilter.isMatchedByCommitLog)."""
        try:
            return self._evaluate(properties) is True
        except EvaluationError:
            return False

    def __repr__(self) -> str:
        return f"Sql92Expression({self.text!r})"


@functools.lru_cache(maxsize=CACHE_SIZE)
def _compile(expression: str) -> Sql92Expression | SqlFilterError:
    try:
        root = as_boolean(_parser().parse(expression))  # type: ignore[arg-type]
    except UnexpectedInput as exc:
        return SqlFilterError(expression, _syntax_detail(exc))
    except Invalid as exc:
        return SqlFilterError(expression, str(exc))
    return Sql92Expression(expression, root.evaluate)


def compile_sql92(expression: str) -> Sql92Expression:
    """The compiled selector of ``expression``, built once and cached (so are refusals).

    Raises:
        SqlFilterError: a syntax error, or a construct RocketMQ refuses (``a > 'x'``, ``NULL``
            compared with ``=``, BETWEEN bounds out of order, a literal out of range...).
    """
    result = _compile(expression)
    if isinstance(result, SqlFilterError):
        raise SqlFilterError(result.expression, result.detail)
    return result
