"""The integrations' call counts (their stats()): calls sage2 served, and calls sent to the package's
own attention by reason. Thread-safe; nothing is counted while torch.compile traces (a traced call
is not a call)."""
import collections
import threading

import torch


class CallCounts:
    def __init__(self):
        self._lock = threading.Lock()
        self._served = 0
        self._fallback = collections.Counter()

    def count(self, why=None):
        """One call: served by sage2 (why None) or sent elsewhere for `why`."""
        if torch.compiler.is_compiling():
            return
        with self._lock:
            if why is None:
                self._served += 1
            else:
                self._fallback[why] += 1

    def snapshot(self):
        with self._lock:
            return {"sage2": self._served, "fallback": dict(self._fallback)}

    def reset(self):
        with self._lock:
            self._served = 0
            self._fallback.clear()
