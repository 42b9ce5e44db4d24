"""Kernels: loading built artefacts, choosing a kernel per device, eager calls."""
