"""Every absl::Status the project's code drops is dropped through one named helper,
IgnoreStatus(status, "why") (src/base/ignore_status.h), with the reason it is safe written at the
call; every other status is handled. A (void) cast would drop one silently, and reads the same
whether the drop is safe or a bug.

The check, over the project's own code (CHECKED: src/, src/python included, and the public
headers; tests and their support left out, and examples/, which is user code): a (void) cast is
one of the forms that drop no status,

  (void)!write(fd, &one, 1);   a syscall's result, unused (`!` gets past glibc's
                               warn_unused_result, which a cast alone does not)
  (void)ignored;               an unused variable or parameter
  (void)::epoll_ctl(...);      a call of a function of ALLOWED_CALLS, none of which returns a
                               status

and every IgnoreStatus call gives its reason as a non-empty string literal, so that the reason
can be read where the drop is. absl's Status::IgnoreError, which gives none, is not used."""
import pathlib
import re

from cpp_source import ROOT, TEST_SUFFIXES, code_of, production_files, word_char

CHECKED = ("src", "include/tessera")

# Functions whose result a (void) cast may drop, each with why no status is lost.
ALLOWED_CALLS = {
    "write": "a wake-up byte to an eventfd or pipe: a full counter is still readable",
    "read": "draining a wake-up eventfd: what it held does not matter, only that it is empty",
    "send": "a best-effort reply on a non-blocking socket: a peer that is gone gets nothing",
    "epoll_ctl": "an interest-list change on the loop's own epoll fd: it fails only for an fd "
                 "closed already, whose interest is gone with it",
    "madvise": "a prefault hint (MADV_POPULATE_*): refused, the pages fault in on first use",
    "lseek": "skips a kernel log's history: a FIFO cannot seek and has none",
    "pwrite": "a progress file rewritten in place at every change: the next write mends a failed "
              "one",
    "absl::SimpleAtoi": "returns a bool: on a failed parse the variable keeps its default",
}

HINT = ("drop a status through IgnoreStatus(status, \"why it is safe\") "
        "(base/ignore_status.h), or handle it; a (void) cast is only for `(void)!syscall(...)`, "
        "an unused name, or a function of ALLOWED_CALLS in " + pathlib.Path(__file__).name)

CAST = re.compile(r"\(\s*void\s*\)")
# What follows "(void)" in a parameter list: `int f(void);`, `int (*fn)(void) noexcept`.
AFTER_PARAMETERS = re.compile(
    r"\s*([;,){=&]|->|(const|volatile|noexcept|override|final|throw|__attribute__)\b)")
UNUSED_NAME = re.compile(r"\s*[A-Za-z_]\w*\s*;")
CALL = re.compile(r"\s*(?:::)?((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*\(")
IGNORE_STATUS = re.compile(r"(?<![\w.>])(?<!void )(?:tessera::)?IgnoreStatus\s*\(")
IGNORE_ERROR = re.compile(r"\.\s*IgnoreError\s*\(")
LITERALS = re.compile(r'(?:"x*"\s*)+')


def _line(code, offset):
    return code.count("\n", 0, offset) + 1


def _closing(code, start):
    """The offset of the bracket that closes the one before `start` (strings are x's by now)."""
    depth = 1
    for k in range(start, len(code)):
        if code[k] in "([{":
            depth += 1
        elif code[k] in ")]}":
            depth -= 1
            if depth == 0:
                return k
    return len(code)


def _top_level_arguments(code, start, end):
    arguments, depth, begin = [], 0, start
    for k in range(start, end):
        if code[k] in "([{":
            depth += 1
        elif code[k] in ")]}":
            depth -= 1
        elif code[k] == "," and depth == 0:
            arguments.append(code[begin:k])
            begin = k + 1
    arguments.append(code[begin:end])
    return arguments


def problems_in(text):
    """(line, problem) for each unexplained drop in the C++ source `text`."""
    code = code_of(text, blank_preprocessor=False)
    found = []
    for match in CAST.finditer(code):
        rest = code[match.end():match.end() + 200]
        if AFTER_PARAMETERS.match(rest):
            continue  # `f(void)`: no cast
        if rest.startswith("!") or UNUSED_NAME.match(rest):
            continue
        call = CALL.match(rest)
        if call and call.group(1) in ALLOWED_CALLS:
            continue
        shown = " ".join(rest.split(";", 1)[0].split())
        found.append((_line(code, match.start()), f"(void){shown}"))
    for match in IGNORE_STATUS.finditer(code):
        end = _closing(code, match.end())
        arguments = _top_level_arguments(code, match.end(), end)
        why = arguments[-1].strip() if len(arguments) >= 2 else ""
        if not LITERALS.fullmatch(why) or "x" not in why:
            found.append((_line(code, match.start()),
                          "IgnoreStatus without its reason as a non-empty string literal"))
    for match in IGNORE_ERROR.finditer(code):
        found.append((_line(code, match.start()), "IgnoreError() gives no reason"))
    return found


def checked_files():
    return production_files(*CHECKED)


def all_problems():
    found = []
    for path in checked_files():
        relative = path.relative_to(ROOT)
        for line, problem in problems_in(path.read_text(errors="replace")):
            found.append(f"{relative}:{line}: {problem}")
    return found


def test_no_status_is_dropped_without_its_reason():
    found = all_problems()
    assert not found, HINT + ":\n" + "\n".join(found)


def test_the_check_reads_the_projects_code_and_only_it():
    files = checked_files()
    relative = {str(path.relative_to(ROOT)) for path in files}
    assert len(files) > 300, f"found only {len(files)} files under {CHECKED}"
    assert "src/node/agent_state.cc" in relative
    assert "src/python/gang_calls.cc" in relative
    assert "include/tessera/gang.h" in relative
    assert "src/head/redis_test_server.cc" in relative  # test support, held to the same rule
    assert not any(name.endswith(TEST_SUFFIXES) for name in relative)
    assert not any(name.startswith("examples/") for name in relative)


def test_the_reasons_it_checks_are_there():
    """The reason check is not vacuous: it sees the project's calls, each with its literal."""
    calls = 0
    for path in checked_files():
        calls += len(IGNORE_STATUS.findall(code_of(path.read_text(errors="replace"), False)))
    assert calls > 50, f"only {calls} IgnoreStatus calls seen"


def test_the_check_sees_a_dropped_status():
    assert problems_in("  (void)view_.Release(id);\n") == [(1, "(void)view_.Release(id)")]
    assert problems_in("x;\n  if (held) (void)cluster_->Release(id);\n")[0][0] == 2
    assert problems_in("(void)Kill(handle);")
    assert problems_in("(void)(*client)->Delete(id);")
    assert problems_in("(void)client::ReleaseSlicesNamed(client, name);")
    assert problems_in("(void) sink.Emit({}, 1.0);")
    assert problems_in("(void)head_->KeepDriverAlive(&context, request, &response);")
    assert problems_in("Release().IgnoreError();")


def test_the_check_allows_what_drops_no_status():
    assert not problems_in("(void)!write(fd, &one, 1);")
    assert not problems_in("  ssize_t ignored = ::read(fd, &n, 8);\n  (void)ignored;\n")
    assert not problems_in("(void)::epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr);")
    assert not problems_in("(void)absl::SimpleAtoi(text, &n);")
    assert not problems_in("int Version(void);\nusing Fn = int (*)(void) noexcept;")
    assert not problems_in("// (void)view_.Release(id);\n/* (void)Kill(x); */")
    assert not problems_in('const char* s = "(void)view_.Release(id);";')
    assert not problems_in('auto doc = R"(text (void)view_.Release(id); more)";')
    assert not problems_in("int n = 60'000; (void)n;")


def test_the_check_sees_a_missing_reason():
    assert problems_in('IgnoreStatus(view_.Release(id), "");')
    assert problems_in("IgnoreStatus(view_.Release(id), kWhy);")
    assert problems_in("IgnoreStatus(view_.Release(id));")
    assert problems_in('tessera::IgnoreStatus(s, "" "");')
    assert not problems_in('IgnoreStatus(view_.Release(id), "cannot fail: it was just taken");')
    assert not problems_in('IgnoreStatus(f(a, {b, c}),\n             "one, " "and a comma");')
    assert not problems_in('IgnoreStatus(Get(x), "a \\"quoted\\" reason");')
    # The helper's own declarations are no calls.
    assert not problems_in("inline void IgnoreStatus(const absl::Status&, std::string_view) {}")
