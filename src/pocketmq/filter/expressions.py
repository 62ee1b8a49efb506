"""The expressions of RocketMQ's SQL92 selector as closures, built bottom-up by
``sql92``'s parser: each factory is one of RocketMQ's (ComparisonExpression.createEqual,
LogicExpression.createAND, UnaryExpression.createNOT, ConstantExpression.createFromDecimal...),
with its checks and messages, and returns a node whose ``evaluate`` follows that class's
``evaluate`` on a message's properties. No I/O here.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Final, Protocol

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

# Deeper nesting is refused (see sql92's docstring); real selectors nest a few levels.
MAX_DEPTH: Final = 100
_DOUBLE_MIN: Final = 5e-324  # Double.MIN_VALUE, the smallest positive double


class Invalid(Exception):
    """What one of RocketMQ's expression factories refuses; its message is RocketMQ's."""


class Expr:
    """An expression being compiled: its closure and what RocketMQ's factories check."""

    __slots__ = ("boolean", "depth", "describe", "evaluate", "literal", "logic", "parts",
                 "prop", "static", "value")  # fmt: skip

    def __init__(
        self,
        describe: Callable[[], str],
        evaluate: Evaluate,
        children: Sequence[Expr] = (),
        *,
        boolean: bool = False,
        literal: bool = False,
        prop: str | None = None,
        static: bool = False,
        value: JavaValue = None,
        logic: str = "",
        parts: tuple[Expr, ...] = (),
    ) -> None:
        self.describe = describe  # Java's toString, built only for error messages
        self.evaluate = evaluate
        self.depth: int = 1 + max((c.depth for c in children), default=0)
        if self.depth > MAX_DEPTH:
            raise Invalid(f"the expression is nested more than {MAX_DEPTH} levels deep")
        self.boolean = boolean  # a BooleanExpression
        self.literal = literal  # a ConstantExpression
        self.prop = prop  # a PropertyExpression's name
        self.static = static  # evaluate() ignores the message and returns value
        self.value = value
        self.logic = logic  # "&&" or "||" for a flattened AND / OR chain
        self.parts = parts


def _fixed(value: JavaValue) -> Evaluate:
    return lambda _props: value


def literal(value: JavaValue, text: str, *, boolean: bool = False) -> Expr:
    return Expr(lambda: text, _fixed(value), boolean=boolean, literal=True, static=True,
                 value=value)  # fmt: skip


def prop(name: str) -> Expr:
    def evaluate(props: Properties) -> JavaValue:
        return props.get(name)

    return Expr(lambda: name, evaluate, prop=name)


def as_boolean(e: Expr) -> Expr:
    """SelectorParser.asBooleanExpression: a property becomes a Boolean cast."""
    if e.boolean:
        return e
    name = e.prop
    if name is None:
        raise Invalid(f"Expression will not result in a boolean value: {e.describe()}")

    def evaluate(props: Properties) -> JavaValue:
        return None if props.get(name) is None else False  # a String is not a Boolean

    return Expr(e.describe, evaluate, (e,), boolean=True)


def negated(e: Expr) -> Expr:
    inner = e.evaluate

    def evaluate(props: Properties) -> JavaValue:
        v = inner(props)
        return None if v is None else not v

    return Expr(lambda: f"(NOT {e.describe()})", evaluate, (e,), boolean=True)


def logic(symbol: str, left: Expr, right: Expr) -> Expr:
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

    return Expr(describe, evaluate, parts, boolean=True, logic=symbol, parts=parts)


# ------------------------------------------------------------------ comparisons


def _check_ordered(e: Expr) -> None:
    """ComparisonExpression.checkLessThanOperand."""
    if (e.literal and type(e.value) not in NUMBER_TYPES) or (e.boolean and not e.literal):
        raise Invalid(f"Value '{e.describe()}' cannot be compared.")


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


def ordering(symbol: str, left: Expr, right: Expr) -> Expr:
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

    return Expr(lambda: f"({left.describe()} {symbol} {right.describe()})", evaluate,
                 (left, right), boolean=True)  # fmt: skip


def equal(left: Expr, right: Expr) -> Expr:
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

    return Expr(lambda: f"({left.describe()} == {right.describe()})", evaluate,
                 (left, right), boolean=True)  # fmt: skip


def equal_checked(left: Expr, right: Expr) -> Expr:
    """ComparisonExpression.createEqual: NULL cannot be compared, nor TRUE with a non-boolean
    literal."""
    for e in (left, right):
        if e.literal and e.value is None:
            raise Invalid(f"'{e.describe()}' cannot be compared.")
    if left.literal and right.literal and left.boolean and not right.boolean:
        raise Invalid(f"'{left.describe()}' cannot be compared with '{right.describe()}'")
    return equal(left, right)


def between(value: Expr, low: Expr, high: Expr) -> Expr:
    """createBetween: literal bounds must be non-null and in order."""
    if low.literal and high.literal:
        lv, hv = low.value, high.value
        if lv is None or hv is None:
            raise Invalid("Illegal values of between, values can not be null!")
        try:
            in_order = compare(hv, lv) >= 0
        except EvaluationError as exc:
            raise Invalid(str(exc)) from exc
        if not in_order:
            raise Invalid(
                f"Illegal values of between, left value({to_string(lv)}) must less than or "
                f"equal to right value({to_string(hv)})"
            )
    return logic("&&", ordering(">=", value, low), ordering("<=", value, high))


def membership(left: Expr, values: list[str], negated: bool) -> Expr:
    name = left.prop
    if name is None:
        raise Invalid(f"Expected a property for In expression, got: {left.describe()}")
    members = frozenset(values)

    def evaluate(props: Properties) -> JavaValue:
        v = props.get(name)
        return None if v is None else (v in members) != negated

    symbol = "NOT IN" if negated else "IN"
    return Expr(lambda: f"{name} {symbol} ( {', '.join(values)} )", evaluate, (left,),
                 boolean=True)  # fmt: skip


TEXT_TESTS: Final[dict[str, Callable[[str, str], bool]]] = {
    "CONTAINS": operator.contains, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith,
}  # fmt: skip


def text_test(symbol: str, left: Expr, search: str, negated: bool) -> Expr:
    """CONTAINS / STARTSWITH / ENDSWITH and their NOT forms: FALSE for anything but a String
    (a missing property included) and for an empty search string."""
    test = TEXT_TESTS[symbol]
    lf = left.evaluate

    def evaluate(props: Properties) -> JavaValue:
        if not search:
            return False
        v = lf(props)
        return type(v) is str and test(v, search) != negated

    shown = f"NOT {symbol}" if negated else symbol
    return Expr(lambda: f"({shown} {left.describe()})", evaluate, (left,), boolean=True)


def negation(e: Expr) -> Expr:
    """UnaryExpression.createNegate: a number negated; anything else null. Not a literal."""
    if e.static or e.prop is not None:
        # Folded: a property's value is a String, never a Number.
        value = negate(e.value) if e.static else None
        return Expr(lambda: f"(- {e.describe()})", _fixed(value), (e,), static=True,
                     value=value)  # fmt: skip
    inner = e.evaluate

    def evaluate(props: Properties) -> JavaValue:
        inner(props)  # it may throw, as in Java; a Boolean or null negates to null
        return None

    return Expr(lambda: f"(- {e.describe()})", evaluate, (e,))


# ------------------------------------------------------------------ literals


def decimal(text: str) -> Expr:
    """ConstantExpression.createFromDecimal: an Integer when it fits, else a Long."""
    digits = text.rstrip("lL")
    if len(digits) > 19 or int(digits) > LONG_MAX:
        raise Invalid(f'NumberFormatException: For input string: "{digits}" (beyond a long)')
    n = int(digits)
    value: JavaValue = JInt(n) if INT_MIN <= n <= INT_MAX else JLong(n)
    return literal(value, digits)


def floating(text: str) -> Expr:
    """ConstantExpression.createFloat: a Double from Double.MIN_VALUE to Double.MAX_VALUE."""
    value = float(text)
    if value > 1.7976931348623157e308:
        raise Invalid(f"{text} is greater than {DOUBLE_MAX_TEXT}")
    if value < _DOUBLE_MIN:
        raise Invalid(f"{text} is less than {DOUBLE_MIN_TEXT}")
    return literal(value, to_string(value))
