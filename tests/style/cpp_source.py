"""What the style checks share: the project's production C and C++ files, and their text with
comments, literals and preprocessor lines blanked (line breaks kept), so a scan sees only code."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUFFIXES = (".cc", ".h")
# Test code is not production code.
TEST_SUFFIXES = ("_test.cc", "_fuzzer.cc", "_test_util.h", "test_fakes.h")


def production_files(*folders):
    """The production .cc and .h files under `folders` (relative to the project), sorted."""
    files = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and not path.name.endswith(TEST_SUFFIXES):
                files.append(path)
    return files


RAW_STRING = re.compile(r'(?<![\w])(?:u8|u|U|L)?R"([^ ()\\\t\n]{0,16})\(')


def word_char(c):
    return c.isalnum() or c == "_"


def code_of(text, blank_preprocessor=True):
    """`text` with comments and (unless told not to) preprocessor lines blanked and each string or character
    literal's content turned into x's (its quotes kept). Line breaks stay where they were, so
    offsets give line numbers."""
    out = []
    i, n = 0, len(text)
    at_line_start = True

    def blank(chunk):
        return re.sub(r"[^\n]", " ", chunk)

    while i < n:
        c = text[i]
        if blank_preprocessor and at_line_start and c == "#":
            # A preprocessor line, with its continuations.
            end = i
            while True:
                end = text.find("\n", end)
                if end < 0:
                    end = n
                    break
                if text[end - 1] != "\\":
                    break
                end += 1
            out.append(blank(text[i:end]))
            i = end
            continue
        if c == "\n":
            at_line_start = True
        elif not c.isspace():
            at_line_start = False
        raw = RAW_STRING.match(text, i) if c in "uULR" else None
        if raw:
            delimiter = raw.group(1)
            end = text.find(")" + delimiter + '"', raw.end())
            end = n if end < 0 else end + len(delimiter) + 2
            out.append('"' + re.sub(r"[^\n]", "x", text[i + 1:end - 1]) + '"')
            i = end
            at_line_start = False
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(blank(text[i:end]))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(blank(text[i:end]))
            i = end
        elif c == '"' or (c == "'" and (i == 0 or not word_char(text[i - 1]))):
            # A quote after a letter or digit is a digit separator (60'000), not a literal.
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + "x" * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)
