#!/usr/bin/env python3
"""The upstream suite's results, for e2e/k8s/test-upstream.sh.

  upstream-table.py junit --focus RE --skip RE REPORT_DIR
      JUnit reports (ginkgo writes junit_NN.xml per parallel process) ->
      "result<TAB>seconds<TAB>name" lines on stdout, one per test the focus
      selects (passed, failed, or skipped when the suite skipped it at run
      time); fails when the directory holds no report.
  upstream-table.py explained --expected TSV CONTROL.tsv
      exit 0 when every failure of the control is explained by TSV.
  upstream-table.py table --expected TSV [--report-only] [--enforcing RE] PASS.tsv...
      the table: a row per test, a column per pass (the first is the control;
      a pass is named by its file's base name). The DNS tests come apart:
      they test the cluster's DNS server (a fixture of this project) as much
      as the CNI. Fails (exit 1) unless --report-only when a test that passes
      on the control (or that the control did not run: its suite may be
      narrower) does not pass on every other pass that ran it, or when the control
      fails a test that TSV does not explain. The tests whose name matches
      --enforcing RE (the NetworkPolicy suite) must pass on every pass but
      the control whatever the control did, and the control must fail some
      of them (else they prove no enforcement: the control plugin enforces
      nothing).

The expected file: "REGEX<TAB>reason" lines (# comments); a control failure
whose name matches REGEX prints the reason instead of failing the run.
"""
import argparse
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET

PREFIX = "[sig-network] "


def junit(args):
    focus, skip = re.compile(args.focus), re.compile(args.skip)
    files = sorted(glob.glob(os.path.join(args.report_dir, "junit_*.xml")))
    if not files:
        sys.exit(f"no junit_*.xml in {args.report_dir}")
    rows = {}
    for path in files:
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("name", "")
            if not focus.search(name) or skip.search(name):
                continue
            if case.find("failure") is not None or case.find("error") is not None:
                result = "failed"
            elif case.find("skipped") is not None:
                result = "skipped"
            else:
                result = "passed"
            # a test appears in one process's report as run and in the
            # others as skipped: the run wins
            old = rows.get(name)
            if old is None or old[0] == "skipped":
                rows[name] = (result, float(case.get("time", "0") or 0))
    for name in sorted(rows):
        result, secs = rows[name]
        print(f"{result}\t{secs:.0f}\t{name}")


def read_tsv(path):
    rows = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t", 2)
            if len(parts) == 3:
                rows[parts[2]] = (parts[0], parts[1])
    return rows


def read_expected(path):
    out = []
    if not path or not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            regex, _, reason = line.rstrip("\n").partition("\t")
            out.append((re.compile(regex), reason.strip()))
    return out


def explanation(expected, name):
    for regex, reason in expected:
        if regex.search(name):
            return reason
    return None


def explained(args):
    expected = read_expected(args.expected)
    bad = [n for n, (r, _) in read_tsv(args.control).items() if r == "failed" and not explanation(expected, n)]
    for name in bad:
        print(f"unexplained control failure: {name}", file=sys.stderr)
    sys.exit(1 if bad else 0)


def cell(row):
    if row is None:
        return "-"
    result, secs = row
    return {"passed": "pass", "failed": "FAIL", "skipped": "skip"}.get(result, result) + f" {secs}s"


def table(args):
    passes = [(os.path.basename(p).removesuffix(".tsv"), read_tsv(p)) for p in args.passes]
    expected = read_expected(args.expected)
    names = sorted({n for _, rows in passes for n in rows})
    control_name, control = passes[0]
    width = max([len(n) - len(PREFIX) for n in names] + [20])
    problems, notes = [], []

    def section(title, subset):
        if not subset:
            return
        print(f"\n{title}")
        print(f"  {'test':<{width}}  " + "  ".join(f"{p:<10}" for p, _ in passes))
        for name in subset:
            short = name.removeprefix(PREFIX)
            cells = [cell(rows.get(name)) for _, rows in passes]
            print(f"  {short:<{width}}  " + "  ".join(f"{c:<10}" for c in cells))
            judge(name)

    focus_of = dict(f.split("=", 1) for f in args.focus_of or [])

    def ran(p, name):
        # Whether pass p's suite covered the test (a pass may run only part).
        return p not in focus_of or re.search(focus_of[p], name) is not None

    def judge(name):
        base = control.get(name)
        enforcing = args.enforcing is not None and re.search(args.enforcing, name)
        if enforcing:
            for p, rows in passes[1:]:
                got = rows.get(name)
                if ran(p, name) and (got is None or got[0] != "passed"):
                    problems.append(f"{p}: {name} does not pass")
        if base is None and not enforcing:
            # Not run on the control (a pass's suite wider than the
            # control's): it must pass wherever it ran, with no control to
            # blame an environment's failure on.
            for p, rows in passes[1:]:
                got = rows.get(name)
                if ran(p, name) and (got is None or got[0] != "passed"):
                    problems.append(f"{p}: {name} does not pass (not run on the {control_name})")
            return
        if base is None:
            return
        if base[0] == "passed" and not enforcing:
            for p, rows in passes[1:]:
                got = rows.get(name)
                if ran(p, name) and (got is None or got[0] != "passed"):
                    problems.append(f"{p}: {name} passes on the {control_name}, not here")
        elif base[0] == "failed":
            reason = explanation(expected, name)
            if reason:
                notes.append(reason)
            else:
                problems.append(f"{name}: fails on the {control_name}, unexplained")

    dns = [n for n in names if n.startswith(PREFIX + "DNS ")]
    rest = [n for n in names if n not in dns]
    section("Network tests", rest)
    section("DNS tests (they test the cluster's DNS server, e2e/k8s-dns, as much as the CNI)", dns)
    print()
    for p, rows in passes:
        counts = {}
        for r, _ in rows.values():
            counts[r] = counts.get(r, 0) + 1
        print(f"  {p:<10} " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if args.enforcing is not None:
        judged = [r for n, (r, _) in control.items() if re.search(args.enforcing, n)]
        if judged and "failed" not in judged:
            problems.append(f"the {control_name} fails none of the enforcement tests: they prove nothing")
    for reason in sorted(set(notes)):
        print(f"  note: {notes.count(reason)} fail on the {control_name}, as expected: {reason}")
    for problem in problems:
        print(f"  {'REPORTED' if args.report_only else 'FAIL'}: {problem}")
    if problems and not args.report_only:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("junit")
    j.add_argument("--focus", required=True)
    j.add_argument("--skip", default="^$")
    j.add_argument("report_dir")
    e = sub.add_parser("explained")
    e.add_argument("--expected")
    e.add_argument("control")
    t = sub.add_parser("table")
    t.add_argument("--expected")
    t.add_argument("--report-only", action="store_true")
    t.add_argument("--enforcing", metavar="RE")
    t.add_argument("--focus-of", action="append", metavar="PASS=RE",
                   help="the tests pass PASS ran (default: every test of the table)")
    t.add_argument("passes", nargs="+")
    args = ap.parse_args()
    {"junit": junit, "explained": explained, "table": table}[args.cmd](args)


if __name__ == "__main__":
    main()
