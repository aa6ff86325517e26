"""``attention-course report / similarity / export-checks / export-canvas / feedback`` (kept import-light:
torch and matplotlib load only when one of these commands runs).

``report`` and ``feedback`` need the assignment named (a course has several; nbgrader's own commands
ask too), and one the course has no hidden checks for is a usage error that lists the ones there are.
The exports read the gradebook alone: any number of its assignments, all by default (one it lacks is
skipped and said)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attention_platform.course.assignments import assignment_name
from attention_platform.course.notebooks import COURSE_ROOT


def register(commands) -> None:
    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--course", type=Path, default=COURSE_ROOT,
                       help="course directory whose gradebook.db is read (default: this repository)")
        p.add_argument("--db-url", default=None,
                       help="gradebook database URL (default: $NBGRADER_DB_URL or <course>/gradebook.db)")

    report = commands.add_parser("report", help="write the misconception report (self-contained HTML) "
                                                "for an assignment from the gradebook")
    report.add_argument("assignment", type=assignment_name, help="the assignment to report on (its nbgrader id)")
    report.add_argument("--out", type=Path, default=None,
                        help="HTML file to write (default: <course>/build/reports/<assignment>.html)")
    common(report)
    report.set_defaults(run=_with_report_errors(_report))

    similar = commands.add_parser("similarity", help="write the similarity report (self-contained HTML) for an "
                                                      "assignment: pairs of students whose answers are unusually alike")
    similar.add_argument("assignment", type=assignment_name, help="the assignment to compare (its nbgrader id)")
    similar.add_argument("--out", type=Path, default=None,
                         help="HTML file to write (default: <course>/build/reports/<assignment>-similarity.html)")
    similar.add_argument("--pairs", type=int, default=30, help="how many pairs to show, the closest first")
    common(similar)
    similar.set_defaults(run=_with_report_errors(_similarity))

    feedback = commands.add_parser("feedback", help="nbgrader generate_feedback with progress and a summary")
    feedback.add_argument("assignment", type=assignment_name, help="the assignment whose feedback to generate")
    feedback.add_argument("--course", type=Path, default=COURSE_ROOT, help="course directory (default: this repository)")
    feedback.add_argument("--student", action="append", default=[], help="only this student (repeatable)")
    feedback.set_defaults(run=_feedback)

    for name, what in (("export-checks", "per-check breakdown CSV (one row per student and check)"),
                       ("export-canvas", "Canvas-gradebook import CSV")):
        p = commands.add_parser(name, help=f"export a {what} via our nbgrader export plug-in")
        p.add_argument("assignment", nargs="*", help="assignments to export (default: all)")
        p.add_argument("--to", type=Path, default=None, help="CSV file to write")
        p.add_argument("--student", action="append", default=[], help="export only this student (repeatable)")
        common(p)
        p.set_defaults(run=_with_report_errors(_export))
        if name == "export-canvas":
            p.add_argument("--roster", type=Path, default=None,
                           help="a Canvas Gradebook export: copy Student/ID/SIS/Section from it")
            p.add_argument("--id-column", default="SIS Login ID", choices=["SIS Login ID", "SIS User ID", "ID"],
                           help="Canvas column that receives the nbgrader student id")


def _with_report_errors(command):
    """Run ``command(args, db_url)``; a ReportError becomes one line on stderr and exit status 1."""

    def run(args) -> int:
        from attention_platform.reporting.report import ReportError, default_db_url

        try:
            return command(args, args.db_url or default_db_url(args.course))
        except ReportError as exc:
            print(f"attention-course {args.command}: {exc}", file=sys.stderr)
            return 1

    return run


def _feedback(args) -> int:
    from attention_platform.reporting.generate_feedback import generate_feedback

    return generate_feedback(Path(args.course), args.assignment, students=args.student)


def _report(args, db_url: str) -> int:
    from attention_platform.reporting.report import summary_text, write_report

    out = args.out or Path(args.course) / "build" / "reports" / f"{args.assignment}.html"
    data = write_report(db_url, args.assignment, out, course=args.course)
    print(summary_text(data, out.resolve()))
    return 0


def _similarity(args, db_url: str) -> int:
    from attention_platform.reporting.similarity import SimilarityError, collect, render_html, summary_text

    out = args.out or Path(args.course) / "build" / "reports" / f"{args.assignment}-similarity.html"
    try:
        data = collect(Path(args.course), args.assignment, db_url=db_url, limit=args.pairs)
    except SimilarityError as exc:
        print(f"attention-course similarity: {exc}", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(data), encoding="utf-8")
    print(summary_text(data, out.resolve()))
    return 0


def _export(args, db_url: str) -> int:
    import time

    from attention_platform.reporting.exports import CanvasExportPlugin, CheckBreakdownExportPlugin, run_export

    started = time.monotonic()
    canvas = args.command == "export-canvas"
    default = "canvas_grades.csv" if canvas else "check_breakdown.csv"
    to = args.to or Path(args.course) / "build" / "exports" / default
    traits = {} if canvas else {"course_root": str(Path(args.course).resolve())}
    if canvas:
        traits["id_column"] = args.id_column
        if args.roster:
            traits["roster"] = str(args.roster)
    summary = run_export(CanvasExportPlugin if canvas else CheckBreakdownExportPlugin, db_url, to=str(to),
                         assignments=args.assignment, students=args.student, **traits)
    what = "Canvas gradebook CSV" if canvas else "Per-check breakdown CSV"
    print(f"{what} for {', '.join(summary['assignments']) or 'no assignment'}")
    print(f"  written to   {Path(summary['dest']).resolve()}")
    print(f"  students     {summary['students']}")
    if canvas:
        print(f"  ids in       {summary['id_column']}; {summary['missing_submissions']} missing submission(s) "
              "exported as 0")
        if summary["unmatched_in_roster"]:
            print(f"  not in the roster: {', '.join(summary['unmatched_in_roster'])}")
    else:
        print(f"  rows         {summary['rows']}: {summary['passed']} passed, {summary['failed']} failed, "
              f"{summary['not graded']} not graded, {summary['no submission']} without a submission, "
              f"{summary['not submitted']} in notebooks not submitted")
        if summary["unknown_grade_ids"]:
            print(f"  note: not in the check registry (renamed since grading?): "
                  f"{', '.join(summary['unknown_grade_ids'])}")
    if not summary["assignments"]:
        print("  note: the gradebook has no (matching) assignment: the file has a header only")
    print(f"  done in {time.monotonic() - started:.1f} s")
    return 0
