"""Text is parsed once, where it enters: the command line (src/cli), the Python binding
(src/python), the files and environments a node is described by (hardware discovery, the
simulator's YAML, the scheduler's request and cluster files). Inside, values travel as the
vocabulary's types (src/vocabulary with its TPU shapes, src/resources, src/labels), never as
text that a lower layer parses again.

The check: outside tests, a call of a text parser (PARSERS) appears only in the parser's own
library, in an edge (EDGES), or in a file of KNOWN_INSIDE with the reason it is still there. The
known list may only shrink: a listed file that no longer parses fails the check too."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Parsers of text, by the library that defines them.
PARSERS = {
    "resources": ["ParseResourceSet", "Quantity::Parse", "ParseByteSize", "ParseByteQuantity"],
    "labels": ["ParseLabelSelector", "ParseLabelSelectorMap", "ParseLabelSelectorYaml",
               "ParseLabels", "ParseLabelsYaml", "FallbackList::ParseYaml"],
    # The vocabulary's parsers, file by file (the rest of src/vocabulary parses nothing).
    "vocabulary/tpu_generation": ["ParseTpuGeneration"],
    "vocabulary/tpu_topology": ["ParseTpuTopology", "ParseTpuTopologyFor"],
    "vocabulary/tpu_accelerator_type": ["ParseTpuAcceleratorType"],
    "vocabulary/slice_shape": ["ParseSliceShape"],
    "vocabulary/placement_strategy": ["ParsePlacementStrategy"],
    "scheduling/placement_group_spec": ["ParseBundleOption"],
}

# Where text enters, and why that is an edge.
EDGES = {
    "src/cli/": "the command line: flags and the files they name",
    "src/python/": "the Python binding: Ray's keyword arguments",
    "src/hardware/simulated/": "YAML hardware descriptions",
    "src/hardware/plugins/": "discovery: what sysfs, drivers and the environment say",
    "src/hardware/tpu/tpu_identity.cc": "a TPU host's environment (TPU_ACCELERATOR_TYPE, "
                                        "TPU_TOPOLOGY), read when the node is discovered",
    "src/scheduling/requests_file.cc": "the simulator's requests file",
    "src/scheduling/cluster_file.cc": "the simulator's cluster file",
    "src/node/object_store_sizing.cc": "the agent's --object-store-memory flag",
    "src/metrics/exposition_parser.cc": "Prometheus's text format (its ParseLabels is its own)",
    "src/scheduling/cluster_view.cc": "a node's labels, read into its FabricMembership once when "
                                      "the node joins (ClusterView::AddNode)",
}

# Files inside that still parse text, each with its reason; fix one, then remove it here.
KNOWN_INSIDE = {
}


def parser_pattern():
    names = [name for group in PARSERS.values() for name in group]
    return re.compile(r"(?<![A-Za-z0-9_:])(" + "|".join(re.escape(n) for n in names) + r")\(")


def in_a_parsers_library(relative):
    """Parsers build on each other (a bundle's text holds a resource set)."""
    return any(relative.startswith(f"src/{library}") for library in PARSERS)


def is_test(path):
    return path.name.endswith(("_test.cc", "_fuzzer.cc", "_test_util.h", "_test_fakes.h"))


def inside_calls():
    pattern = parser_pattern()
    found = {}
    for path in sorted((ROOT / "src").rglob("*")):
        if path.suffix not in (".cc", ".h") or is_test(path):
            continue
        relative = str(path.relative_to(ROOT))
        if any(relative.startswith(edge) for edge in EDGES) or in_a_parsers_library(relative):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            code = line.split("//", 1)[0]
            for match in pattern.finditer(code):
                found.setdefault(relative, []).append(f"{relative}:{number}: {match.group(1)}")
    return found


def test_no_library_inside_the_edges_parses_text():
    found = inside_calls()
    new = [where for relative, calls in sorted(found.items()) if relative not in KNOWN_INSIDE
           for where in calls]
    assert not new, ("text parsed inside the edges (take the vocabulary's types instead, or "
                     "parse at the edge):\n" + "\n".join(new))


def test_the_known_list_only_shrinks():
    found = inside_calls()
    gone = [relative for relative in KNOWN_INSIDE if relative not in found]
    assert not gone, f"no longer parses text: remove from KNOWN_INSIDE: {gone}"


def test_the_check_sees_a_parser_call():
    pattern = parser_pattern()
    assert pattern.search("  auto r = ParseResourceSet(options.resources);")
    assert pattern.search("Quantity::Parse(text)")
    assert not pattern.search("MyParseResourceSet(x)")
    assert not pattern.search("wire::ParseLinkKind(x)")
