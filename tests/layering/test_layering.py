"""Includes follow the library order that docs/architecture.md documents: a library under src/
includes only itself and the libraries listed below it. The order is read from the document's
diagram, so the document and the check cannot drift apart.

The upward includes that exist today are listed in KNOWN_UPWARD with the reason; the check fails
on any other one, and on a listed one that is gone (so the list only shrinks)."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')

# (library, included library, file) -> why it is still there. Empty: the list may only shrink.
KNOWN_UPWARD = {}


def documented_order():
    text = (ROOT / "docs" / "architecture.md").read_text()
    diagram = text.split("```", 2)[1]
    libraries = (ROOT / "src")
    order = []
    for line in diagram.splitlines():
        word = line.split(" ", 1)[0]
        if word and (libraries / word).is_dir() and word not in order:
            order.append(word)
    return order


def upward_includes(order):
    rank = {name: i for i, name in enumerate(order)}
    found = {}
    for path in sorted((ROOT / "src").rglob("*")):
        if path.suffix not in (".cc", ".h"):
            continue
        library = path.relative_to(ROOT / "src").parts[0]
        if library not in rank:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1)
            if target in rank and rank[target] < rank[library]:
                key = (library, target, str(path.relative_to(ROOT)))
                found.setdefault(key, f"{key[2]}:{number}: {library} includes {target}/")
    return found


def test_the_document_lists_every_library():
    order = documented_order()
    libraries = sorted(p.name for p in (ROOT / "src").iterdir()
                       if p.is_dir() and (p / "CMakeLists.txt").exists())
    missing = [name for name in libraries if name not in order]
    assert not missing, f"docs/architecture.md does not place {missing} in the library order"
    assert order[-1] == "base", order


def test_no_include_points_up_the_documented_order():
    found = upward_includes(documented_order())
    new = [where for key, where in sorted(found.items()) if key not in KNOWN_UPWARD]
    assert not new, ("includes that point up the order of docs/architecture.md:\n  "
                     + "\n  ".join(new))


def test_the_known_exceptions_are_still_needed():
    found = upward_includes(documented_order())
    gone = sorted(f"{k[2]} ({k[0]} -> {k[1]})" for k in KNOWN_UPWARD if k not in found)
    assert not gone, "no longer upward; drop them from KNOWN_UPWARD: " + ", ".join(gone)


# What decides placements (scheduling/): the schedulers and the bundle ledger, which the
# reservation engine and the simulation drive.
DECIDING_HEADERS = ("scheduling/task_scheduler.h", "scheduling/placement_group_scheduler.h",
                    "scheduling/domain_group_scheduler.h", "scheduling/bundle_ledger.h",
                    "scheduling/reservation_engine.h")


def includes_of(path):
    return [m.group(0).split('"')[1] for m in
            (re.match(r'^\s*#\s*include\s+"[^"]+"', line)
             for line in path.read_text().splitlines()) if m]


def test_the_simulator_command_only_reads_and_writes():
    """`tessera schedule` hands every event to scheduling/simulation.h: the command includes
    nothing that decides a placement, so it cannot decide one differently from the cluster."""
    command = ROOT / "src" / "cli" / "schedule_command.cc"
    deciding = [h for h in includes_of(command) if h in DECIDING_HEADERS]
    assert not deciding, f"{command.relative_to(ROOT)} includes {deciding}"
    assert "scheduling/simulation.h" in includes_of(command)


def test_the_heads_reservations_go_through_the_engine():
    """The head places groups and slices only through the engine the simulator drives."""
    schedulers = ("scheduling/placement_group_scheduler.h", "scheduling/domain_group_scheduler.h")
    found = [f"{p.relative_to(ROOT)} includes {h}"
             for p in sorted((ROOT / "src" / "head").glob("*.[ch]*"))
             for h in includes_of(p) if h in schedulers]
    assert not found, "\n".join(found)
    state = includes_of(ROOT / "src" / "head" / "cluster_state.h")
    assert "scheduling/reservation_engine.h" in state
