"""No function of the project's production C++ (src/, tests and their support left out) has a
body longer than MAX_LINES lines: a long function is split into named steps, so that each step
can be read, and named, on its own. The length of a function is the count of lines from the line
of its body's opening brace to the line of its closing brace; a lambda inside a function is part
of it. Namespace, class, struct, union and enum bodies are not functions, and neither is a brace
initializer.

The few functions for which splitting reads worse than the whole (a flat table, say) are listed
in KNOWN_LONG with the reason each stays long. The list may only shrink.

The scan matches braces over the code with its comments, string and character literals (raw
strings too) and preprocessor lines blanked, so that a brace in any of them counts for nothing."""
import re

from cpp_source import ROOT, TEST_SUFFIXES, code_of, production_files, word_char

CHECKED = "src"
MAX_LINES = 100

# "path:function" -> why the function stays longer than MAX_LINES lines. None does now; an entry
# needs a reason that splitting would read worse (a flat table, say).
KNOWN_LONG = {
}


# ---------------------------------------------------------------------------------------------
# Brace matching: which braces open a function body, and how long the body is.

OPENING, CLOSING = "([{", ")]}"
ACCESS = re.compile(r"^\s*(?:(?:public|private|protected)\s*:(?!:)\s*)+")
ATTRIBUTES = re.compile(r"^\s*(?:\[\[[^\]]*\]\]\s*)+")
TEMPLATE = re.compile(r"^\s*template\s*<")
CLASS_KEY = re.compile(r"^\s*(?:typedef\s+)?(class|struct|union|enum)\b")
NAMESPACE = re.compile(r'(?:\bnamespace\b|^\s*extern\s*"[x]*"\s*$)')
# What may follow a function's parameter list before its body.
QUALIFIED = re.compile(r"\s*(?:(?:const|volatile|override|final|noexcept|mutable|constexpr|"
                       r"&&|&|throw\s*\(\s*\))\s*)*(?:->[^=;]*)?$")
CALLED_QUALIFIERS = re.compile(r"\b(?:noexcept|ABSL_\w+|__attribute__|requires)\s*\(")
NAME = re.compile(r"((?:[A-Za-z_]\w*\s*(?:<[^<>]*>)?\s*::\s*)*"
                  r"(?:operator\s*(?:\(\s*\)|\[\s*\]|[^\s\w(]+|\w+)|~?[A-Za-z_]\w*))\s*$")


def _closing(code, start):
    """The offset of the bracket that closes the one at `start` (literals are x's by now)."""
    depth = 0
    for k in range(start, len(code)):
        if code[k] in OPENING:
            depth += 1
        elif code[k] in CLOSING:
            depth -= 1
            if depth == 0:
                return k
    raise ValueError(f"unbalanced bracket at offset {start}")


def _groups(header):
    """(start, end) of each top-level bracket group of `header`, end past its closing bracket."""
    groups, depth, begin = [], 0, 0
    for k, c in enumerate(header):
        if c in OPENING:
            if depth == 0:
                begin = k
            depth += 1
        elif c in CLOSING:
            depth -= 1
            if depth == 0:
                groups.append((begin, k + 1))
    return groups


def _without_calls(text):
    """`text` less the calls of noexcept(...), ABSL_...(...) and the like."""
    while True:
        match = CALLED_QUALIFIERS.search(text)
        if not match:
            return text
        depth = 0
        for k in range(match.end() - 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            if depth == 0:
                break
        text = text[:match.start()] + " " + text[k + 1:]


def _declaration(header):
    """`header` less its access specifier, attributes and template parameter list."""
    header = ACCESS.sub("", header)
    header = ATTRIBUTES.sub("", header)
    if TEMPLATE.match(header):
        depth = 0
        for k in range(header.index("<"), len(header)):
            depth += {"<": 1, ">": -1}.get(header[k], 0)
            if depth == 0:
                header = header[k + 1:]
                break
    return header


def classify(header):
    """What the brace after `header` opens: ("namespace"|"class"|"initializer", name) or
    ("function", name) or ("constructor", name) for a constructor whose initializer list the
    header starts."""
    declaration = _declaration(header)
    if NAMESPACE.search(declaration):
        return "namespace", ""
    for begin, end in _groups(declaration):
        if declaration[begin] != "(":
            continue
        before = declaration[:begin]
        rest = declaration[end:]
        if "=" in _without_groups(before) and not re.search(r"\boperator\b", before):
            break  # a variable's initializer, or a lambda assigned to one
        name = NAME.search(before)
        if not name:
            continue
        if QUALIFIED.match(_without_calls(rest)):
            return "function", re.sub(r"\s+", "", name.group(1))
        if re.match(r"\s*:(?!:)", rest):
            return "constructor", re.sub(r"\s+", "", name.group(1))
    key = CLASS_KEY.match(declaration)
    if key and "=" not in _without_groups(declaration):
        return "class", _class_name(declaration[key.end():])
    return "initializer", ""


def _without_groups(text):
    for begin, end in reversed(_groups(text)):
        text = text[:begin] + text[end:]
    return text


def _class_name(tail):
    tail = re.sub(r"<[^<>]*>", "", tail)
    tail = re.split(r"(?<!:):(?!:)", tail, maxsplit=1)[0]
    names = [name for name in re.findall(r"[A-Za-z_]\w*", tail)
             if name not in ("final", "class", "struct") and not name.startswith("ABSL_")]
    return names[-1] if names else ""


def functions_in(text):
    """(line, name, length) of each function body of the C++ source `text`."""
    code = code_of(text)
    found = []
    scopes = []  # ("namespace" | "class", name) of each brace that is open
    header_start = 0
    i, n = 0, len(code)

    def line(offset):
        return code.count("\n", 0, offset) + 1

    while i < n:
        c = code[i]
        if c in "([":
            i = _closing(code, i) + 1
            continue
        if c == ";":
            header_start = i + 1
        elif c == "}":
            if not scopes:
                raise ValueError(f"unmatched closing brace at line {line(i)}")
            scopes.pop()
            header_start = i + 1
        elif c == "{":
            kind, name = classify(code[header_start:i])
            if kind == "constructor":
                before = code[header_start:i].rstrip()
                if before and (word_char(before[-1]) or before[-1] == ">"):
                    # A member's brace initializer, in the constructor's initializer list.
                    i = _closing(code, i) + 1
                    continue
                kind = "function"
            if kind == "function":
                end = _closing(code, i)
                classes = [scope for kind_of, scope in scopes if kind_of == "class" and scope]
                if classes and "::" not in name:
                    name = "::".join(classes + [name])
                found.append((line(i), name, line(end) - line(i) + 1))
                i = end + 1
                header_start = i
                continue
            if kind == "initializer":
                i = _closing(code, i) + 1
                continue
            scopes.append((kind, name))
            header_start = i + 1
        i += 1
    if scopes:
        raise ValueError(f"{len(scopes)} braces left open at the end")
    return found


# ---------------------------------------------------------------------------------------------
# The check.

def checked_files():
    return production_files(CHECKED)


def long_functions_in(text):
    """(line, name, length) of each function body of `text` longer than MAX_LINES lines."""
    return [found for found in functions_in(text) if found[2] > MAX_LINES]


def long_functions():
    """{"path:function": "path:line: function is N lines"} for each body over MAX_LINES."""
    found = {}
    for path in checked_files():
        relative = path.relative_to(ROOT)
        for line, name, length in long_functions_in(path.read_text(errors="replace")):
            found[f"{relative}:{name}"] = f"{relative}:{line}: {name} is {length} lines"
    return found


def test_no_function_is_longer_than_the_limit():
    new = [where for key, where in sorted(long_functions().items()) if key not in KNOWN_LONG]
    assert not new, (f"over {MAX_LINES} lines: split into named steps (private member functions "
                     "or helpers in an anonymous namespace):\n" + "\n".join(new))


def test_the_known_list_only_shrinks():
    found = long_functions()
    gone = [key for key in KNOWN_LONG if key not in found]
    assert not gone, f"no longer over {MAX_LINES} lines: remove from KNOWN_LONG: {gone}"


def test_the_check_reads_the_projects_code_and_only_it():
    files = checked_files()
    relative = {str(path.relative_to(ROOT)) for path in files}
    assert len(files) > 300, f"found only {len(files)} files under {CHECKED}"
    assert "src/train/gang_controller.cc" in relative
    assert not any(name.endswith(TEST_SUFFIXES) for name in relative)
    names = {name for path in files for _, name, _ in functions_in(path.read_text())
             if path.name == "gang_controller.cc"}
    assert "GangController::RunAttempt" in names, sorted(names)


# ---------------------------------------------------------------------------------------------
# The scanner, on small sources.

def _function(name, body_lines):
    """A function whose body spans `body_lines` lines, braces included."""
    return f"void {name}() {{\n" + "  x();\n" * (body_lines - 2) + "}\n"


def test_a_short_function_is_short_and_a_long_one_long():
    assert functions_in(_function("Short", 3)) == [(1, "Short", 3)]
    assert long_functions_in(_function("Short", 3)) == []
    assert long_functions_in(_function("Limit", 100)) == []
    assert long_functions_in(_function("Long", 101)) == [(1, "Long", 101)]


def test_a_lambda_is_part_of_its_function():
    body = "  auto f = [] {\n" + "    x();\n" * 97 + "  };\n"
    assert long_functions_in("void Outer() {\n" + body + "}\n") == [(1, "Outer", 101)]


def test_braces_in_comments_and_literals_count_for_nothing():
    source = ("namespace a {\n"
              "// } a comment's brace\n"
              "/* { */\n"
              "void F() {\n"
              "  const char* s = \"}}\";\n"
              "  char c = '}';\n"
              "  auto raw = R\"delim(}\n"
              "  )\" } )delim\";\n"
              "#define OPEN {\n"
              "  int n = 60'000;\n"
              "}\n"
              "}  // namespace a\n")
    assert functions_in(source) == [(4, "F", 8)]


def test_namespaces_classes_and_initializers_are_not_functions():
    source = ("namespace a {\n"
              "namespace {\n"
              "const int kTable[] = {\n"
              "    1, 2,\n"
              "};\n"
              "}  // namespace\n"
              "template <class T>\n"
              "class ABSL_LOCKABLE Box final : public Base<T> {\n"
              " public:\n"
              "  Box(int a) : a_(a), b_{a} {\n"
              "    Run([] { return 1; });\n"
              "  }\n"
              "  int Get() const ABSL_LOCKS_EXCLUDED(mu_) { return a_; }\n"
              "  size_t operator()(int x) const noexcept { return x; }\n"
              "  enum class Color { kRed, kBlue };\n"
              "  int a_ = 0;\n"
              "  std::vector<int> b_{1, 2};\n"
              "};\n"
              "Box<int>::Box() : a_(0) {}\n"
              "auto Twice(int x) -> int {\n"
              "  return 2 * x;\n"
              "}\n"
              "}  // namespace a\n")
    assert functions_in(source) == [(10, "Box::Box", 3), (13, "Box::Get", 1),
                                    (14, "Box::operator()", 1), (19, "Box<int>::Box", 1),
                                    (20, "Twice", 3)]
