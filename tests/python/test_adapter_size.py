"""Issue 28: every built-in adapter of a package is at most 30 lines of code; where one needs
more, the adapter API (adapters/_kit.py, _loading.py, _standins.py) widens instead.

The counting rule is infonce_sim.lines_of_code's (code lines: no blank, comment or docstring
lines; the field table's PACKAGE / CONFIGURATIONS / NOT_EXPRESSIBLE assignments apart), and
the first tests pin it on small sources whose counts are written here by hand.
"""

import pathlib

import pytest

from infonce_sim.adapters import BUILT_IN
from infonce_sim.lines_of_code import LineCount, count_source

ADAPTERS = pathlib.Path(__file__).resolve().parents[2] / "python" / "infonce_sim" / "adapters"
LIMIT = 30
NOT_A_PACKAGE = {"conformance"}  # the project's own reference SUT, not a package adapter


def test_blank_comment_and_docstring_lines_do_not_count():
    source = ('"""A module doc\n\nover three lines."""\n'
              "\n"
              "# a comment\n"
              "import os  # a trailing comment: the line counts\n"
              "\n"
              "def f(x):\n"
              "    '''f's doc.'''\n"
              "    return x\n")
    assert count_source(source) == LineCount(code=3, metadata=0)


def test_a_statement_over_several_lines_counts_each_line():
    source = ("x = [1,\n"
              "     2,\n"
              "     3]\n"
              "s = '''a string that is no docstring\n"
              "spans two lines'''\n")
    assert count_source(source) == LineCount(code=5, metadata=0)


def test_the_field_tables_metadata_is_counted_apart():
    source = ('PACKAGE = "p"\n'
              "CONFIGURATIONS = [\n"
              '    {"a": "1"},\n'
              "]\n"
              'NOT_EXPRESSIBLE = "why"\n'
              "OTHER = 1\n"
              "def make():\n"
              "    CONFIGURATIONS = 2  # a local name: code\n"
              "    return CONFIGURATIONS\n")
    assert count_source(source) == LineCount(code=4, metadata=5)


@pytest.mark.parametrize("module", sorted(set(BUILT_IN.values()) - NOT_A_PACKAGE))
def test_a_package_adapter_is_at_most_30_lines_of_code(module):
    count = count_source((ADAPTERS / f"{module}.py").read_text(encoding="utf-8"))
    assert count.code <= LIMIT, (f"adapters/{module}.py: {count.code} lines of code (metadata "
                                 f"{count.metadata} apart) > {LIMIT}: widen the API instead")
