"""cond and while_loop: builders, run rules and gradient rules."""
