"""One package per controller: each a pure plan beside its controller (issue 46)."""
