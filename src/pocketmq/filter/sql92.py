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
import operator
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from pocketmq.errors import PocketMQError
from pocketmq.filter.java import (
    DOUBLE_MAX_TEXT,
    DOUBLE_MIN_TEXT,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    NUMBER_TYPES,
    EvaluationError,
    JavaValue,
    JInt,
    JLong,
    compare,
    compare_doubles,
    int_value,
    long_value,
    negate,
    parse_boolean,
    parse_double,
    parse_int,
    parse_long,
    to_string,
)


class Properties(Protocol):
    """What a selector reads a message's properties from: a dict, or the store's view of a
    record that decodes only the names asked for."""

    def get(self, name: str, /) -> str | None: ...


Evaluate = Callable[[Properties], JavaValue]

# Deeper nesting is refused (see the module docstring); real selectors nest a few levels.
MAX_DEPTH: Final = 100
# Compiled expressions kept (RocketMQ's SelectorParser keeps 100); failures are kept too.
CACHE_SIZE: Final = 1024
# How much of a refused expression an error message quotes.
_SHOWN_CHARS: Final = 200
_DOUBLE_MIN: Final = 5e-324  # Double.MIN_VALUE, the smallest positive double

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


class _Invalid(Exception):
    """What one of RocketMQ's expression factories refuses; its message is RocketMQ's."""


class _Expr:
    """An expression being compiled: its closure and what RocketMQ's factories check."""

    __slots__ = ("boolean", "depth", "describe", "evaluate", "literal", "logic", "parts",
                 "prop", "static", "value")  # fmt: skip

    def __init__(
        self,
        describe: Callable[[], str],
        evaluate: Evaluate,
        children: Sequence[_Expr] = (),
        *,
        boolean: bool = False,
        literal: bool = False,
        prop: str | None = None,
        static: bool = False,
        value: JavaValue = None,
        logic: str = "",
        parts: tuple[_Expr, ...] = (),
    ) -> None:
        self.describe = describe  # Java's toString, built only for error messages
        self.evaluate = evaluate
        self.depth: int = 1 + max((c.depth for c in children), default=0)
        if self.depth > MAX_DEPTH:
            raise _Invalid(f"the expression is nested more than {MAX_DEPTH} levels deep")
        self.boolean = boolean  # a BooleanExpression
        self.literal = literal  # a ConstantExpression
        self.prop = prop  # a PropertyExpression's name
        self.static = static  # evaluate() ignores the message and returns value
        self.value = value
        self.logic = logic  # "&&" or "||" for a flattened AND / OR chain
        self.parts = parts


def _fixed(value: JavaValue) -> Evaluate:
    return lambda _props: value


def _literal(value: JavaValue, text: str, *, boolean: bool = False) -> _Expr:
    return _Expr(lambda: text, _fixed(value), boolean=boolean, literal=True, static=True,
                 value=value)  # fmt: skip


def _property(name: str) -> _Expr:
    def evaluate(props: Properties) -> JavaValue:
        return props.get(name)

    return _Expr(lambda: name, evaluate, prop=name)


def _as_boolean(e: _Expr) -> _Expr:
    """SelectorParser.asBooleanExpression: a property becomes a Boolean cast."""
    if e.boolean:
        return e
    name = e.prop
    if name is None:
        raise _Invalid(f"Expression will not result in a boolean value: {e.describe()}")

    def evaluate(props: Properties) -> JavaValue:
        return None if props.get(name) is None else False  # a String is not a Boolean

    return _Expr(e.describe, evaluate, (e,), boolean=True)


def _not(e: _Expr) -> _Expr:
    inner = e.evaluate

    def evaluate(props: Properties) -> JavaValue:
        v = inner(props)
        return None if v is None else not v

    return _Expr(lambda: f"(NOT {e.describe()})", evaluate, (e,), boolean=True)


def _logic(symbol: str, left: _Expr, right: _Expr) -> _Expr:
    """LogicExpression.createAND (``&&``) or createOR (``||``) on Boolean operands; a chain
    of one operator is one node, evaluated left to right exactly as the nested one."""
    parts = (*left.parts, right) if left.logic == symbol else (left, right)
    evals = tuple(p.evaluate for p in parts)
    decisive = symbol == "||"  # the value that ends the chain: TRUE for OR, FALSE for AND

    def evaluate(props: Properties) -> JavaValue:
        unknown = False
        for ev in evals:
            v = ev(props)
            if v is None:
                unknown = True
            elif v is decisive:
                return decisive
        return None if unknown else not decisive

    def describe() -> str:
        tail = "".join(f" {symbol} {p.describe()})" for p in parts[1:])
        return "(" * (len(parts) - 1) + parts[0].describe() + tail

    return _Expr(describe, evaluate, parts, boolean=True, logic=symbol, parts=parts)


# ------------------------------------------------------------------ comparisons


def _check_ordered(e: _Expr) -> None:
    """ComparisonExpression.checkLessThanOperand."""
    if (e.literal and type(e.value) not in NUMBER_TYPES) or (e.boolean and not e.literal):
        raise _Invalid(f"Value '{e.describe()}' cannot be compared.")


def _parser_of_number(value: JavaValue) -> Callable[[str], JavaValue]:
    """How a String is converted when it meets ``value`` (__compare)."""
    if type(value) is JInt:
        return parse_int
    if type(value) is JLong:
        return parse_long
    return parse_double


_ORDER_TESTS: Final[dict[str, Callable[[int, int], bool]]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
}  # fmt: skip


def _ordering(symbol: str, left: _Expr, right: _Expr) -> _Expr:
    """createGreaterThan and its siblings: checked operands; a String against a String is
    compared as two doubles."""
    _check_ordered(left)
    _check_ordered(right)
    test = _ORDER_TESTS[symbol]
    lf, rf = left.evaluate, right.evaluate
    evaluate: Evaluate
    prop, constant, flipped = (left.prop, right, False) if left.prop else (right.prop, left, True)
    if prop is not None and constant.static and type(constant.value) in NUMBER_TYPES:
        # The usual shape, ``a > 5``: parse the property as the literal's class.
        c = constant.value
        parse: Callable[[str], object] = (
            int_value if type(c) is JInt else long_value if type(c) is JLong else parse_double
        )
        name = prop
        if type(c) is float:
            sign = -1 if flipped else 1

            def evaluate(props: Properties) -> JavaValue:
                v = props.get(name)
                if v is None:
                    return None
                return test(sign * compare_doubles(parse(v), c), 0)  # type: ignore[arg-type]

        else:
            n = int(c)  # type: ignore[arg-type]

            def evaluate(props: Properties) -> JavaValue:
                v = props.get(name)
                if v is None:
                    return None
                return test(n, parse(v)) if flipped else test(parse(v), n)  # type: ignore

    else:

        def evaluate(props: Properties) -> JavaValue:
            lv = lf(props)
            if lv is None:
                return None
            rv = rf(props)
            if rv is None:
                return None
            if type(lv) is str and type(rv) is str:
                return test(compare_doubles(parse_double(lv), parse_double(rv)), 0)
            return test(compare(lv, rv), 0)

    return _Expr(lambda: f"({left.describe()} {symbol} {right.describe()})", evaluate,
                 (left, right), boolean=True)  # fmt: skip


def _equal(left: _Expr, right: _Expr) -> _Expr:
    """ComparisonExpression.doCreateEqual, unchecked (IS NULL uses it on NULL)."""
    lf, rf = left.evaluate, right.evaluate
    evaluate: Evaluate
    name, c = left.prop, right.value
    if right.static and c is None:
        # IS NULL: a null value equals NULL; anything else does not.
        def evaluate(props: Properties) -> JavaValue:
            return lf(props) is None

    elif name is not None and right.static and type(c) is not float:
        # ``a = 'x'``, ``a = 5``, ``a = TRUE``: the String converted to the literal's class.
        convert: Callable[[str], object] = (
            str if type(c) is str else parse_boolean if type(c) is bool else _parser_of_number(c)
        )

        def evaluate(props: Properties) -> JavaValue:
            v = props.get(name)
            return None if v is None else convert(v) == c

    else:

        def evaluate(props: Properties) -> JavaValue:
            lv, rv = lf(props), rf(props)
            if lv is None or rv is None:
                if lv is None and rv is None:
                    return True
                return None if lv is None else False
            # Java's equals; a Double equals by its bits, which compare() gets right.
            if type(lv) is type(rv) and type(lv) is not float and lv == rv:
                return True
            return compare(lv, rv) == 0

    return _Expr(lambda: f"({left.describe()} == {right.describe()})", evaluate,
                 (left, right), boolean=True)  # fmt: skip


def _equal_checked(left: _Expr, right: _Expr) -> _Expr:
    """ComparisonExpression.createEqual: NULL cannot be compared, nor TRUE with a non-boolean
    literal."""
    for e in (left, right):
        if e.literal and e.value is None:
            raise _Invalid(f"'{e.describe()}' cannot be compared.")
    if left.literal and right.literal and left.boolean and not right.boolean:
        raise _Invalid(f"'{left.describe()}' cannot be compared with '{right.describe()}'")
    return _equal(left, right)


def _between(value: _Expr, low: _Expr, high: _Expr) -> _Expr:
    """createBetween: literal bounds must be non-null and in order."""
    if low.literal and high.literal:
        lv, hv = low.value, high.value
        if lv is None or hv is None:
            raise _Invalid("Illegal values of between, values can not be null!")
        try:
            in_order = compare(hv, lv) >= 0
        except EvaluationError as exc:
            raise _Invalid(str(exc)) from exc
        if not in_order:
            raise _Invalid(
                f"Illegal values of between, left value({to_string(lv)}) must less than or "
                f"equal to right value({to_string(hv)})"
            )
    return _logic("&&", _ordering(">=", value, low), _ordering("<=", value, high))


def _in(left: _Expr, values: list[str], negated: bool) -> _Expr:
    name = left.prop
    if name is None:
        raise _Invalid(f"Expected a property for In expression, got: {left.describe()}")
    members = frozenset(values)

    def evaluate(props: Properties) -> JavaValue:
        v = props.get(name)
        return None if v is None else (v in members) != negated

    symbol = "NOT IN" if negated else "IN"
    return _Expr(lambda: f"{name} {symbol} ( {', '.join(values)} )", evaluate, (left,),
                 boolean=True)  # fmt: skip


_TEXT_TESTS: Final[dict[str, Callable[[str, str], bool]]] = {
    "CONTAINS": operator.contains, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith,
}  # fmt: skip


def _text_test(symbol: str, left: _Expr, search: str, negated: bool) -> _Expr:
    """CONTAINS / STARTSWITH / ENDSWITH and their NOT forms: FALSE for anything but a String
    (a missing property included) and for an empty search string."""
    test = _TEXT_TESTS[symbol]
    lf = left.evaluate

    def evaluate(props: Properties) -> JavaValue:
        if not search:
            return False
        v = lf(props)
        return type(v) is str and test(v, search) != negated

    shown = f"NOT {symbol}" if negated else symbol
    return _Expr(lambda: f"({shown} {left.describe()})", evaluate, (left,), boolean=True)


def _negate(e: _Expr) -> _Expr:
    """UnaryExpression.createNegate: a number negated; anything else null. Not a literal."""
    if e.static or e.prop is not None:
        # Folded: a property's value is a String, never a Number.
        value = negate(e.value) if e.static else None
        return _Expr(lambda: f"(- {e.describe()})", _fixed(value), (e,), static=True,
                     value=value)  # fmt: skip
    inner = e.evaluate

    def evaluate(props: Properties) -> JavaValue:
        inner(props)  # it may throw, as in Java; a Boolean or null negates to null
        return None

    return _Expr(lambda: f"(- {e.describe()})", evaluate, (e,))


# ------------------------------------------------------------------ literals


def _decimal(text: str) -> _Expr:
    """ConstantExpression.createFromDecimal: an Integer when it fits, else a Long."""
    digits = text.rstrip("lL")
    if len(digits) > 19 or int(digits) > LONG_MAX:
        raise _Invalid(f'NumberFormatException: For input string: "{digits}" (beyond a long)')
    n = int(digits)
    value: JavaValue = JInt(n) if INT_MIN <= n <= INT_MAX else JLong(n)
    return _literal(value, digits)


def _floating(text: str) -> _Expr:
    """ConstantExpression.createFloat: a Double from Double.MIN_VALUE to Double.MAX_VALUE."""
    value = float(text)
    if value > 1.7976931348623157e308:
        raise _Invalid(f"{text} is greater than {DOUBLE_MAX_TEXT}")
    if value < _DOUBLE_MIN:
        raise _Invalid(f"{text} is less than {DOUBLE_MIN_TEXT}")
    return _literal(value, to_string(value))


def _string(token: Token) -> str:
    return str(token)[1:-1].replace("''", "'")


@v_args(inline=True)
class _Build(Transformer[Token, _Expr]):
    """Builds the closures bottom-up while lark parses; raises _Invalid as RocketMQ's
    factories throw."""

    def or_(self, left: _Expr, right: _Expr) -> _Expr:
        return _logic("||", _as_boolean(left), _as_boolean(right))

    def and_(self, left: _Expr, right: _Expr) -> _Expr:
        return _logic("&&", _as_boolean(left), _as_boolean(right))

    def eq(self, left: _Expr, right: _Expr) -> _Expr:
        return _equal_checked(left, right)

    def ne(self, left: _Expr, _symbol: Token, right: _Expr) -> _Expr:
        return _not(_equal_checked(left, right))

    def is_null(self, e: _Expr) -> _Expr:
        return _equal(e, _literal(None, "NULL", boolean=True))

    def is_not_null(self, e: _Expr) -> _Expr:
        return _not(self.is_null(e))

    def ordering(self, left: _Expr, symbol: Token, right: _Expr) -> _Expr:
        return _ordering(str(symbol), left, right)

    def text_test(self, e: _Expr, test: Token, s: Token) -> _Expr:
        return _text_test(str(test).upper(), e, _string(s), False)

    def not_text_test(self, e: _Expr, test: Token, s: Token) -> _Expr:
        return _text_test(str(test).upper(), e, _string(s), True)

    def between(self, value: _Expr, low: _Expr, high: _Expr) -> _Expr:
        return _between(value, low, high)

    def not_between(self, value: _Expr, low: _Expr, high: _Expr) -> _Expr:
        return _logic("||", _ordering("<", value, low), _ordering(">", value, high))

    def strings(self, *tokens: Token) -> list[str]:
        return [_string(t) for t in tokens]

    def in_(self, e: _Expr, values: list[str]) -> _Expr:
        return _in(e, values, False)

    def not_in(self, e: _Expr, values: list[str]) -> _Expr:
        return _in(e, values, True)

    def negate(self, e: _Expr) -> _Expr:
        return _negate(e)

    def not_(self, e: _Expr) -> _Expr:
        return _not(_as_boolean(e))

    def string(self, token: Token) -> _Expr:
        return _literal(_string(token), str(token))

    def decimal(self, token: Token) -> _Expr:
        return _decimal(str(token))

    def floating(self, token: Token) -> _Expr:
        return _floating(str(token))

    def true(self) -> _Expr:
        return _literal(True, "TRUE", boolean=True)

    def false(self) -> _Expr:
        return _literal(False, "FALSE", boolean=True)

    def null(self) -> _Expr:
        return _literal(None, "NULL", boolean=True)

    def prop(self, token: Token) -> _Expr:
        return _property(str(token))


_TEXT_TEST_WORDS: Final = frozenset(_TEXT_TESTS)


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
        root = _as_boolean(_parser().parse(expression))  # type: ignore[arg-type]
    except UnexpectedInput as exc:
        return SqlFilterError(expression, _syntax_detail(exc))
    except _Invalid as exc:
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
