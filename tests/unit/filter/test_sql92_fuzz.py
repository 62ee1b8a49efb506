"""Hypothesis on the SQL92 selector: any text either compiles or raises SqlFilterError, and a
compiled selector evaluated on any properties answers TRUE, FALSE or null, or raises
EvaluationError (which only makes the message not match). Nothing else may escape."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmq.filter import EvaluationError, SqlFilterError, compile_sql92

pytestmark = pytest.mark.fuzz

CI = settings(
    max_examples=1000,
    deadline=None,
    database=None,
    derandomize=True,  # the same inputs on every run: a failure here is never a fluke
    suppress_health_check=[HealthCheck.too_slow],
)

# Pieces the grammar is made of, so that random sequences often parse and reach evaluation.
TOKENS = [
    "a", "b", "TAGS", "x1", "$p", "nothing", "AND", "or", "Not", "BETWEEN", "IN", "IS", "NULL",
    "TRUE", "false", "CONTAINS", "STARTSWITH", "ENDSWITH", "=", "<>", ">", ">=", "<", "<=",
    "(", ")", ",", "+", "-", "0", "5", "5L", "3000000000", "99999999999999999999", "1.5", ".5",
    "5.", "1e3", "0.0", "1e400", "'x'", "''", "'it''s'", "'", "/* c */", "-- c\n", "#", ".",
    "\n", " ",
]  # fmt: skip
VALUES = ["", "5", "-5", "3000000000", "1.5", "NaN", "Infinity", "x", "true", "TRUE", " 6 ",
          "0x1p3", "٣", "1e999", "\x00"]  # fmt: skip
NAMES = ["a", "b", "TAGS", "x1", "$p", "nothing"]

LITERALS = ["5", "-5", "5L", "3000000000", "1.5", ".5", "1e3", "'x'", "'5'", "TRUE", "NULL"]
OPERATORS = ["=", "<>", ">", ">=", "<", "<="]
operands = st.one_of(st.sampled_from(NAMES), st.sampled_from(LITERALS))
conditions = st.one_of(
    st.tuples(operands, st.sampled_from(OPERATORS), operands).map(" ".join),
    st.tuples(operands, st.sampled_from(["BETWEEN", "NOT BETWEEN"]), operands, operands).map(
        lambda t: f"{t[0]} {t[1]} {t[2]} AND {t[3]}"
    ),
    st.tuples(operands, st.sampled_from(["IN", "NOT IN"]), st.lists(st.sampled_from(
        ["'x'", "'5'", "''"]), min_size=1, max_size=3)).map(
        lambda t: f"{t[0]} {t[1]} ({', '.join(t[2])})"
    ),
    st.tuples(operands, st.sampled_from(["IS NULL", "IS NOT NULL", "CONTAINS 'x'",
                                         "NOT STARTSWITH ''", "ENDSWITH '5'"])).map(" ".join),
    operands,
)  # fmt: skip
# Well-formed more often than not, so that evaluation is reached.
structured = st.recursive(
    conditions,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(" ".join),
        inner.map(lambda e: f"NOT ({e})"),
        inner.map(lambda e: f"({e})"),
    ),
    max_leaves=8,
)
expressions = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from(TOKENS), max_size=25).map(" ".join),
    st.lists(st.sampled_from(TOKENS), max_size=25).map("".join),
    structured,
)
properties = st.dictionaries(
    st.sampled_from(NAMES), st.one_of(st.sampled_from(VALUES), st.text(max_size=8)), max_size=6
)


@CI
@given(expressions, properties)
def test_any_text_compiles_or_is_refused_and_evaluates_or_throws_java_like(
    expression: str, props: dict[str, str]
) -> None:
    try:
        compiled = compile_sql92(expression)
    except SqlFilterError as exc:
        assert exc.expression == expression and exc.detail
        return
    try:
        result = compiled.evaluate(props)
    except EvaluationError:
        assert compiled.matches(props) is False
        return
    assert result is None or type(result) is bool
    assert compiled.matches(props) is (result is True)
