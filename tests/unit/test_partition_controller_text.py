"""What the SlurmPartition controller's log lines and Events show of a long node list: the first few names
and how many in all (a label change moving 1,000 nodes is one `+a,+b,...` write)."""

from syncer.controllers.partitions.controller import _nodes_text


def test_short_lists_are_shown_whole_and_long_ones_counted():
    assert _nodes_text("+a,+b,-c") == "+a,+b,-c"
    assert _nodes_text(None) == _nodes_text("") == "(none)"
    moved = ",".join([*(f"+n{i}" for i in range(990)), *(f"-m{i}" for i in range(10))])
    assert _nodes_text(moved) == "+n0,+n1,+n2,+n3,+n4,+n5,+n6,+n7,... (+990, -10)"
    assert _nodes_text(",".join(f"n{i}" for i in range(20)), shown=2) == "n0,n1,... (20 nodes)"
