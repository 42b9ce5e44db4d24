"""The graph IR: Graph, Operation, Tensor, sub-graphs of cond/while, device names."""
