"""opsdk.build: the compiler driver of `opsdk build`."""
