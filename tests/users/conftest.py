"""suite/ is a user's own test suite: test_user_suite.py copies it out of this repository and
runs it in a pytest of its own, where it finds the fixtures through the installed entry point
alone. Collected here, it would run twice and with this repository's conftest files."""

collect_ignore = ["suite"]
