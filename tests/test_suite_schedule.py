"""The suite's schedule (tests/conftest.py): the files it starts first exist, so a renamed file
does not silently drop back to collection order."""

import os

from conftest import LONGEST_FILES_FIRST

HERE = os.path.dirname(os.path.abspath(__file__))


def test_every_file_scheduled_first_exists_once():
    assert not [n for n in LONGEST_FILES_FIRST if not os.path.isfile(os.path.join(HERE, n))]
    assert len(set(LONGEST_FILES_FIRST)) == len(LONGEST_FILES_FIRST)
