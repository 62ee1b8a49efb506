"""Java's values as RocketMQ's SQL92 selector sees them, and how it compares them. No I/O here.

RocketMQ evaluates a selector on Java objects: property values are ``String``; literals are
``Integer`` (a decimal that fits 32 bits), ``Long`` (a larger one), ``Double`` (a floating
literal), ``String`` or ``Boolean``; ``null`` is unknown. Here they are ``str``, :class:`JInt`,
:class:`JLong`, ``float``, ``bool`` and ``None``: the two integer classes are kept apart
because Java converts a string differently for each (``Integer.valueOf`` refuses
``"3000000000"``, ``Long.valueOf`` takes it).

``compare`` is ComparisonExpression's ``__compare`` with string conversion on (as every
expression SelectorParser builds has it): values of two classes are converted to one, a string
is parsed as the number class it meets (``"5"`` against ``5``), and a comparison Java could not
make (an unparseable number, a Boolean against a String) raises :class:`EvaluationError`, which
makes the message not match, as RocketMQ's ExpressionMessageFilter does when evaluation throws.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Final

# Java's Integer and Long ranges.
INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1
# Double.MAX_VALUE and Double.MIN_VALUE (the smallest positive double), as Java prints them.
DOUBLE_MAX_TEXT: Final = "1.7976931348623157E308"
DOUBLE_MIN_TEXT: Final = "4.9E-324"


class EvaluationError(Exception):
    """Evaluating a selector on a message threw in Java: the message does not match."""


class JInt(int):
    """A ``java.lang.Integer``."""

    __slots__ = ()


class JLong(int):
    """A ``java.lang.Long``."""

    __slots__ = ()


# What a selector value can be at run time.
JavaValue = str | bool | JInt | JLong | float | None
NUMBER_TYPES: Final = (JInt, JLong, float)

# Integer.parseInt / Long.parseLong: an optional sign and decimal digits (Character.digit
# accepts any Unicode decimal digit, as \d does); no spaces, no underscores.
_JAVA_INTEGER = re.compile(r"[+-]?\d+")
# Double.valueOf (FloatingDecimal.readJavaFormatString), after trimming chars <= ' '.
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity"
    r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?"
    r"|0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+[fFdD]?)"
)
_JAVA_SPACE: Final = "".join(chr(c) for c in range(33))


def _parse_integer(text: str, lo: int, hi: int, what: str) -> int:
    if len(text) < 10 and text.isascii() and text.isdigit():
        return int(text)  # the usual case, in range of both: nothing more to check
    if not _JAVA_INTEGER.fullmatch(text):
        raise EvaluationError(f"NumberFormatException: {text!r} is not {what}")
    digits = text.lstrip("+-").lstrip("0")
    try:
        # A Java long has at most 19 digits; checking first keeps int() from huge inputs.
        value = int(text) if len(digits) <= 20 else hi + 1
    except ValueError as exc:  # Python's limit on digits: Java would overflow anyway
        raise EvaluationError(f"NumberFormatException: {text!r} is out of range") from exc
    if not lo <= value <= hi:
        raise EvaluationError(f"NumberFormatException: {text!r} is out of {what}'s range")
    return value


def int_value(text: str) -> int:
    """``Integer.valueOf(text)`` as a plain int, for comparisons that need no class.

    Raises:
        EvaluationError: not a decimal integer in Java's int range.
    """
    return _parse_integer(text, INT_MIN, INT_MAX, "an int")


def long_value(text: str) -> int:
    """``Long.valueOf(text)`` as a plain int (see ``int_value``).

    Raises:
        EvaluationError: not a decimal integer in Java's long range.
    """
    return _parse_integer(text, LONG_MIN, LONG_MAX, "a long")


def parse_int(text: str) -> JInt:
    """``Integer.valueOf(text)``.

    Raises:
        EvaluationError: not a decimal integer in Java's int range.
    """
    return JInt(int_value(text))


def parse_long(text: str) -> JLong:
    """``Long.valueOf(text)``.

    Raises:
        EvaluationError: not a decimal integer in Java's long range.
    """
    return JLong(long_value(text))


def parse_double(text: str) -> float:
    """``Double.valueOf(text)``: Java's syntax (``NaN``, ``Infinity``, hex, a type suffix),
    not Python's (no ``inf``, no underscores).

    Raises:
        EvaluationError: not a Java floating-point number.
    """
    trimmed = text.strip(_JAVA_SPACE)
    if not _JAVA_DOUBLE.fullmatch(trimmed):
        raise EvaluationError(f"NumberFormatException: {text!r} is not a double")
    if trimmed[-1] in "fFdD":  # a type suffix; a hex float ends in its decimal exponent
        trimmed = trimmed[:-1]
    if "x" in trimmed or "X" in trimmed:
        return float.fromhex(trimmed)
    return float(trimmed)


def parse_boolean(text: str) -> bool:
    """``Boolean.valueOf(text)``: true for "true" in any case, false for anything else."""
    return len(text) == 4 and text.lower() == "true"


def compare_doubles(a: float, b: float) -> int:
    """``Double.compare``: NaN above everything and equal to itself, -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = math.isnan(a), math.isnan(b)
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    if a == 0.0 and b == 0.0:
        return int(math.copysign(1, a) > 0) - int(math.copysign(1, b) > 0)
    return 0


def _compare_strings(a: str, b: str) -> int:
    """``String.compareTo``: by UTF-16 code units, not code points."""
    ua = a.encode("utf-16-be", "surrogatepass")
    ub = b.encode("utf-16-be", "surrogatepass")
    return (ua > ub) - (ua < ub)


def _converted(lv: object, rv: object) -> tuple[object, object] | None:
    """Both values converted to one class, as ``__compare`` converts them; None when Java
    answers -1 without comparing (classes it does not convert between)."""
    lt, rt = type(lv), type(rv)
    if lt is bool:
        if rt is str:
            # Java casts the Boolean to String here: a ClassCastException.
            raise EvaluationError("ClassCastException: a Boolean compared with a String")
        return None
    if lt is str:
        assert isinstance(lv, str)
        if rt is bool:
            return parse_boolean(lv), rv
        if rt is JInt:
            return parse_int(lv), rv
        if rt is JLong:
            return parse_long(lv), rv
        if rt is float:
            return parse_double(lv), rv
        return None
    if rt is str:
        assert isinstance(rv, str)
        if lt is JInt:
            return lv, parse_int(rv)
        if lt is JLong:
            return lv, parse_long(rv)
        return lv, parse_double(rv)  # lt is float
    if rt is bool:
        return None
    if lt is float or rt is float:
        return float(lv), float(rv)  # type: ignore[arg-type]
    return lv, rv  # Integer against Long: both widened to long


def compare(lv: object, rv: object) -> int:
    """ComparisonExpression.__compare(lv, rv, true) on two non-null values: <0, 0 or >0.

    Raises:
        EvaluationError: a conversion Java could not make.
    """
    if type(lv) is not type(rv):
        pair = _converted(lv, rv)
        if pair is None:
            return -1
        lv, rv = pair
    if type(lv) is float:
        return compare_doubles(lv, rv)  # type: ignore[arg-type]
    if type(lv) is str:
        return _compare_strings(lv, rv)  # type: ignore[arg-type]
    return int(lv > rv) - int(lv < rv)  # type: ignore[operator]


def negate(value: JavaValue) -> JavaValue:
    """UnaryExpression.createNegate: a number negated in its own class (ints wrap around as
    in Java); anything else is null."""
    if type(value) is JInt:
        return JInt((-value - INT_MIN) % 2**32 + INT_MIN)
    if type(value) is JLong:
        return JLong((-value - LONG_MIN) % 2**64 + LONG_MIN)
    if type(value) is float:
        return -value
    return None


def double_to_string(d: float) -> str:
    """``Double.toString``: plain between 1e-3 and 1e7, else ``1.0E10`` notation."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0.0:
        return "-0.0" if math.copysign(1, d) < 0 else "0.0"
    if 1e-3 <= abs(d) < 1e7:
        text = repr(d)
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(d)).as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digits)).rstrip("0") or "0"
    power = exponent + len(digits) - 1
    fraction = mantissa[1:] or "0"
    return f"{'-' if sign else ''}{mantissa[0]}.{fraction}E{power}"


def to_string(value: JavaValue) -> str:
    """``String.valueOf(value)``, as RocketMQ's messages print a value."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float:
        return double_to_string(value)
    return str(value)
