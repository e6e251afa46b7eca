"""The Grafana dashboard (monitoring/grafana/tessera-dashboard.json) checked without a cluster:
- it imports cleanly: a `DS_PROMETHEUS` datasource input that every panel, query and variable
  uses, a unique id, title, unit, place on the 24-column grid and at least one query per panel;
- every metric name its queries use is one of the series docs/observability.md lists, `rate()`,
  `irate()` and `increase()` are applied to counters only, and counters never go without them;
- a histogram the doc lists is read through its `_bucket`, `_sum` and `_count` series only, each
  inside `rate()` or `increase()`, and `histogram_quantile()` is taken over `_bucket` rates whose
  aggregations keep `le`;
- a `job` matcher names one of the targets file's jobs (`tessera-head`, `tessera-node`);
- every template variable a query names is defined, and a multi-value one is matched with `=~`;
- every query is valid PromQL: `promtool check rules` reads them all as recording rules (skipped,
  with the reason, where promtool is not installed).
The checks are functions, each also run on a broken copy of the dashboard to show it catches the
fault."""
import copy
import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "monitoring" / "grafana" / "tessera-dashboard.json"
METRICS_DOC = REPO / "docs" / "observability.md"
DATASOURCE_UID = "${DS_PROMETHEUS}"

# Grafana's own variables, and what they stand for when a query is checked.
BUILTIN_VARIABLES = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h",
                     "__range_s": "3600", "__range_ms": "3600000", "__interval_ms": "60000"}
RATE_FUNCTIONS = {"rate", "irate", "increase"}
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "atan2", "inf", "nan"}
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# Aggregations that keep every label of the series they pick.
LABEL_KEEPING_AGGREGATIONS = {"topk", "bottomk", "limitk", "limit_ratio"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# What a histogram's _bucket, _sum and _count must be inside (irate() of a bucket tells little).
HISTOGRAM_RATE_FUNCTIONS = {"rate", "increase"}
VARIABLE_REF = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


# --- docs/observability.md: the documented series ---------------------------------------------

def documented_metrics(text):
    """{name: type} from every Markdown table whose first column is `metric` and that has a `type`
    column. A cell may name several metrics; one written `_suffix` shares the stem of the first
    full name of its cell (`tessera_object_store_capacity_bytes`, `_used_bytes`, `_objects`: the
    first suffix has two words, so the stem is the full name less its last two words)."""
    metrics = {}
    columns = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            columns = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip("|"))]
        if columns is None:
            names = [c.lower() for c in cells]
            columns = {"type": names.index("type")} if names[0] == "metric" and "type" in names \
                else {}
            continue
        if not columns or set(cells[0]) <= set("-: "):
            continue
        kind = cells[columns["type"]].lower()
        stem = None
        full = None
        for name in re.findall(r"`([a-zA-Z_:][a-zA-Z0-9_:]*)`", cells[0]):
            if not name.startswith("_"):
                full = name
            else:
                assert full is not None, f"{name} has no full name before it: {line}"
                if stem is None:
                    stem = full.rsplit("_", name.count("_"))[0]
                name = stem + name
            # A series on both the head and the agents is listed in both tables, with one type.
            assert metrics.get(name, kind) == kind, \
                f"{name} is listed as {metrics[name]} and as {kind}"
            metrics[name] = kind
    return metrics


def target_jobs(text):
    """The `job` labels the doc says the Prometheus targets file gives its groups."""
    return set(re.findall(r'\{"job": "([^"]+)"', text))


def metric_base(name, documented):
    """(the documented series a sample name belongs to, the suffix that makes it one of its
    series): (name, "") for a listed name; a histogram's _bucket, _sum and _count and a summary's
    _sum and _count are its own. (None, "") for a name the doc does not list."""
    if name in documented:
        return name, ""
    for suffix in HISTOGRAM_SUFFIXES:
        base = name[: -len(suffix)]
        if not name.endswith(suffix):
            continue
        if documented.get(base) == "histogram" or \
                (documented.get(base) == "summary" and suffix != "_bucket"):
            return base, suffix
    return None, ""


def is_counter(name, documented):
    return documented.get(name) == "counter" or name.endswith("_total")


# --- PromQL: the metric names of an expression ------------------------------------------------

TOKEN = re.compile(r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<selector>\{(?:[^}"']|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')*\})
  | (?P<range>\[[^\]]*\])
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:ms|s|m|h|d|w|y)*)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<space>\s+)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)
NAME_MATCHER = re.compile(r"""__name__\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)\"""")
JOB_MATCHER = re.compile(r"""(?<!\w)job\s*(=~|=)\s*"((?:[^"\\]|\\.)*)\"""")


def substitute(expr, variables):
    """expr with every template variable replaced by its value in `variables` (a name missing
    there stays as it is)."""
    def value(match):
        name = match.group(1) or match.group(2) or match.group(3)
        return variables.get(name, match.group(0))
    return VARIABLE_REF.sub(value, expr)


@dataclasses.dataclass(eq=False)
class Call:
    """One open parenthesis around a metric: a function's or an aggregation's arguments (`name`,
    lower case), or a plain grouping (`name` ""). `grouping`: an aggregation's ("by", labels) or
    ("without", labels), None when it has neither (it keeps no label)."""
    name: str
    grouping: tuple = None


def inside(calls, functions):
    return any(call.name in functions for call in calls)


def closing_parenthesis(tokens, start):
    """The index of the ")" that closes the "(" at tokens[start]."""
    depth = 0
    for j in range(start, len(tokens)):
        depth += {"(": 1, ")": -1}.get(tokens[j][1], 0) if tokens[j][0] == "other" else 0
        if depth == 0:
            return j
    return len(tokens) - 1


def metric_uses(expr):
    """[(name, calls)] for every metric an expression selects: plain names, and names a
    `__name__` matcher selects (as "~regex"). calls: the Calls around it, outermost first; an
    aggregation's `by`/`without` is read before or after its arguments."""
    tokens = [(m.lastgroup, m.group()) for m in TOKEN.finditer(expr) if m.lastgroup != "space"]
    uses = []
    stack = []     # the Calls open here
    pending = None  # the function or aggregation whose "(" comes next
    closed = None   # the Call whose ")" came last
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        lowered = text.lower()
        just_closed = None
        if kind == "ident" and lowered in LABEL_LIST_KEYWORDS and following == "(":
            end = closing_parenthesis(tokens, i + 1)
            if lowered in ("by", "without"):
                call = pending or closed
                if call is not None and call.name in AGGREGATIONS:
                    call.grouping = (lowered, frozenset(t for k, t in tokens[i + 2:end]
                                                        if k == "ident"))
            i = end + 1
            closed = None
            continue
        if kind == "other" and text == "(":
            stack.append(pending or Call(""))
            pending = None
        elif kind == "other" and text == ")":
            just_closed = stack.pop() if stack else None
        elif kind == "ident":
            if following == "(" or (lowered in AGGREGATIONS and
                                    following.lower() in ("by", "without")):
                pending = Call(lowered)
            elif lowered not in AGGREGATIONS and lowered not in KEYWORDS:
                uses.append((text, tuple(stack)))
        elif kind == "selector":
            for op, regex in NAME_MATCHER.findall(text):
                assert op in ("=", "=~"), f"a negative __name__ matcher selects no metric: {expr}"
                uses.append((regex if op == "=" else "~" + regex, tuple(stack)))
        closed = just_closed
        i += 1
    return uses


def keeps_le(call):
    """Whether an aggregation keeps the `le` label histogram_quantile() needs."""
    if call.name in LABEL_KEEPING_AGGREGATIONS:
        return True
    if call.grouping is None:
        return False
    how, labels = call.grouping
    return ("le" in labels) == (how == "by")


# --- The dashboard ----------------------------------------------------------------------------

def load_dashboard():
    return json.loads(DASHBOARD.read_text())


def all_panels(dashboard):
    """Every panel, those inside collapsed rows included."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def query_panels(dashboard):
    return [p for p in all_panels(dashboard) if p.get("type") != "row"]


def variable_query(variable):
    query = variable.get("query")
    return query.get("query", "") if isinstance(query, dict) else (query or "")


def expressions(dashboard):
    """[(where, expr)]: every panel query, and every query variable's label_values() selector."""
    found = []
    for panel in query_panels(dashboard):
        for target in panel.get("targets", []):
            found.append((f"panel {panel.get('id')} {panel.get('title')!r} "
                          f"query {target.get('refId')}", target.get("expr", "")))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable_query(variable)
        match = re.fullmatch(r"\s*label_values\((?:(.+),\s*)?([a-zA-Z_]\w*)\)\s*", query)
        assert match, f"variable {variable.get('name')}: not a label_values() query: {query!r}"
        if match.group(1):
            found.append((f"variable {variable['name']}", match.group(1)))
    return found


def variable_values(dashboard):
    """What each variable stands for when its queries are checked: a regex for a multi-value
    variable, its first value otherwise."""
    values = dict(BUILTIN_VARIABLES)
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("multi") or variable.get("includeAll"):
            values[variable["name"]] = ".+"
        else:
            values[variable["name"]] = (variable.get("current") or {}).get("value") or "x"
    return values


def structure_problems(dashboard):
    problems = []
    inputs = {i.get("name"): i for i in dashboard.get("__inputs", [])}
    source = inputs.get("DS_PROMETHEUS", {})
    if source.get("type") != "datasource" or source.get("pluginId") != "prometheus":
        problems.append("__inputs has no Prometheus datasource input DS_PROMETHEUS")
    for key in ("title", "uid", "schemaVersion", "panels", "templating"):
        if key not in dashboard:
            problems.append(f"the dashboard has no {key}")
    if not 8 <= len(dashboard.get("uid", "")) <= 40:
        problems.append("the uid is not 8 to 40 characters")
    if dashboard.get("schemaVersion", 0) < 36:
        problems.append("schemaVersion is older than 36 (datasources as objects)")

    ids = [p.get("id") for p in all_panels(dashboard)]
    if len(ids) != len(set(ids)) or None in ids:
        problems.append(f"panel ids are missing or repeated: {ids}")
    cells = {}
    for panel in all_panels(dashboard):
        where = f"panel {panel.get('id')} {panel.get('title')!r}"
        if not panel.get("title"):
            problems.append(f"{where}: no title")
        grid = panel.get("gridPos", {})
        if not all(isinstance(grid.get(k), int) for k in "xywh") or grid["x"] + grid["w"] > 24:
            problems.append(f"{where}: gridPos {grid} is not on the 24-column grid")
            continue
        mine = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                for y in range(grid["y"], grid["y"] + grid["h"])}
        overlapped = sorted({cells[c] for c in mine if c in cells})
        if overlapped:
            problems.append(f"{where} overlaps panels {overlapped}")
        cells.update({c: panel.get("id") for c in mine})
    for panel in query_panels(dashboard):
        where = f"panel {panel.get('id')} {panel.get('title')!r}"
        if (panel.get("datasource") or {}).get("uid") != DATASOURCE_UID:
            problems.append(f"{where}: datasource is not {DATASOURCE_UID}")
        if not (panel.get("fieldConfig", {}).get("defaults", {}).get("unit")):
            problems.append(f"{where}: no unit")
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no query")
        for target in targets:
            if not target.get("expr", "").strip():
                problems.append(f"{where}: query {target.get('refId')} has no expr")
            if (target.get("datasource") or {}).get("uid") not in (None, DATASOURCE_UID):
                problems.append(f"{where}: query {target.get('refId')} has another datasource")
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query" and \
                (variable.get("datasource") or {}).get("uid") != DATASOURCE_UID:
            problems.append(f"variable {variable.get('name')}: datasource is not {DATASOURCE_UID}")
    return problems


def metric_problems(dashboard, documented):
    problems = []
    for where, expr in expressions(dashboard):
        uses = metric_uses(expr)
        if not uses:
            problems.append(f"{where}: selects no metric: {expr}")
        for name, calls in uses:
            if name.startswith("~"):
                matched = [m for m in documented if re.fullmatch(name[1:], m)]
                if not matched:
                    problems.append(f"{where}: __name__=~{name[1:]!r} matches no documented "
                                    f"metric")
                continue
            problems += [f"{where}: {p}" for p in use_problems(name, calls, documented)]
    return problems


def use_problems(name, calls, documented):
    """What is wrong with one metric selected inside `calls`."""
    base, suffix = metric_base(name, documented)
    if base is None:
        return [f"{name} is not in docs/observability.md"]
    problems = []
    rated = inside(calls, RATE_FUNCTIONS)
    if documented[base] == "histogram" and not suffix:
        problems.append(f"histogram {name} has no series of that name: select its _bucket, "
                        f"_sum or _count")
    elif suffix:
        if not inside(calls, HISTOGRAM_RATE_FUNCTIONS):
            problems.append(f"{name}, a {documented[base]}'s series, without rate()/increase()")
    elif rated and not is_counter(base, documented):
        problems.append(f"rate()/increase() on {name}, which is not a counter")
    elif not rated and is_counter(base, documented):
        problems.append(f"counter {name} without rate()/increase()")
    quantiles = [i for i, call in enumerate(calls) if call.name == "histogram_quantile"]
    if quantiles:
        if suffix != "_bucket":
            problems.append(f"histogram_quantile() over {name}, not a histogram's _bucket")
        for call in calls[quantiles[-1] + 1:]:
            if call.name in AGGREGATIONS and not keeps_le(call):
                problems.append(f"{call.name}() of {name} inside histogram_quantile() drops le: "
                                f"aggregate by (le, ...)")
    return problems


def target_job_problems(dashboard, jobs):
    """A `job` matcher is Prometheus's target label: what it matches must be one of the targets
    file's jobs (the Tessera job of a series is `exported_job`)."""
    problems = []
    for where, expr in expressions(dashboard):
        selectors = [m.group() for m in TOKEN.finditer(expr) if m.lastgroup == "selector"]
        for op, value in JOB_MATCHER.findall(" ".join(selectors)):
            matched = [j for j in jobs if (re.fullmatch(value, j) if op == "=~" else j == value)]
            if not matched:
                problems.append(f'{where}: job{op}"{value}" names no target job '
                                f'({", ".join(sorted(jobs))}); a series\' own job is '
                                f"exported_job")
    return problems


def variable_problems(dashboard):
    problems = []
    variables = {v["name"]: v for v in dashboard.get("templating", {}).get("list", [])}
    multi = {n for n, v in variables.items() if v.get("multi") or v.get("includeAll")}
    for where, expr in expressions(dashboard):
        for match in VARIABLE_REF.finditer(expr):
            name = match.group(1) or match.group(2) or match.group(3)
            if name not in variables and name not in BUILTIN_VARIABLES:
                problems.append(f"{where}: ${name} is not a template variable")
        for label, op, value in re.findall(r"""(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)\"""",
                                           expr):
            for match in VARIABLE_REF.finditer(value):
                name = match.group(1) or match.group(2) or match.group(3)
                if name in multi and op not in ("=~", "!~"):
                    problems.append(f"{where}: {label}{op}\"{value}\": the multi-value variable "
                                    f"${name} needs =~")
    return problems


def promtool_problems(promtool, dashboard, rules_file):
    """What `promtool check rules` says of every expression as a recording rule (none when all
    are valid PromQL)."""
    values = variable_values(dashboard)
    rules = [{"record": f"tessera_dashboard:query_{i}", "expr": substitute(expr, values)}
             for i, (_, expr) in enumerate(expressions(dashboard))]
    # JSON is YAML: the expressions need no quoting of their own.
    rules_file.write_text(json.dumps({"groups": [{"name": "tessera-dashboard", "rules": rules}]},
                                     indent=1))
    checked = subprocess.run([promtool, "check", "rules", str(rules_file)], capture_output=True,
                             text=True, timeout=60)
    output = checked.stdout + checked.stderr
    if checked.returncode != 0:
        return [output.strip()]
    if f"SUCCESS: {len(rules)} rules found" not in output:
        return [f"promtool did not check all {len(rules)} rules: {output.strip()}"]
    return []


def find_promtool():
    """promtool's path; skips the test, with the reason, where it is not installed."""
    promtool = shutil.which("promtool") or \
        ("/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None)
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; scripts/setup)")
    return promtool


# --- Tests ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def documented():
    return documented_metrics(METRICS_DOC.read_text())


@pytest.fixture(scope="module")
def jobs():
    return target_jobs(METRICS_DOC.read_text())


@pytest.fixture
def dashboard():
    return load_dashboard()


def test_the_doc_lists_the_series_with_their_types(documented):
    # The table format the checks read: a sample of each kind, the abbreviated names expanded.
    assert documented["tessera_nodes"] == "gauge"
    assert documented["tessera_head_events_total"] == "counter"
    assert documented["tessera_device_memory_total_bytes"] == "gauge"
    assert documented["tessera_object_store_objects"] == "gauge"
    assert documented["tessera_object_store_evicted_bytes_total"] == "counter"
    assert documented["tessera_rpc_server_handling_seconds"] == "histogram"
    assert documented["tessera_head_two_phase_commit_seconds"] == "histogram"
    assert all(kind in ("gauge", "counter", "histogram", "summary")
               for kind in documented.values()), documented
    # Counters, and only counters, end _total (the doc's convention the rate check leans on).
    assert all((kind == "counter") == name.endswith("_total") for name, kind in documented.items())


def test_the_dashboard_imports_cleanly(dashboard):
    assert structure_problems(dashboard) == []
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"node", "family"} <= names


def test_every_metric_is_documented_and_rates_are_on_counters(dashboard, documented):
    assert metric_problems(dashboard, documented) == []


def test_the_doc_names_the_target_jobs(jobs):
    assert jobs == {"tessera-head", "tessera-node"}


def test_every_job_matcher_names_a_target_job(dashboard, jobs):
    assert target_job_problems(dashboard, jobs) == []


def test_every_variable_is_defined_and_multi_values_are_matched_as_regexes(dashboard):
    assert variable_problems(dashboard) == []


def test_every_query_is_valid_promql(dashboard, tmp_path):
    promtool = find_promtool()
    assert promtool_problems(promtool, dashboard, tmp_path / "rules.yml") == []


# The checks catch what they are for: each on a copy of the dashboard broken one way.

def first_target(dashboard):
    return query_panels(dashboard)[0]["targets"][0]


def where(dashboard):
    """How the problems name the first panel's first query."""
    panel = query_panels(dashboard)[0]
    return f"panel {panel['id']} {panel['title']!r} query {panel['targets'][0]['refId']}"


def test_an_undocumented_metric_is_caught(dashboard, documented):
    broken = copy.deepcopy(dashboard)
    first_target(broken)["expr"] = 'sum(tessera_no_such_metric{node=~"$node"})'
    problems = metric_problems(broken, documented)
    assert len(problems) == 1 and "tessera_no_such_metric is not in docs" in problems[0]


def test_rate_on_a_gauge_and_a_bare_counter_are_caught(dashboard, documented):
    broken = copy.deepcopy(dashboard)
    first_target(broken)["expr"] = \
        "sum(rate(tessera_nodes[5m])) + sum by (node) (tessera_leases_total)"
    problems = metric_problems(broken, documented)
    assert any("rate()/increase() on tessera_nodes" in p for p in problems), problems
    assert any("counter tessera_leases_total without rate" in p for p in problems), problems


def test_metric_names_are_told_from_functions_labels_and_keywords():
    expr = ('sum by (node, resource) (rate(tessera_a_total{node=~"$node",x="sum(y)"}[5m] '
            'offset 1h)) / on (node) group_left(resource) max without (job) (tessera_b) '
            '+ {__name__=~"tessera_c_.+"} * 1e3 > bool 0.5 + histogram_quantile(0.9, '
            'sum(rate(tessera_d_bucket[5m])) by (le))')
    uses = metric_uses(expr)
    assert [name for name, _ in uses] == ["tessera_a_total", "tessera_b", "~tessera_c_.+",
                                          "tessera_d_bucket"]
    assert [[call.name for call in calls] for _, calls in uses] == \
        [["sum", "rate"], ["max"], [], ["histogram_quantile", "sum", "rate"]]
    assert uses[0][1][0].grouping == ("by", {"node", "resource"})
    assert uses[1][1][0].grouping == ("without", {"job"})
    # A `by` after the arguments is the aggregation's too.
    assert uses[3][1][1].grouping == ("by", {"le"})


def test_a_bare_bucket_and_other_histogram_misuse_are_caught(dashboard, documented):
    seconds = "tessera_rpc_server_handling_seconds"
    broken = copy.deepcopy(dashboard)
    targets = query_panels(broken)[0]["targets"]
    del targets[1:]
    targets[0]["expr"] = f"sum by (le) ({seconds}_bucket)"
    problems = metric_problems(broken, documented)
    assert problems == [f"{where(broken)}: {seconds}_bucket, a histogram's series, without "
                        f"rate()/increase()"], problems
    for expr, wanted in [
            (f"sum({seconds}_sum) / sum(rate({seconds}_count[5m]))",
             f"{seconds}_sum, a histogram's series, without rate()"),
            (f"rate({seconds}[5m])", f"histogram {seconds} has no series of that name"),
            (f"histogram_quantile(0.99, sum by (method) (rate({seconds}_bucket[5m])))",
             f"sum() of {seconds}_bucket inside histogram_quantile() drops le"),
            (f"histogram_quantile(0.99, sum(rate({seconds}_bucket[5m])) without (le))",
             f"sum() of {seconds}_bucket inside histogram_quantile() drops le"),
            (f"histogram_quantile(0.5, rate({seconds}_count[5m]))",
             f"histogram_quantile() over {seconds}_count, not a histogram's _bucket"),
            ("rate(tessera_nodes_bucket[5m])", "tessera_nodes_bucket is not in docs"),
            ("rate(tessera_tasks_total_count[5m])", "tessera_tasks_total_count is not in docs")]:
        targets[0]["expr"] = expr
        problems = metric_problems(broken, documented)
        assert len(problems) == 1 and wanted in problems[0], (expr, problems)


def test_a_histogram_read_as_it_should_be_passes(dashboard, documented):
    seconds = "tessera_head_two_phase_commit_seconds"
    fine = copy.deepcopy(dashboard)
    targets = query_panels(fine)[0]["targets"]
    del targets[1:]
    for expr in [f"histogram_quantile(0.99, sum by (le, outcome) (rate({seconds}_bucket[5m])))",
                 f"histogram_quantile(0.9, sum without (outcome) (increase({seconds}_bucket[1h])))",
                 f"sum(rate({seconds}_sum[5m])) / sum(rate({seconds}_count[5m]))",
                 f'sum(rate({seconds}_bucket{{le="0.1"}}[5m])) / sum(rate({seconds}_count[5m]))']:
        targets[0]["expr"] = expr
        assert metric_problems(fine, documented) == [], expr


def test_a_job_matcher_on_no_target_job_is_caught(dashboard, jobs):
    broken = copy.deepcopy(dashboard)
    targets = query_panels(broken)[0]["targets"]
    del targets[1:]
    targets[0]["expr"] = ('sum(rate(tessera_rpc_server_handled_total{job="tessera_head"}[5m])) + '
                          'sum(rate(tessera_rpc_server_handled_total{job=~"tessera-.+"}[5m]))')
    problems = target_job_problems(broken, jobs)
    assert len(problems) == 1 and 'job="tessera_head" names no target job' in problems[0], \
        problems


def test_an_unknown_variable_and_a_multi_value_equality_are_caught(dashboard):
    broken = copy.deepcopy(dashboard)
    first_target(broken)["expr"] = \
        'sum(tessera_nodes{state="$nosuch"}) + sum(tessera_workers_running{node="$node"})'
    problems = variable_problems(broken)
    assert any("$nosuch is not a template variable" in p for p in problems), problems
    assert any("$node needs =~" in p for p in problems), problems


def test_invalid_promql_is_caught(dashboard, tmp_path):
    promtool = find_promtool()
    broken = copy.deepcopy(dashboard)
    first_target(broken)["expr"] = "sum by (state) (tessera_nodes"
    problems = promtool_problems(promtool, broken, tmp_path / "rules.yml")
    assert len(problems) == 1, problems
    assert "tessera_dashboard:query_0" in problems[0] and "unclosed left parenthesis" in problems[0]
