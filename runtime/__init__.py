"""trainform.runtime: what a training process imports to report where its time goes.

The run-event protocol (trainform.runtime.protocol, docs/run-events.md) and its writer
(trainform.runtime.events). Public API:

- `phase`: `with phase("compute", step=n): ...` times one phase of this process;
- `record`: a phase the caller timed itself;
- `flush`: write what is summed in memory now;
- `recorder`: this process's `Recorder`;
- `FORMAT_VERSION`, `EVENTS_VARIABLE`, `PHASES`: the protocol's version, the environment
  variable naming the events file, the phases a breakdown names.

The bottom layer of trainform: it imports the standard library only, so a training
process pays nothing for it and a job without trainform can write the format itself.
"""

from trainform.runtime.events import Recorder, Span, flush, phase, record, recorder
from trainform.runtime.protocol import EVENTS_VARIABLE, FORMAT_VERSION, PHASES

__all__ = [
    "EVENTS_VARIABLE",
    "FORMAT_VERSION",
    "PHASES",
    "Recorder",
    "Span",
    "flush",
    "phase",
    "record",
    "recorder",
]
