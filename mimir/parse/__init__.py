"""Source to dataflow graph. Submodules are imported on demand (the shim needs only `subset`)."""
