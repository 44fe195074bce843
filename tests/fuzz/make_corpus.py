#!/usr/bin/env python3
"""Seeds tests/fuzz/corpus with small valid recordings (512-byte pages).

python3 make_corpus.py [NAME...]: only those seeds. The four schema-1
seeds were made when docs/recording.md was schema 1 and stay as they are
(tests/golden reads them: they test the reader's schema-1 path); v2.db has
what schema 2 added.
"""
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
    "v2.db": {"version": 2},
}

os.makedirs(OUT, exist_ok=True)
for name, over in SEEDS.items():
    if sys.argv[1:] and name not in sys.argv[1:]:
        continue
    rf.make_recording(os.path.join(OUT, name), page_size=512, **over)
    print(name, os.path.getsize(os.path.join(OUT, name)))
