from crftk.errors import MAX_MESSAGE, CrftkError, shown


def test_error_is_one_line_with_file_and_line():
    e = CrftkError("bad\nthing", "a\nb.txt", 3)
    assert str(e) == "a\\nb.txt:3: bad\\nthing"
    assert "\n" not in str(e)


def test_long_messages_and_values_are_cut_in_the_middle():
    assert shown("B-NP") == "'B-NP'"
    s = shown("x" * 10**6)
    assert len(s) < 80 and s.startswith("'xxxx") and s.endswith("(1,000,000 characters)")
    e = CrftkError("start " + "y" * 10**6 + " end", "f.txt", 1)
    assert len(str(e)) <= MAX_MESSAGE + 20
    assert str(e).startswith("f.txt:1: start yyy") and str(e).endswith("yyy end")


def test_every_line_break_unicode_knows_is_escaped():
    # found by the fuzz suite: a label holding U+2028 split the error over two lines
    e = CrftkError("gold: ,\u2028 x\x85y\x1cz\u2029\v\f", "in\u2028put.txt", 2)
    assert len(str(e).splitlines()) == 1
    assert str(e) == "in\\u2028put.txt:2: gold: ,\\u2028 x\\x85y\\x1cz\\u2029\\x0b\\x0c"
