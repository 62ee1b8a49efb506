"""RocketMQ's SQL92 selector, table-driven against the semantics of its filter module
(SelectorParser.jj, ComparisonExpression, LogicExpression, UnaryExpression,
ConstantExpression): what each expression evaluates to on a message's properties (TRUE, FALSE,
null, or a Java exception, which makes the message not match), and what RocketMQ refuses to
compile, with its messages. Cases marked "RocketMQ:" restate a rule of its Java code."""

from __future__ import annotations

import pytest

from pocketmq.filter import EvaluationError, SqlFilterError, compile_sql92
from pocketmq.filter.expressions import MAX_DEPTH
from pocketmq.filter.java import (
    JInt,
    JLong,
    compare,
    double_to_string,
    negate,
    parse_double,
    parse_int,
)

RAISES = "raises"  # the evaluation throws in Java: the message does not match

# (expression, properties, RocketMQ's result)
CASES: list[tuple[str, dict[str, str], bool | str | None]] = [
    # --- numbers: a property meets a literal as the literal's class
    ("a > 5", {"a": "6"}, True),
    ("a > 5", {"a": "5"}, False),
    ("a >= 5", {"a": "5"}, True),
    ("a < 5", {"a": "-7"}, True),
    ("a <= 5", {"a": "+5"}, True),  # Integer.valueOf takes a plus sign
    ("a = 5", {"a": "5"}, True),
    ("a = 5", {"a": "05"}, True),
    ("a <> 5", {"a": "6"}, True),
    ("5 < a", {"a": "6"}, True),  # a literal on the left converts the property the same way
    ("a > 5", {"a": " 6"}, RAISES),  # no spaces in Integer.valueOf
    ("a > 5", {"a": "6.0"}, RAISES),  # an Integer literal parses the property as an Integer
    ("a > 5", {"a": "x"}, RAISES),
    ("a > 5", {"a": "3000000000"}, RAISES),  # past Java's int
    ("a > 5L", {"a": "3000000000"}, RAISES),  # "5L" is still an Integer: it fits 32 bits
    ("a > 3000000000", {"a": "3000000001"}, True),  # a Long literal parses a Long
    ("a > 3000000000", {"a": "1e10"}, RAISES),
    ("a > 5.5", {"a": "6"}, True),  # a Double literal parses a double
    ("a > 5.5", {"a": "1e10"}, True),
    ("a > 5.5", {"a": " 6 "}, True),  # Double.valueOf trims
    ("a > 5.5", {"a": "6d"}, True),  # and takes a type suffix
    ("a > 5.5", {"a": "0x1.8p3"}, True),  # and hex
    ("a > 5.5", {"a": "NaN"}, True),  # Double.compare puts NaN above everything
    ("a > 5.5", {"a": "Infinity"}, True),
    ("a > 5.5", {"a": "inf"}, RAISES),  # Python's spelling is not Java's
    ("a > 5.5", {"a": "1_000"}, RAISES),
    ("a = 1.0", {"a": "1"}, True),
    ("a = 5", {"a": "5.0"}, RAISES),
    ("a > .5", {"a": "0.75"}, True),
    ("a > 5.", {"a": "6"}, True),
    ("a > 1E3", {"a": "1001"}, True),
    ("a > 1e3", {"a": "999"}, False),
    ("a > -5", {"a": "-4"}, True),
    ("a > - -5", {"a": "6"}, True),
    ("a > +5", {"a": "6"}, True),
    ("a > -2147483648", {"a": "-2147483648"}, False),  # a Long literal, negated
    # --- two properties: > and friends parse both as doubles; = compares the strings
    ("a > b", {"a": "2.5", "b": "1e0"}, True),
    ("a > b", {"a": "x", "b": "1"}, RAISES),
    ("a = b", {"a": "1", "b": "1.0"}, False),
    ("a = b", {"a": "x", "b": "x"}, True),
    ("a = b", {}, True),  # RocketMQ: both null, and null == null
    ("a = b", {"a": "x"}, False),
    ("a = b", {"b": "x"}, None),
    # --- strings
    ("a = 'x'", {"a": "x"}, True),
    ("a = 'x'", {"a": "X"}, False),
    ("a <> 'x'", {"a": "y"}, True),
    ("a = 'it''s'", {"a": "it's"}, True),
    ("TAGS = '''''tag'''''", {"TAGS": "''tag''"}, True),  # from RocketMQ's ExpressionTest
    ("a = ''", {"a": ""}, True),
    ("'x' = a", {}, False),  # RocketMQ: a null right side with a non-null left is FALSE
    ("a = 'x'", {}, None),  # ... and a null left side is null
    ("a = 'x'", {"a": "5"}, False),
    ("a = 'é'", {"a": "é"}, True),
    # --- booleans: TRUE/FALSE against a property parse it with Boolean.valueOf
    ("a = TRUE", {"a": "true"}, True),
    ("a = TRUE", {"a": "TRUE"}, True),
    ("a = TRUE", {"a": "yes"}, False),
    ("a = FALSE", {"a": "anything"}, True),
    ("TRUE", {}, True),
    ("FALSE", {}, False),
    ("NULL", {}, None),
    ("(a > 1) = TRUE", {"a": "2"}, True),
    ("(a > 1) = 5", {"a": "2"}, False),  # RocketMQ: a Boolean against an Integer is -1
    ("(a > 1) = a", {"a": "2"}, RAISES),  # RocketMQ: a Boolean cast to String
    ("a", {"a": "true"}, False),  # a property as a condition: a String is never TRUE
    ("a", {}, None),
    ("NOT a", {"a": "x"}, True),
    ("a AND b > 1", {"a": "x", "b": "2"}, False),
    # --- BETWEEN: both bounds inclusive
    ("a BETWEEN 1 AND 3", {"a": "1"}, True),
    ("a BETWEEN 1 AND 3", {"a": "3"}, True),
    ("a BETWEEN 1 AND 3", {"a": "4"}, False),
    ("a BETWEEN 1 AND 3", {"a": "0"}, False),
    ("a BETWEEN 1 AND 3", {}, None),
    ("a BETWEEN 1.5 AND 2", {"a": "2"}, True),
    ("a BETWEEN 2 AND 2", {"a": "2"}, True),
    ("a NOT BETWEEN 1 AND 3", {"a": "3"}, False),
    ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
    ("a NOT BETWEEN 1 AND 3", {"a": "0"}, True),
    ("a NOT BETWEEN 1 AND 3", {}, None),
    ("a BETWEEN -3 AND -1", {"a": "-2"}, True),
    ("a BETWEEN -1 AND -3", {"a": "-2"}, False),  # negated bounds are not literals: unchecked
    ("a BETWEEN 1 AND 3 AND b = 'x'", {"a": "2", "b": "x"}, True),
    # --- IN: strings only, NOT IN of null is null
    ("a IN ('x', 'y')", {"a": "y"}, True),
    ("a IN ('x', 'y')", {"a": "z"}, False),
    ("a IN ('x', 'y')", {}, None),
    ("a NOT IN ('x', 'y')", {"a": "z"}, True),
    ("a NOT IN ('x', 'y')", {"a": "x"}, False),
    ("a NOT IN ('x', 'y')", {}, None),
    ("a IN ('1', '2', '3', '4', '5', '6')", {"a": "6"}, True),
    ("a IN ('5')", {"a": "05"}, False),
    ("NOT (a NOT IN ('x'))", {}, None),
    # --- IS [NOT] NULL
    ("a IS NULL", {}, True),
    ("a IS NULL", {"a": ""}, False),
    ("a IS NOT NULL", {"a": ""}, True),
    ("a IS NOT NULL", {}, False),
    ("(a > 1) IS NULL", {}, True),
    # --- NOT, AND, OR with unknown (three-valued logic)
    ("NOT (a > 1)", {"a": "0"}, True),
    ("NOT (a > 1)", {}, None),
    ("NOT NOT (a > 1)", {"a": "2"}, True),
    ("a > 1 AND b > 1", {"a": "2", "b": "2"}, True),
    ("a > 1 AND b > 1", {"a": "2"}, None),
    ("a > 1 AND b > 1", {"a": "0"}, False),  # FALSE AND unknown
    ("a > 1 AND b > 1", {"b": "0"}, False),  # unknown AND FALSE
    ("a > 1 OR b > 1", {"a": "2"}, True),  # TRUE OR unknown
    ("a > 1 OR b > 1", {"b": "2"}, True),  # unknown OR TRUE
    ("a > 1 OR b > 1", {"a": "0"}, None),
    ("a > 1 OR b > 1", {"a": "0", "b": "0"}, False),
    ("a > 1 OR b > 1", {"a": "2", "b": "x"}, True),  # OR stops at TRUE: b is never parsed
    ("a > 1 OR b > 1", {"a": "0", "b": "x"}, RAISES),
    ("a > 1 AND b > 1", {"a": "0", "b": "x"}, False),  # AND stops at FALSE
    ("a = 1 OR a = 2 AND b = 3", {"a": "1", "b": "0"}, True),  # AND binds tighter
    ("(a = 1 OR a = 2) AND b = 3", {"a": "1", "b": "0"}, False),
    ("a = 1 or a = 2 or a = 3 or a = 4", {"a": "4"}, True),
    # --- CONTAINS / STARTSWITH / ENDSWITH (RocketMQ 5): FALSE for null, FALSE for ''
    ("a CONTAINS 'x'", {"a": "axb"}, True),
    ("a STARTSWITH 'ax'", {"a": "axb"}, True),
    ("a ENDSWITH 'xb'", {"a": "axb"}, True),
    ("a NOT CONTAINS 'x'", {"a": "axb"}, False),
    ("a NOT STARTSWITH 'x'", {"a": "axb"}, True),
    ("a NOT ENDSWITH 'x'", {"a": "axb"}, True),
    ("a CONTAINS 'x'", {}, False),
    ("a NOT CONTAINS 'x'", {}, False),
    ("a CONTAINS ''", {"a": "axb"}, False),
    ("a NOT CONTAINS ''", {"a": "axb"}, False),
    ("'axb' CONTAINS 'x'", {}, True),
    ("(a > 1) CONTAINS 'x'", {"a": "2"}, False),
    ("a CONTAINS '.'", {"a": "axb"}, False),
    # --- keywords in any case, comments
    ("a > 1 and b < 3 Or NOT (c is not null)", {"a": "2", "b": "2", "c": "x"}, True),
    ("a bEtWeEn 1 AnD 3", {"a": "2"}, True),
    ("a in ('x') /* comment */", {"a": "x"}, True),
    ("a = 1 -- to the end of the line\n", {"a": "1"}, True),
    ("nothing = 'x'", {"nothing": "x"}, True),  # a name starting with a keyword is a name
    ("$a_1 = 'x'", {"$a_1": "x"}, True),
    ("now > 5", {"now": "6"}, True),  # "now" is a property, not a function
]


def _evaluate(expression: str, props: dict[str, str]) -> bool | str | None:
    compiled = compile_sql92(expression)
    try:
        return compiled.evaluate(props)
    except EvaluationError:
        return RAISES


@pytest.mark.parametrize(("expression", "props", "expected"), CASES)
def test_evaluation_follows_rocketmq(
    expression: str, props: dict[str, str], expected: bool | str | None
) -> None:
    assert _evaluate(expression, props) == expected
    # Only TRUE delivers a message; null and a failed evaluation do not.
    assert compile_sql92(expression).matches(props) is (expected is True)


# (expression, what the error says)
REFUSED: list[tuple[str, str]] = [
    # syntax
    ("", "unexpected end of the expression"),
    ("a >", "unexpected end of the expression"),
    ("a > 1 AND", "unexpected end of the expression"),
    ("(a > 1", "unexpected end of the expression"),
    ("a > 1)", "unexpected ')' at line 1, column 6"),
    ("a b", "unexpected 'b' at line 1, column 3"),
    ("a = 1 b = 2", "unexpected 'b'"),  # RocketMQ ignores the rest; pocketmq refuses it
    ("a # 1", "unexpected character '#' at line 1, column 3"),
    ('a = "x"', "unexpected character '\"'"),
    ("a = 'x", 'unexpected character "\'"'),
    ("a IS 5", "expected NOT, NULL"),
    ("a IN ()", "expected a 'string'"),
    ("a IN (1, 2)", "expected a 'string'"),
    ("a CONTAINS b", "expected a 'string'"),
    ("a NOT b", "unexpected 'b'"),
    ("a LIKE 'x%'", "unexpected 'LIKE'"),  # RocketMQ has no LIKE
    ("a = 0x1F", "unexpected 'x1F'"),  # nor hex literals
    ("a = 007", "unexpected '0'"),  # nor octal ones
    ("a.b = 1", "unexpected character '.'"),
    ("a = 1 -- no newline", "unexpected '-'"),  # a line comment needs its end of line
    ("AND = 1", "unexpected 'AND'"),
    ("a = 1\n AND", "unexpected end of the expression"),
    ("x\n  = = 1", "line 2, column 5"),
    # what RocketMQ's expression factories refuse
    ("5", "Expression will not result in a boolean value: 5"),
    ("'x'", "Expression will not result in a boolean value: 'x'"),
    ("-a", "Expression will not result in a boolean value: (- a)"),
    ("a AND 5", "Expression will not result in a boolean value: 5"),
    ("NOT 5", "Expression will not result in a boolean value: 5"),
    ("a > 'x'", "Value ''x'' cannot be compared."),
    ("a > TRUE", "Value 'TRUE' cannot be compared."),
    ("a > NULL", "Value 'NULL' cannot be compared."),
    ("NOT a > 5", "Value '(NOT a)' cannot be compared."),  # NOT binds to a, as in RocketMQ
    ("(a > 1) > 2", "Value '(a > 1)' cannot be compared."),
    ("a = NULL", "'NULL' cannot be compared."),
    ("NULL <> a", "'NULL' cannot be compared."),
    ("TRUE = 5", "'TRUE' cannot be compared with '5'"),
    ("a BETWEEN 3 AND 1", "left value(3) must less than or equal to right value(1)"),
    ("a BETWEEN 1.5 AND 1", "left value(1.5) must less than or equal to right value(1)"),
    ("a BETWEEN NULL AND 1", "values can not be null"),
    ("a BETWEEN 'a' AND 'b'", "Value ''a'' cannot be compared."),
    ("a BETWEEN 1 AND 'b'", "'b' is not an int"),
    ("'x' IN ('x')", "Expected a property for In expression, got: 'x'"),
    ("a > 100000000000000000000000", "For input string"),
    ("a > 9223372036854775808", "For input string"),
    ("a > 0.0", "0.0 is less than 4.9E-324"),  # RocketMQ: Double.MIN_VALUE is positive
    ("a > 1e-400", "1e-400 is less than 4.9E-324"),
    ("a > 1e400", "1e400 is greater than 1.7976931348623157E308"),
    ("NOT " * MAX_DEPTH + "a", f"nested more than {MAX_DEPTH} levels deep"),
]


@pytest.mark.parametrize(("expression", "message"), REFUSED)
def test_refused_expressions_say_why(expression: str, message: str) -> None:
    with pytest.raises(SqlFilterError) as info:
        compile_sql92(expression)
    assert info.value.expression == expression
    assert str(info.value).startswith("Invalid MessageSelector")
    assert message in str(info.value)


def test_parentheses_do_not_count_as_nesting() -> None:
    expression = "(" * 200 + "a > 1" + ")" * 200
    with pytest.raises(SqlFilterError):
        compile_sql92(expression + ")")
    assert compile_sql92(expression).evaluate({"a": "2"}) is True


def test_long_chains_of_alternatives_compile_flat() -> None:
    expression = " OR ".join(f"a = {i}" for i in range(2000))
    compiled = compile_sql92(expression)
    assert compiled.evaluate({"a": "1999"}) is True
    assert compiled.evaluate({"a": "2000"}) is False
    assert compiled.evaluate({}) is None


def test_compiled_expressions_are_cached() -> None:
    assert compile_sql92("cached > 1") is compile_sql92("cached > 1")
    with pytest.raises(SqlFilterError) as first:
        compile_sql92("cached >")
    with pytest.raises(SqlFilterError) as second:
        compile_sql92("cached >")
    assert str(first.value) == str(second.value)


def test_a_long_refused_expression_is_quoted_in_part() -> None:
    expression = "a = 1 AND " * 100 + "b >"
    with pytest.raises(SqlFilterError) as info:
        compile_sql92(expression)
    assert len(str(info.value)) < len(expression)
    assert "..." in str(info.value)


# --- Java's values -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "right", "sign"),
    [
        (JInt(1), JLong(2), -1),
        (JLong(2), JInt(2), 0),
        (JInt(3), 2.5, 1),
        (2.5, JLong(3), -1),
        ("5", JInt(5), 0),
        (JInt(5), "6", -1),
        ("true", True, 0),
        ("no", True, -1),
        (True, JInt(1), -1),  # no conversion: Java answers -1
        (JInt(1), True, -1),
        (float("nan"), float("nan"), 0),
        (-0.0, 0.0, -1),
        ("\uffff", "\U0001f600", 1),  # String.compareTo compares UTF-16 code units
    ],
)
def test_compare_converts_as_java(left: object, right: object, sign: int) -> None:
    result = compare(left, right)
    assert (result > 0) - (result < 0) == sign


def test_a_boolean_against_a_string_throws_as_in_java() -> None:
    with pytest.raises(EvaluationError, match="ClassCastException"):
        compare(True, "true")


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", 1), ("-2147483648", -(2**31)), ("+7", 7), ("007", 7), ("٣", 3)],
)
def test_parse_int_is_integer_value_of(text: str, value: int) -> None:
    assert parse_int(text) == value


@pytest.mark.parametrize("text", ["", "+", "2147483648", " 1", "1_0", "1.0", "0" * 30 + "9" * 30])
def test_parse_int_refuses_what_java_refuses(text: str) -> None:
    with pytest.raises(EvaluationError):
        parse_int(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [("1.5", 1.5), (" 2 ", 2.0), ("1e3", 1000.0), ("-Infinity", float("-inf")), ("3f", 3.0),
     ("0x10p0", 16.0), (".5", 0.5), ("5.", 5.0)],
)  # fmt: skip
def test_parse_double_is_double_value_of(text: str, value: float) -> None:
    assert parse_double(text) == value


@pytest.mark.parametrize("text", ["inf", "nan", "1_0", "", "1e", "0x10", "--1"])
def test_parse_double_refuses_python_only_spellings(text: str) -> None:
    with pytest.raises(EvaluationError):
        parse_double(text)


def test_negation_wraps_like_java() -> None:
    assert negate(JInt(-(2**31))) == -(2**31)
    assert type(negate(JLong(5))) is JLong
    assert negate("x") is None and negate(True) is None and negate(None) is None


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1.0"), (1e10, "1.0E10"), (1.5e-5, "1.5E-5"), (123.25, "123.25"), (1e7, "1.0E7"),
     (-0.0, "-0.0"), (float("nan"), "NaN"), (5e-324, "4.9E-324")],
)  # fmt: skip
def test_doubles_print_as_in_java(value: float, text: str) -> None:
    if value != 5e-324:  # Java prints its own shortest digits for the smallest subnormal
        assert double_to_string(value) == text
