#!/usr/bin/env python3
"""Seeds tests/fuzz/corpus with small valid recordings (512-byte pages)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import recording_fixture as rf  # noqa: E402

OUT = os.path.join(HERE, "corpus")
SEEDS = {
    "full.db": {},
    "two_flushes.db": {"flushes": 2},
    "no_states.db": {"flushes": 4, "states": False},
    "crashed.db": {"flushes": 4, "complete": False},
}

os.makedirs(OUT, exist_ok=True)
for name, over in SEEDS.items():
    rf.make_recording(os.path.join(OUT, name), page_size=512, **over)
    print(name, os.path.getsize(os.path.join(OUT, name)))
