"""The parser events a load's walks may still read, shared across its files.

One `EventBudget` lives for a load (specs.loader makes it, with the parsed files of
specs.loaded_files): the tag scans of specs.yaml_tags and the number scans of the loader
walk YAML events with specs.positions, and all of them spend it, so many files cannot add
up to a long run. It sits apart from specs.positions so that holding one does not import
ruamel.

It also holds `rereads`: how many more files a parse error may have re-read whole by
ruamel to find its position (specs.yamlio). specs.loader keeps it no larger than the room
left in the run's diagnostics (specs.diagnostic_budget): a position for a diagnostic that
would not be shown is not worth a re-read.
"""

from __future__ import annotations


class EventBudget:
    """Parser events that walks sharing this budget may still read (one per load for the
    scans of tags and numbers, so many files cannot add up to a long run)."""

    def __init__(self, events: int, rereads: int | None = None) -> None:
        self.events = events
        self.rereads = rereads  # None: no limit
