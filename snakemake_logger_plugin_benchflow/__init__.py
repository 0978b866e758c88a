"""benchflow's Snakemake logger plugin: `snakemake --logger benchflow` (Makefile, profiles).

An adapter: it turns Snakemake's log records into calls of workflow.stages.progress's
`Progress` and prints the events it returns (render/progress.py says what they are).
Snakemake finds it by its module name's prefix, snakemake_logger_plugin_.

Modes (`--logger-benchflow-format`):
- text (default): Snakemake's own messages as its default handler writes them, less its
  "Finished jobid" and "N of M steps" lines (the ETA line says the same and more), plus
  a line per finished case and A/B row, the ETA after each finished job, the summary at
  the end. Colours (rich) on a terminal only: a pipe or file gets plain text.
- quiet: the summary on stdout; of Snakemake's messages only warnings and errors (a
  failed job's block with its log), on stderr, so that a failure is never silent.
- json: one JSON object per line on stdout (events case, ab, eta, summary) for CI;
  Snakemake's warnings and errors on stderr, so stdout stays parseable.

Text from outside (a tool's error, a case id, a dispatch name, a job's log in Snakemake's
error block) is printed with its control characters escaped (render/text.printable) in
text and quiet modes: a terminal would obey them (clear the screen, set its title). JSON
escapes them itself. A reader that goes away (`| head -1`) ends our output to that stream,
quietly: the run goes on to its end (its results are kept), printing nothing more there.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field

from rich.console import Console
from rich.text import Text
from snakemake.logging import DefaultFilter
from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

from snakemake_logger_plugin_benchflow.config_args import refuse_bad_config
from workflow.render.progress import ab_text, case_text, eta_text, summary_lines
from workflow.render.text import printable
from workflow.stages.progress import Progress

# Snakemake imports this plugin while it builds its argument parser, before it parses
# --config: an override it would refuse with a traceback is refused here in one line.
refuse_bad_config(sys.argv)

FORMATS = ("text", "quiet", "json")
# A case line's colour on a terminal, by status (a regression's case is "degraded").
STYLES = {"ok": "green", "degraded": "yellow", "failed": "bold red", "unsupported": "dim",
          "skipped": "dim", "compile-only": "cyan"}
# Replaced by the ETA line in text mode.
DROPPED_IN_TEXT = (LogEvent.PROGRESS, LogEvent.JOB_FINISHED)


class _Console(Console):
    """rich's Console, but a reader that went away is the handler's to deal with: rich's
    own answer is SystemExit(1), which would end Snakemake's run in the middle."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # rich drops what it would print from now on
        raise BrokenPipeError


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    format: str = field(default="text", metadata={
        "help": "text: live lines and a summary; quiet: only the summary; json: one JSON "
                "event per line on stdout (case, ab, eta, summary)",
        "choices": FORMATS, "type": str})


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        self.mode = getattr(self.settings, "format", "text") or "text"
        if self.mode not in FORMATS:
            raise ValueError(f"--logger-benchflow-format: {self.mode!r}; expected one of "
                             f"{', '.join(FORMATS)}")
        own = sys.stdout if self.common_settings.stdout else sys.stderr
        # soft_wrap: rich would otherwise wrap long lines at 80 columns in a pipe.
        self.out = _Console(file=own if self.mode == "text" else sys.stdout, soft_wrap=True,
                           highlight=False, no_color=self.common_settings.nocolor)
        self.err = _Console(file=own if self.mode == "text" else sys.stderr, soft_wrap=True,
                           highlight=False, no_color=self.common_settings.nocolor)
        # Snakemake's default filter (--quiet, --printshellcmds, ...) decides which of its
        # messages print; the progress is told every event, even with --quiet.
        cs = self.common_settings
        self.shown = DefaultFilter(cs.quiet, cs.debug_dag, cs.verbose, cs.dryrun,
                                   cs.printshellcmds)
        self.progress = Progress()
        self.started = self.errors = self.closed = False
        self.gone: set[int] = set()  # the descriptors whose reader went away (EPIPE)

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        # Apart: a message that cannot be shown must not lose the progress, and a bug
        # here must not stop the run (logging reports it on stderr).
        try:
            self._snakemake_message(record, event)
        except Exception:
            self.handleError(record)
        try:
            for out in self._track(record, event):
                self._print(out)
        except Exception:
            self.handleError(record)

    def _snakemake_message(self, record: logging.LogRecord, event) -> None:
        # A job's error counts when no retry finishes it (Progress.failed); any other
        # error fails the run.
        if record.levelno >= logging.ERROR and event != LogEvent.JOB_ERROR:
            self.errors = True
        if not self.shown.filter(record):
            return
        if self.mode == "text" and event in DROPPED_IN_TEXT:
            return
        if self.mode != "text" and record.levelno < logging.WARNING:
            return
        text = self.format(record)
        if text and text != "None":
            style = ("red" if record.levelno >= logging.ERROR
                     else "yellow" if record.levelno >= logging.WARNING else None)
            self._write(self.err, lambda: self.err.print(Text(printable(text), style=style or "")))

    def _track(self, record: logging.LogRecord, event) -> list[dict]:
        p, get = self.progress, record.__dict__.get
        if event == LogEvent.WORKFLOW_STARTED:
            # Where the run works (--directory): its outputs are relative to it.
            self.started = True
            p.started(get("cwd") or os.getcwd())
        elif event == LogEvent.RUN_INFO:
            p.plan(get("stats") or {})
        elif event == LogEvent.JOB_INFO:
            p.job_info(get("jobid"), get("rule_name"), get("output") or [], get("log") or [],
                       dict(get("resources") or {}))
        elif event == LogEvent.JOB_FINISHED:
            return p.job_finished(get("job_id"))
        elif event == LogEvent.PROGRESS:
            return p.progress(get("done"), get("total"))
        elif event == LogEvent.JOB_ERROR:
            p.job_error(get("jobid"), get("rule_name"), get("log") or [])
        return []

    def _print(self, event: dict) -> None:
        if self.mode == "json":
            def line() -> None:
                # json.dumps escapes control characters (\u001b): one valid line per event.
                self.out.file.write(json.dumps(event) + "\n")
                self.out.file.flush()

            self._write(self.out, line)
        elif event["event"] == "summary":
            for line in summary_lines(event):
                style = "bold" if line.startswith("──") else ""
                self._write(self.out, lambda line=line, style=style: self.out.print(
                    Text(printable(line), style=style)))
        elif self.mode == "text":
            text = {"case": case_text, "ab": ab_text, "eta": eta_text}[event["event"]](event)
            style = STYLES.get(event.get("status"), "dim" if event["event"] == "eta" else "")
            self._write(self.out, lambda: self.out.print(Text(printable(text), style=style)))

    def _write(self, console: Console, write) -> None:
        """Calls `write` (a print to `console`) unless the console's reader went away; on
        the first EPIPE its descriptor is pointed at /dev/null, as Python's documentation
        on SIGPIPE advises, so that nothing more (our lines, the interpreter's flush at
        exit) fails writing there, and the run ends as it would have."""
        fd = _descriptor(console.file)
        if fd in self.gone:
            return
        try:
            write()
        except BrokenPipeError:
            if fd is not None:
                self.gone.add(fd)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, fd)
                os.close(devnull)

    def close(self) -> None:
        # Once: Snakemake closes its handlers when the run ends, logging again at exit.
        if not self.closed and self.started and not self.common_settings.dryrun:
            self.closed = True
            success = not self.errors and not self.progress.failed
            self._print(self.progress.summary(success))
        self.closed = True
        super().close()

    @property
    def writes_to_stream(self) -> bool:
        return True  # replaces Snakemake's default stream handler (text mode keeps its lines)

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True  # Snakemake's default filter, applied to its own messages only

    @property
    def has_formatter(self) -> bool:
        return False  # Snakemake's default formatter writes its own messages

    @property
    def needs_rulegraph(self) -> bool:
        return False


def _descriptor(stream) -> int | None:
    """The file descriptor under a stream; None for one without (a StringIO in tests)."""
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError):
        return None
